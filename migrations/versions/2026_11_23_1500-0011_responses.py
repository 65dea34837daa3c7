"""responses: stored Responses API answers, each ending at a position of its conversation

Revision ID: 0011
Revises: 0001
Create Date: 2026-11-23 15:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "responses",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("conversation_id", sa.String(length=40), nullable=False),
        sa.Column("end_sequence", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("output", sa.JSON(), nullable=False),
        sa.Column("usage", sa.JSON(), nullable=True),
        sa.Column("input_items", sa.JSON(), nullable=False),
        sa.Column("echo", sa.JSON(), nullable=False),
        sa.Column("incomplete_reason", sa.String(length=32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_responses")),
    )
    with op.batch_alter_table("responses", schema=None) as batch_op:
        batch_op.create_index(
            "ix_responses_tenant_created", ["tenant_id", "created_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("responses", schema=None) as batch_op:
        batch_op.drop_index("ix_responses_tenant_created")
    op.drop_table("responses")
