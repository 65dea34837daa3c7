"""Store, read and forget attachments; turn a request's attachments into artifacts."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.attachments.repository import attachment_repository as repository
from app.context.artifacts import Artifact, ArtifactType
from app.core.database import Database
from app.core.errors import NotFound, PayloadTooLarge
from app.db.models import Attachment
from app.protocol.chat import AttachmentRef

__all__ = ["AttachmentService", "Upload", "attachment_service"]


def _not_found(attachment_id: str) -> NotFound:
    return NotFound(f"No attachment with id '{attachment_id}'.", param="attachments")


def _check_quota(stored: int, size: int, quota: int) -> None:
    if stored + size > quota:
        raise PayloadTooLarge(
            f"This attachment ({size} bytes) would take this tenant's stored attachments to "
            f"{stored + size} bytes, past its quota of {quota} bytes; delete attachments "
            "(DELETE /v1/attachments/{id}) to make room.",
            param="file",
            code="attachment_quota_exceeded",
        )


@dataclass(frozen=True, slots=True)
class Upload:
    """An uploaded attachment: its text, and what the upload said of it."""

    text: str
    media_type: str
    size_bytes: int
    title: str | None = None
    source: str | None = None
    filename: str | None = None


class AttachmentService:
    async def store(
        self, database: Database, tenant_id: str, upload: Upload, *, quota_bytes: int = 0
    ) -> tuple[Attachment, bool]:
        """The stored attachment and whether it is new (same text → the same attachment).

        ``quota_bytes`` (0: none): what the tenant's attachments may take in all; a new one
        that would pass it is a 413, and nothing is stored.
        """
        text, size_bytes, filename = upload.text, upload.size_bytes, upload.filename
        digest = hashlib.sha256(text.encode()).hexdigest()
        async with database.reading() as session:
            existing = await repository.by_hash(session, tenant_id, digest)
            if existing is None and quota_bytes:
                stored = await repository.stored_bytes(session, tenant_id)
                _check_quota(stored, size_bytes, quota_bytes)
        if existing is not None:
            return existing, False
        row = Attachment(
            tenant_id=tenant_id,
            content_hash=digest,
            title=upload.title or filename,
            source=upload.source,
            filename=filename,
            media_type=upload.media_type,
            size_bytes=size_bytes,
            char_count=len(text),
            content=text,
        )
        try:
            async with database.writing() as session:
                await repository.add(session, row)
        except IntegrityError:  # the same text stored concurrently: use that one
            async with database.reading() as session:
                existing = await repository.by_hash(session, tenant_id, digest)
            if existing is None:
                raise
            return existing, False
        return row, True

    async def get(self, session: AsyncSession, tenant_id: str, attachment_id: str) -> Attachment:
        row = await repository.get(session, tenant_id, attachment_id)
        if row is None:
            raise _not_found(attachment_id)
        return row

    async def artifacts(
        self, session: AsyncSession, tenant_id: str, refs: list[AttachmentRef]
    ) -> list[Artifact]:
        """A request's attachments as artifacts; an unknown (or another tenant's) id is a 404."""
        if not refs:
            return []
        ids = [ref.attachment_id for ref in refs if ref.attachment_id]
        stored = await repository.get_many(session, tenant_id, ids)
        artifacts: list[Artifact] = []
        for index, ref in enumerate(refs):
            kind = ArtifactType(ref.attachment_type)
            if ref.attachment_id:
                row = stored.get(ref.attachment_id)
                if row is None:
                    raise _not_found(ref.attachment_id)
                artifacts.append(
                    Artifact(
                        id=row.id,
                        artifact_type=kind,
                        source=ref.source or row.source or f"attachment:{row.id}",
                        title=ref.title or row.title,
                        content=ref.content if ref.content is not None else row.content,
                        metadata={"historical": False, "stored": True},
                    )
                )
            else:
                artifacts.append(
                    Artifact(
                        id=f"inline_{index}",
                        artifact_type=kind,
                        source=ref.source or "inline",
                        title=ref.title,
                        content=ref.content or "",
                        metadata={"historical": False, "stored": False},
                    )
                )
        return artifacts


attachment_service = AttachmentService()
