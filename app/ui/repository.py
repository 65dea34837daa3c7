"""Every SQL query about inspector sessions (operator-only: no tenant)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import UiSession

__all__ = ["UiSessionRepository", "ui_session_repository"]


class UiSessionRepository:
    async def get(self, session: AsyncSession, session_id: str) -> UiSession | None:
        statement = select(UiSession).where(UiSession.id == session_id)
        return (await session.execute(statement)).scalar_one_or_none()

    async def add(self, session: AsyncSession, row: UiSession) -> None:
        session.add(row)
        await session.flush()

    async def delete(self, session: AsyncSession, session_id: str) -> None:
        await session.execute(delete(UiSession).where(UiSession.id == session_id))

    async def delete_expired(self, session: AsyncSession, now: datetime) -> None:
        await session.execute(delete(UiSession).where(UiSession.expires_at <= now))


ui_session_repository = UiSessionRepository()
