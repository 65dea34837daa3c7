"""A request without a conversation id (an agent resending its history) finds its stored
conversation by the chain hashes of its prefixes: the longest stored one that the incoming
messages begin with, if exactly one is that long."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.conversations.fingerprint import chain_hashes
from app.conversations.repository import conversation_repository as repository
from app.conversations.resolved import ResolvedConversation
from app.db.models import Conversation, PromptLedgerRow, new_id

__all__ = ["RECENT_HEADS", "match_by_prefix"]

# How many of the incoming sequence's last heads are looked up first.
RECENT_HEADS = 8

_Candidate = tuple[Conversation, PromptLedgerRow | None]


async def match_by_prefix(
    session: AsyncSession, tenant_id: str, incoming_hashes: list[str]
) -> ResolvedConversation:
    chain = chain_hashes(incoming_hashes)
    # The longest stored match decides. An agent's is a few messages short of what it resends
    # (its last call's answer and tool results are new): the last heads are looked up first,
    # in a statement of a fixed shape that SQLite keeps prepared; a match there is longer than
    # any the earlier heads could give, so those are read only without one.
    recent = len(chain) - RECENT_HEADS
    best = _longest(
        chain, await repository.find_by_heads(session, tenant_id, chain[max(recent, 0) :])
    )
    if not best and recent > 0:
        best = _longest(chain, await repository.find_by_heads(session, tenant_id, chain[:recent]))
    if len(best) == 1:
        found, ledger = best[0]
        return ResolvedConversation(
            found.id, found, found.message_count, ledger_row=ledger, ledger_read=True
        )
    # No match, or an ambiguous one: a new conversation.
    return ResolvedConversation(new_id("conv"), None, 0)


def _longest(chain: list[str], candidates: list[_Candidate]) -> list[_Candidate]:
    """The candidates whose whole stored sequence begins ``chain``, longest only (more than
    one: ambiguous)."""
    best: list[_Candidate] = []
    for candidate, ledger in candidates:
        count = candidate.message_count
        if count == 0 or count > len(chain) or chain[count - 1] != candidate.head_hash:
            continue
        if not best or count > best[0][0].message_count:
            best = [(candidate, ledger)]
        elif count == best[0][0].message_count:
            best.append((candidate, ledger))
    return best
