"""POST /v1/attachments (JSON or multipart file), GET and DELETE /v1/attachments/{id}."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from app.attachments.extract import extract_text, media_type_of
from app.attachments.repository import attachment_repository
from app.attachments.schemas import (
    AttachmentCreate,
    AttachmentDeleted,
    AttachmentDetail,
    AttachmentInfo,
)
from app.attachments.service import Upload, attachment_service
from app.core.deps import StorageDep
from app.core.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType
from app.core.textcheck import bad_string, rejection
from app.core.validation import validation_message
from app.keys.auth import CallerDep

router = APIRouter(prefix="/v1/attachments", tags=["attachments"])


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"The attachment is larger than {limit} bytes (CONTEXTGATE_MAX_ATTACHMENT_BYTES).",
        param="file",
    )


async def _read_upload(upload: UploadFile, limit: int) -> bytes:
    data = await upload.read(limit + 1)
    if len(data) > limit:
        raise _too_large(limit)
    return data


def _optional_text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


async def _parse(request: Request, limit: int) -> tuple[str, str, int, dict[str, str | None]]:
    """(text, media type, size in bytes, {title, source, filename}) from JSON or multipart."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    declared = request.headers.get("content-length")
    if content_type == "application/json":
        if declared and declared.isdigit() and int(declared) > limit + 4096:
            raise _too_large(limit)
        try:
            body = AttachmentCreate.model_validate_json(await request.body())
        except ValidationError as exc:
            message, param = validation_message(exc.errors())
            raise BadRequest(message, param=param) from None
        try:
            size = len(body.content.encode())
        except UnicodeEncodeError:
            raise BadRequest("The content is not valid Unicode text.", param="content") from None
        if size > limit:
            raise _too_large(limit)
        meta = {"title": body.title, "source": body.source, "filename": None}
        return body.content, "text/plain", size, meta
    if content_type == "multipart/form-data":
        form = await request.form()
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise BadRequest("A multipart upload needs a 'file' field.", param="file")
        data = await _read_upload(upload, limit)
        media_type = media_type_of(upload.content_type, upload.filename)
        meta = {
            "title": _optional_text(form.get("title")),
            "source": _optional_text(form.get("source")),
            "filename": upload.filename,
        }
        for field, value in meta.items():
            reason = bad_string(value) if value else None
            if reason is not None:
                raise rejection(field, reason)
        return extract_text(data, media_type), media_type, len(data), meta
    raise UnsupportedMediaType(
        "Send JSON {content, title, source} or a multipart/form-data file.",
    )


_UPLOAD_SCHEMA = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": AttachmentCreate.model_json_schema()},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "title": {"type": "string"},
                        "source": {"type": "string"},
                    },
                }
            },
        },
    }
}


@router.post(
    "",
    response_model=AttachmentInfo,
    status_code=201,
    openapi_extra=_UPLOAD_SCHEMA,
    responses={200: {"model": AttachmentInfo, "description": "Already stored (same text)"}},
)
async def create_attachment(
    request: Request, response: Response, caller: CallerDep, state: StorageDep
) -> AttachmentInfo:
    text, media_type, size, meta = await _parse(request, state.settings.max_attachment_bytes)
    if not text.strip():
        raise BadRequest("The attachment has no text.", param="file")
    upload = Upload(
        text,
        media_type=media_type,
        size_bytes=size,
        title=meta["title"],
        source=meta["source"],
        filename=meta["filename"],
    )
    row, created = await attachment_service.store(
        state.database,
        caller.tenant_id,
        upload,
        quota_bytes=state.settings.tenant_max_attachment_bytes,
    )
    response.status_code = 201 if created else 200
    return AttachmentInfo.model_validate(row, from_attributes=True)


@router.get("/{attachment_id}", response_model=AttachmentDetail)
async def get_attachment(
    attachment_id: str, caller: CallerDep, state: StorageDep
) -> AttachmentDetail:
    async with state.database.reading() as session:
        row = await attachment_service.get(session, caller.tenant_id, attachment_id)
    return AttachmentDetail.model_validate(row, from_attributes=True)


@router.delete("/{attachment_id}", response_model=AttachmentDeleted)
async def delete_attachment(
    attachment_id: str, caller: CallerDep, state: StorageDep
) -> AttachmentDeleted:
    async with state.database.writing() as session:
        row = await attachment_service.get(session, caller.tenant_id, attachment_id)
        await attachment_repository.delete(session, row)
    return AttachmentDeleted(id=attachment_id)
