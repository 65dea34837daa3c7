"""prompt_ledgers and token_calibration: the prompt owner's record and the learned token ratio

The prompt owner (app/turns/owner.py) keeps the last prompt sent for each conversation and
appends to it until a rebase; token_calibration holds, per model, the ratio between the
prompt tokens the upstream reports and contextgate's own count, shared by workers and replicas.

Revision ID: 0021
Revises: 0016
Create Date: 2026-11-26 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "prompt_ledgers",
        sa.Column(
            "conversation_id",
            sa.String(40),
            sa.ForeignKey(
                "conversations.id",
                ondelete="CASCADE",
                name="fk_prompt_ledgers_conversation_id_conversations",
            ),
            nullable=False,
        ),
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
        sa.PrimaryKeyConstraint("conversation_id", name="pk_prompt_ledgers"),
    )
    op.create_table(
        "token_calibration",
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("ratio", sa.Float(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("model", name="pk_token_calibration"),
    )


def downgrade() -> None:
    op.drop_table("token_calibration")
    op.drop_table("prompt_ledgers")
