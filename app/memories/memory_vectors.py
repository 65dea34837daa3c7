"""Memory vectors computed on a request, written back in the background.

A memory stored without a vector for the current embedder gets one when its user's index next
catches up (index_refresh.py); ``save_memory_vectors`` stores it with the row. A failure is
logged and forgotten: the vector is computed again when next needed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy import bindparam, update

from app.core.database import Database
from app.core.lazy_module import lazy_module
from app.core.tasks import Tasks, spawn
from app.db.models import Memory
from app.db.repository import memory_scope
from app.embedders.embedder import encode_vector

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy", globals(), "np")

__all__ = ["save_memory_vectors"]

logger = logging.getLogger(__name__)


def save_memory_vectors(
    database: Database,
    tasks: Tasks,
    tenant_id: str,
    model: str,
    vectors: Sequence[tuple[str, str, np.ndarray]],
) -> None:
    """Write computed memory vectors (id, the content embedded, vector) back, in the background
    (``updated_at`` untouched, so the retrieval signature does not change): one executemany of
    one statement; a memory whose content changed meanwhile keeps none."""
    if not vectors:
        return
    rows = [
        {"b_id": memory_id, "b_content": content, "b_embedding": encode_vector(vector)}
        for memory_id, content, vector in vectors
    ]

    async def save() -> None:
        statement = (
            update(Memory)
            .where(
                Memory.id == bindparam("b_id"),
                memory_scope.tenant_clause(tenant_id),
                Memory.content == bindparam("b_content"),
            )
            .values(embedding=bindparam("b_embedding"), embedding_model=model)
            .execution_options(synchronize_session=False)
        )
        try:
            async with database.writing() as session:
                connection = await session.connection()
                await connection.execute(statement, rows)
        except Exception:
            logger.warning("saving memory vectors failed", exc_info=True)

    spawn(tasks, save())
