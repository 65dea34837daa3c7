"""The prompt's single owner: append-only between rebases (PROMPT.md, ARCHITECTURE.md §6).

The owner keeps the prompt a conversation's last call sent (its ``Ledger``: the messages as
sent, provider cache marks aside). The rule, written once here:

- **keep**: the next call sends the ledger's messages byte for byte, then what is new (the
  previous answer, the new tool results or user message, each processed once as it enters);
- **rebase**: only when keeping is impossible or the next prompt would pass the high-water mark
  of the budget (in the provider's tokens, calibrated). Then the prompt is assembled anew down
  to the low-water mark, and every pending change (compaction summaries, cleared or re-planned
  tool results, a new memory bundle) lands in that one rewrite.

Components that want earlier content changed (planner, compaction, memory, recall, clearing)
never touch a kept prompt: their work is what the next rebase assembles. ``decide`` is pure;
the pipeline (app/turns/pipeline.py) loads the ledger, asks, and stores the new one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypedDict

import orjson

from app.context.cache_policy import CachePolicy
from app.context.metadata import ArtifactOutcomeRecord
from app.wire.chat import ChatMessage

__all__ = [
    "Continuation",
    "Decision",
    "Ledger",
    "LedgerValues",
    "PromptRecord",
    "Watermarks",
    "appended",
    "NextPart",
    "decide",
    "join_arrays",
    "next_part",
]

KEPT = "kept"


@dataclass(frozen=True, slots=True)
class Ledger:
    """The prompt last sent for a conversation, and what it answered."""

    epoch: int
    answer_sequence: int  # the stored answer this prompt produced
    answer_tokens: int  # its tokens: the next call appends it
    own_system_hash: str
    attachments_key: str
    tokens: int  # contextgate's count of ``messages``
    system_tokens: int
    memory_tokens: int
    chain_hash: str  # the seal's hash after ``messages`` (app/context/seal.py)
    cleared_tool_results: int  # placeholders in ``messages``, and the tokens they save
    cleared_tokens: int
    messages_excluded: int  # stored messages the prompt leaves out (cut or compacted)
    messages: tuple[ChatMessage, ...]
    artifacts: tuple[ArtifactOutcomeRecord, ...]  # of each artifact in the prompt
    # As stored (app/db/models/prompt_ledger.py): the newest part, its epoch's base part, and
    # the orjson arrays of the parts from the base on, which ``messages`` decodes.
    part: int = 0
    base_part: int = 0
    encoded_parts: tuple[bytes, ...] = ()


@dataclass(frozen=True, slots=True)
class Watermarks:
    """The budget and its marks, all in contextgate's own (calibrated) tokens."""

    budget: int
    high: int
    low: int

    @classmethod
    def of(cls, budget: int, policy: CachePolicy, fixed: int = 0) -> Watermarks:
        """``fixed``: what every call sends whatever the history (system prompts, tools).

        The high-water mark sits on the room the client leaves: ``fixed + ratio x (budget -
        fixed)``. An agent whose own system prompt and tools take a third of the budget then
        appends as many tool results between rebases as one with a short prompt would, instead
        of rebasing twice as often. The low-water mark stays a share of the whole budget: a
        rebase clears down to it (all the loop's older results, when the fixed part is above
        it), which leaves the most room before the next one. A ratio the request gave (or
        Anthropic's ``trigger``) is a share of the whole budget, as the client wrote it.
        """
        fixed = max(0, min(fixed, budget)) if policy.high_water_of_room else 0
        high = max(1, fixed + int((budget - fixed) * policy.high_water_ratio))
        low = max(1, int(budget * min(policy.low_water_ratio, policy.high_water_ratio)))
        return cls(budget, high, low)  # high >= ratio x budget >= low


@dataclass(frozen=True, slots=True)
class Continuation:
    """What this call brings after the conversation's stored messages."""

    newest_sequence: int  # the newest stored message (-1: none)
    continues_at_end: bool  # False: a branch, or the client rewrote stored history
    own_system_hash: str
    attachments_key: str
    tail_tokens: int  # the previous answer and the new messages, raw
    fixed_tokens: int  # sent beside the messages every call: tools, the reply primer
    asked_to_rebase: bool = False  # the client asked (``context.rebase``: its own compaction)


@dataclass(frozen=True, slots=True)
class Decision:
    keep: bool
    reason: str  # KEPT, or why this call rebases
    ledger: Ledger | None  # the ledger kept (None on a rebase)
    epoch: int  # the epoch of the prompt this call sends

    @property
    def rebase(self) -> bool:
        return not self.keep


def decide(ledger: Ledger | None, call: Continuation, marks: Watermarks) -> Decision:
    """Keep the ledger and append, or rebase (and why)."""
    if ledger is None:
        return Decision(False, "first prompt of this conversation", None, 0)
    epoch = ledger.epoch + 1
    if not call.continues_at_end or ledger.answer_sequence != call.newest_sequence:
        return Decision(False, "the conversation continued from another point", None, epoch)
    if call.asked_to_rebase:
        return Decision(False, "the client asked for its context to be rebuilt", None, epoch)
    if call.own_system_hash != ledger.own_system_hash:
        return Decision(False, "the client's system prompt changed", None, epoch)
    if call.attachments_key != ledger.attachments_key:
        return Decision(False, "the request's attachments changed", None, epoch)
    size = ledger.tokens + call.tail_tokens + call.fixed_tokens
    if size > marks.high:
        reason = f"high-water mark: the next prompt would take {size} of {marks.budget} tokens"
        return Decision(False, reason, None, epoch)
    return Decision(True, KEPT, ledger, ledger.epoch)


