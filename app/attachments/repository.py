"""Every SQL query about attachments; scoped by tenant."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Attachment

__all__ = ["AttachmentRepository", "attachment_repository"]


class AttachmentRepository:
    async def get(
        self, session: AsyncSession, tenant_id: str, attachment_id: str
    ) -> Attachment | None:
        statement = select(Attachment).where(
            Attachment.id == attachment_id, Attachment.tenant_id == tenant_id
        )
        return (await session.execute(statement)).scalar_one_or_none()

    async def get_many(
        self, session: AsyncSession, tenant_id: str, ids: Sequence[str]
    ) -> dict[str, Attachment]:
        if not ids:
            return {}
        statement = select(Attachment).where(
            Attachment.tenant_id == tenant_id, Attachment.id.in_(list(set(ids)))
        )
        return {row.id: row for row in (await session.execute(statement)).scalars()}

    async def by_hash(
        self, session: AsyncSession, tenant_id: str, content_hash: str
    ) -> Attachment | None:
        statement = select(Attachment).where(
            Attachment.tenant_id == tenant_id, Attachment.content_hash == content_hash
        )
        return (await session.execute(statement)).scalar_one_or_none()

    async def add(self, session: AsyncSession, attachment: Attachment) -> Attachment:
        session.add(attachment)
        await session.flush()
        return attachment

    async def delete(self, session: AsyncSession, attachment: Attachment) -> None:
        await session.delete(attachment)


attachment_repository = AttachmentRepository()
