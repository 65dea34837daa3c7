"""prompt_ledger_parts: the prompt owner's ledger, stored append-only

A call that keeps the prompt writes only the messages it appended (one part), instead of the
whole prompt again (~700 KiB per call for an agent's 150k-token history). A rebase writes a base
part holding the whole prompt. Existing ledgers become base parts (part 0).

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-27 19:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FIGURES = (
    "tenant_id, epoch, answer_sequence, answer_tokens, own_system_hash, attachments_key, "
    "tokens, system_tokens, memory_tokens, chain_hash, cleared_tool_results, cleared_tokens, "
    "messages_excluded, messages, artifacts, updated_at"
)


def _figures() -> list[sa.Column[object]]:
    """The columns both layouts share: the prompt's figures, messages and artifacts."""
    return [
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("answer_sequence", sa.Integer(), nullable=False),
        sa.Column("answer_tokens", sa.Integer(), nullable=False),
        sa.Column("own_system_hash", sa.String(64), nullable=False),
        sa.Column("attachments_key", sa.String(32), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("system_tokens", sa.Integer(), nullable=False),
        sa.Column("memory_tokens", sa.Integer(), nullable=False),
        sa.Column("chain_hash", sa.String(32), nullable=False),
        sa.Column("cleared_tool_results", sa.Integer(), nullable=False),
        sa.Column("cleared_tokens", sa.Integer(), nullable=False),
        sa.Column("messages_excluded", sa.Integer(), nullable=False),
        sa.Column("messages", sa.LargeBinary(), nullable=False),
        sa.Column("artifacts", sa.LargeBinary(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    ]


def _conversation_id(table: str) -> sa.Column[str]:
    foreign_key = sa.ForeignKey(
        "conversations.id", ondelete="CASCADE", name=f"fk_{table}_conversation_id_conversations"
    )
    return sa.Column("conversation_id", sa.String(40), foreign_key, nullable=False)


def upgrade() -> None:
    op.create_table(
        "prompt_ledger_parts",
        _conversation_id("prompt_ledger_parts"),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column("base_part", sa.Integer(), nullable=False),
        sa.Column("previous_chain", sa.String(32), nullable=False),
        *_figures(),
        sa.PrimaryKeyConstraint("conversation_id", "part", name="pk_prompt_ledger_parts"),
    )
    op.execute(
        f"INSERT INTO prompt_ledger_parts (conversation_id, part, base_part, previous_chain, "
        f"{_FIGURES}) SELECT conversation_id, 0, 0, '', {_FIGURES} FROM prompt_ledgers"
    )
    op.drop_table("prompt_ledgers")


def downgrade() -> None:
    # The previous layout holds one whole prompt per conversation: the ledgers are dropped
    # (the next call of each conversation assembles its prompt anew, as after a rebase).
    op.drop_table("prompt_ledger_parts")
    op.create_table(
        "prompt_ledgers",
        _conversation_id("prompt_ledgers"),
        *_figures(),
        sa.PrimaryKeyConstraint("conversation_id", name="pk_prompt_ledgers"),
    )