def appended(ledger: Ledger, tail: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The only way a kept prompt grows: the ledger's messages as they are, then the tail."""
    return [*ledger.messages, *tail]


@dataclass(frozen=True, slots=True)
class NextPart:
    """How this call's prompt is stored (``PromptRecord``'s part fields)."""

    part: int
    base_part: int
    previous_chain: str
    prefix_parts: tuple[bytes, ...]
    encoded_messages: bytes


def next_part(ledger: Ledger | None, messages: Sequence[ChatMessage]) -> NextPart:
    """One more part of the kept ledger when ``messages`` begin with its messages (a kept
    prompt does: ``appended``), holding only what follows them; else a base part, whole.
    Encoded now, before cache marks (they move) and before anything on the way upstream."""
    if ledger is not None and ledger.encoded_parts:
        kept = len(ledger.messages)
        if len(messages) >= kept and list(messages[:kept]) == list(ledger.messages):
            tail = orjson.dumps(list(messages[kept:]))
            return NextPart(
                ledger.part + 1, ledger.base_part, ledger.chain_hash, ledger.encoded_parts, tail
            )
    return NextPart(0, 0, "", (), orjson.dumps(list(messages)))


def join_arrays(arrays: Sequence[bytes]) -> bytes:
    """One JSON array of the items of ``arrays`` (each an encoded array), in order."""
    items = [array[1:-1] for array in arrays if len(array) > 2]
    if len(items) == 1 and len(arrays) == 1:
        return arrays[0]
    return b"[" + b",".join(items) + b"]"


class LedgerValues(TypedDict):
    """A ``prompt_ledger_parts`` row's columns besides its keys (app/db/models.py
    ``PromptLedgerRow``): ``messages`` (this part's) and ``artifacts`` as orjson."""

    epoch: int
    answer_sequence: int
    answer_tokens: int
    own_system_hash: str
    attachments_key: str
    tokens: int
    system_tokens: int
    memory_tokens: int
    chain_hash: str
    cleared_tool_results: int
    cleared_tokens: int
    messages_excluded: int
    part: int
    base_part: int
    previous_chain: str
    messages: bytes
    artifacts: bytes


@dataclass(slots=True)
class PromptRecord:
    """What the prompt owner keeps of this call's prompt once the answer is stored: the
    messages encoded when the prompt was built (before cache marks, and before anything on the
    way upstream could touch them), and the figures the next call carries.

    A kept prompt is stored as one more part of its ledger: ``encoded_messages`` holds only
    what this call appended, after the ``prefix_parts`` it kept (``previous_chain``: their
    chain hash). A rebased prompt is a base part: all of it, no prefix."""

    epoch: int
    own_system_hash: str
    attachments_key: str
    encoded_messages: bytes  # orjson of this part's messages as sent
    tokens: int
    system_tokens: int
    memory_tokens: int
    artifacts: list[ArtifactOutcomeRecord]
    cleared_tool_results: int = 0
    cleared_tokens: int = 0
    messages_excluded: int = 0
    part: int = 0
    base_part: int = 0
    previous_chain: str = ""
    prefix_parts: tuple[bytes, ...] = ()

    @property
    def is_base(self) -> bool:
        return self.part == self.base_part

    @property
    def parts(self) -> tuple[bytes, ...]:
        """Every part of this prompt from its base on, this one last."""
        return (*self.prefix_parts, self.encoded_messages)

    def as_base(self, part: int = 0) -> PromptRecord:
        """The same prompt written whole, as part ``part`` (a turn that landed on a branch
        starts that conversation's ledger)."""
        return replace(
            self,
            encoded_messages=join_arrays(self.parts),
            part=part,
            base_part=part,
            previous_chain="",
            prefix_parts=(),
        )

    def row(self, answer_sequence: int, answer_tokens: int, prompt_hash: str) -> LedgerValues:
        """The ``prompt_ledger_parts`` columns once the answer is stored (app/turns/
        ledger_repository.py ``save_ledger``)."""
        return {
            "epoch": self.epoch,
            "answer_sequence": answer_sequence,
            "answer_tokens": answer_tokens,
            "own_system_hash": self.own_system_hash,
            "attachments_key": self.attachments_key,
            "tokens": self.tokens,
            "system_tokens": self.system_tokens,
            "memory_tokens": self.memory_tokens,
            "chain_hash": prompt_hash,
            "cleared_tool_results": self.cleared_tool_results,
            "cleared_tokens": self.cleared_tokens,
            "messages_excluded": self.messages_excluded,
            "part": self.part,
            "base_part": self.base_part,
            "previous_chain": self.previous_chain,
            "messages": self.encoded_messages,
            "artifacts": orjson.dumps(self.artifacts),
        }
