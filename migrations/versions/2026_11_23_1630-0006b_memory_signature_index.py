"""memories: an index covering the retrieval signature (count, latest update)

Memory rows now carry their vectors; without it, the per-request signature query reads every
row of the user.

Revision ID: 0006b
Revises: 0003
Create Date: 2026-11-23 16:30:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0006b"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_memories_signature",
        "memories",
        ["tenant_id", "user_id", "superseded_by", "updated_at"],
    )


def downgrade() -> None:
    op.drop_index("ix_memories_signature", table_name="memories")
