"""memory: compaction summaries, boundary columns, long-term memories

Revision ID: 0003
Revises: 0001
Create Date: 2026-11-22 16:01:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("compacted_turn", sa.Integer(), nullable=False, server_default="0")
        )
        batch_op.add_column(
            sa.Column("compacted_sequence", sa.Integer(), nullable=False, server_default="0")
        )
        batch_op.add_column(
            sa.Column("compacted_tokens", sa.Integer(), nullable=False, server_default="0")
        )

    op.create_table(
        "conversation_summaries",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("conversation_id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("level", sa.Integer(), nullable=False),
        sa.Column("first_turn", sa.Integer(), nullable=False),
        sa.Column("last_turn", sa.Integer(), nullable=False),
        sa.Column("start_tokens", sa.Integer(), nullable=False),
        sa.Column("end_tokens", sa.Integer(), nullable=False),
        sa.Column("episodic", sa.Text(), nullable=False),
        sa.Column("facts", sa.JSON(), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("merged_into", sa.String(length=40), nullable=True),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("cost", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_conversation_summaries_conversation_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_conversation_summaries")),
    )
    op.create_index(
        "ix_conversation_summaries_conversation_turn",
        "conversation_summaries",
        ["conversation_id", "first_turn"],
    )

    op.create_table(
        "memories",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("memory_type", sa.String(length=20), nullable=False),
        sa.Column("importance", sa.Integer(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("source", sa.String(length=20), nullable=False),
        sa.Column("conversation_id", sa.String(length=40), nullable=True),
        sa.Column("embedding", sa.JSON(), nullable=True),
        sa.Column("embedding_model", sa.String(length=200), nullable=True),
        sa.Column("superseded_by", sa.String(length=40), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memories")),
    )
    op.create_index(
        "ix_memories_tenant_user", "memories", ["tenant_id", "user_id", "superseded_by"]
    )


def downgrade() -> None:
    op.drop_index("ix_memories_tenant_user", table_name="memories")
    op.drop_table("memories")
    op.drop_index(
        "ix_conversation_summaries_conversation_turn", table_name="conversation_summaries"
    )
    op.drop_table("conversation_summaries")
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_column("compacted_tokens")
        batch_op.drop_column("compacted_sequence")
        batch_op.drop_column("compacted_turn")
