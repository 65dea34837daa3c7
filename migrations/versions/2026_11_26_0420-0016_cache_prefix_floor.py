"""conversations.cache_prefix_floor: user messages from here on keep their per-turn block

The cache-aware fit sends a user message's frozen block (memories, date, recalled messages)
while the message is at or after this floor, and moves it to the current turn at each rebase,
when the prompt is rewritten anyway: old blocks leave the prompt without costing a cache write.

Revision ID: 0016
Revises: 0009
Create Date: 2026-11-26 04:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("conversations") as batch:
        batch.add_column(
            sa.Column("cache_prefix_floor", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("cache_prefix_floor")
