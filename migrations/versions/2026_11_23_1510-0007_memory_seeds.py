"""memory seeds: key/value user facts, periodic and rule-based summaries, on_save progress

Revision ID: 0007
Revises: 0003
Create Date: 2026-11-23 15:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.add_column(sa.Column("key", sa.String(length=200), nullable=True))
        batch_op.create_index("ix_memories_tenant_user_key", ["tenant_id", "user_id", "key"])
    with op.batch_alter_table("conversation_summaries", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("kind", sa.String(length=20), nullable=False, server_default="compaction")
        )
        batch_op.add_column(
            sa.Column("method", sa.String(length=20), nullable=False, server_default="llm")
        )
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("memory_saved_turn", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_column("memory_saved_turn")
    with op.batch_alter_table("conversation_summaries", schema=None) as batch_op:
        batch_op.drop_column("method")
        batch_op.drop_column("kind")
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.drop_index("ix_memories_tenant_user_key")
        batch_op.drop_column("key")
