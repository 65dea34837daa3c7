"""message vectors for message recall

Revision ID: 0006
Revises: 0001
Create Date: 2026-11-23 15:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "message_vectors",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("message_id", sa.Integer(), nullable=False),
        sa.Column("conversation_id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=True),
        sa.Column("sequence_number", sa.Integer(), nullable=False),
        sa.Column("turn_number", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("embedding", sa.LargeBinary(), nullable=True),
        sa.Column("embedding_model", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["messages.id"],
            name=op.f("fk_message_vectors_message_id_messages"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_message_vectors_conversation_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_message_vectors")),
        sa.UniqueConstraint("message_id", name=op.f("uq_message_vectors_message_id")),
    )
    op.create_index(
        "ix_message_vectors_conversation", "message_vectors", ["conversation_id", "id"]
    )
    op.create_index(
        "ix_message_vectors_tenant_user", "message_vectors", ["tenant_id", "user_id", "id"]
    )


def downgrade() -> None:
    op.drop_index("ix_message_vectors_tenant_user", table_name="message_vectors")
    op.drop_index("ix_message_vectors_conversation", table_name="message_vectors")
    op.drop_table("message_vectors")
