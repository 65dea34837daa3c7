"""conversations.metadata and response_items: the Conversations API and item_reference

``metadata`` holds a conversation's Conversations-API metadata. ``response_items`` maps the id
of each output item of a stored Response to that response and to the stored message it
renders, so a later request can refer to it (``item_reference``) and the conversation lists
it under the same id.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("conversations") as batch:
        batch.add_column(sa.Column("metadata", sa.JSON(), nullable=True))
    op.create_table(
        "response_items",
        sa.Column("id", sa.String(length=80), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("response_id", sa.String(length=40), nullable=False),
        sa.Column("conversation_id", sa.String(length=40), nullable=False),
        sa.Column("sequence_number", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_response_items")),
    )
    with op.batch_alter_table("response_items") as batch:
        batch.create_index(
            "ix_response_items_conversation", ["conversation_id", "sequence_number"]
        )


def downgrade() -> None:
    with op.batch_alter_table("response_items") as batch:
        batch.drop_index("ix_response_items_conversation")
    op.drop_table("response_items")
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("metadata")
