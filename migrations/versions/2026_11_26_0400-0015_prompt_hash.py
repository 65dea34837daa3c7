"""messages.prompt_hash: the hash of the prompt an assistant answer was produced for

A later call resends that answer's thinking only while everything before it is sent exactly as
it was then, and knows whether the previous prompt survived as its prefix.

Revision ID: 0015
Revises: 0005b
Create Date: 2026-11-26 04:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0005b"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("prompt_hash", sa.String(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_column("prompt_hash")
