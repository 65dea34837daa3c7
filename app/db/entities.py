"""Read-only model instances from plain Core rows, for what the hot path only reads.

Loading ``select(Conversation, ConversationSummaryRow, PromptLedgerRow)`` through the ORM
costs its compile state, its loading machinery and an identity map; the instances are then
only read (a turn writes with guarded Core statements). ``EntityColumns`` selects a model's
table columns instead and builds each instance the way the ORM's loader fills one: a new
instance whose attributes are set in its ``__dict__``, outside any session (as the ORM's are
once their read session closes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVar, cast

from sqlalchemy import Column, Table
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.orm import Mapper

from app.db.models.base import Base

__all__ = ["EntityColumns"]

M = TypeVar("M", bound=Base)


class EntityColumns(Generic[M]):
    """A model's table columns, in table order, and the instance a row of them makes."""

    def __init__(self, model: type[M]) -> None:
        mapper: Mapper[M] = sa_inspect(model)
        table = cast(Table, mapper.local_table)
        self.columns: list[Column[Any]] = list(table.c)
        self.keys = tuple(mapper.get_property_by_column(column).key for column in self.columns)
        self.width = len(self.columns)
        self._new_instance = mapper.class_manager.new_instance

    def build(self, values: Sequence[object]) -> M:
        """The instance of one row's ``values`` (this model's columns, in order)."""
        instance: M = self._new_instance()
        instance.__dict__.update(zip(self.keys, values, strict=True))
        return instance
