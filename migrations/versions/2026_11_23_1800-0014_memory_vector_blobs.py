"""memories.embedding: float32 blobs instead of JSON floats (embedding_model kept)

A 256-dim vector is 1 KiB of float32 instead of ~5 KiB of JSON text, and it is read with one
``np.frombuffer`` instead of parsing 256 floats: the retrieval index of 10,000 memories loads in
milliseconds. Existing vectors are converted row by row (in pages); a value that is not a list
of numbers becomes NULL (retrieval computes it again).

Revision ID: 0014
Revises: 0006b
Create Date: 2026-11-23 18:00:00
"""

from collections.abc import Sequence
from typing import Any

import numpy as np
import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0006b"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PAGE = 500


def _to_blob(value: Any) -> bytes | None:
    if not isinstance(value, list) or not value:
        return None
    try:
        vector = np.asarray(value, dtype="<f4")
    except (TypeError, ValueError):
        return None
    return vector.tobytes() if vector.ndim == 1 else None


def _to_list(value: Any) -> list[float] | None:
    if not value or len(value) % 4:
        return None
    return [float(x) for x in np.frombuffer(bytes(value), dtype="<f4")]


def _convert(source: sa.types.TypeEngine[Any], target: sa.types.TypeEngine[Any], how: Any) -> None:
    """Copy ``embedding`` into a new column of type ``target``, converted, then swap them."""
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.add_column(sa.Column("embedding_new", target, nullable=True))
    memories = sa.table(
        "memories",
        sa.column("id", sa.String()),
        sa.column("embedding", source),
        sa.column("embedding_new", target),
    )
    bind = op.get_bind()
    last = ""
    while True:
        page = bind.execute(
            sa.select(memories.c.id, memories.c.embedding)
            .where(memories.c.id > last, memories.c.embedding.is_not(None))
            .order_by(memories.c.id)
            .limit(_PAGE)
        ).all()
        if not page:
            break
        last = page[-1][0]
        values = [{"b_id": row[0], "b_value": how(row[1])} for row in page]
        values = [v for v in values if v["b_value"] is not None]
        if values:
            bind.execute(
                memories.update()
                .where(memories.c.id == sa.bindparam("b_id"))
                .values(embedding_new=sa.bindparam("b_value")),
                values,
            )
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.drop_column("embedding")
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.alter_column("embedding_new", new_column_name="embedding")


def upgrade() -> None:
    _convert(sa.JSON(), sa.LargeBinary(), _to_blob)


def downgrade() -> None:
    _convert(sa.LargeBinary(), sa.JSON(), _to_list)
