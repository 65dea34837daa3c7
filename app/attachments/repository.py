"""Every SQL query about attachments; scoped by tenant (``TenantRepository``)."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Attachment
from app.db.repository import TenantRepository

__all__ = ["AttachmentRepository", "attachment_repository"]


class AttachmentRepository(TenantRepository[Attachment]):
    async def by_hash(
        self, session: AsyncSession, tenant_id: str, content_hash: str
    ) -> Attachment | None:
        statement = self.base_statement(tenant_id).where(Attachment.content_hash == content_hash)
        return (await session.execute(statement)).scalar_one_or_none()

    async def stored_bytes(self, session: AsyncSession, tenant_id: str) -> int:
        """What the tenant's attachments take (their stored text, UTF-8), for the quota."""
        statement = select(func.coalesce(func.sum(Attachment.size_bytes), 0)).where(
            self.tenant_clause(tenant_id)
        )
        return int((await session.execute(statement)).scalar_one())


attachment_repository = AttachmentRepository(Attachment)
