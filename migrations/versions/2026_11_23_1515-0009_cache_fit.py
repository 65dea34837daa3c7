"""cache-aware fit: the stored cut and tool-result clearing boundary of a conversation

Revision ID: 0009
Revises: 0001
Create Date: 2026-11-23 15:15:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "0009"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = ("cache_cut_sequence", "cache_cut_tokens", "cache_cleared_sequence")


def upgrade() -> None:
    with op.batch_alter_table("conversations") as batch:
        for name in _COLUMNS:
            batch.add_column(sa.Column(name, sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("conversations") as batch:
        for name in reversed(_COLUMNS):
            batch.drop_column(name)
