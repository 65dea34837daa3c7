"""Text out of an uploaded file: plain text, Markdown, JSON, CSV, HTML (to text), PDF (pypdf)."""

from __future__ import annotations

import io
import json
from pathlib import PurePath

from app.core.errors import BadRequest, UnsupportedMediaType

__all__ = ["SUPPORTED", "extract_text", "media_type_of"]

SUPPORTED = {
    "text/plain": "text",
    "text/markdown": "text",
    "text/x-markdown": "text",
    "text/csv": "text",
    "application/csv": "text",
    "application/json": "json",
    "text/json": "json",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/pdf": "pdf",
}
_BY_SUFFIX = {
    ".txt": "text/plain",
    ".text": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".csv": "text/csv",
    ".json": "application/json",
    ".html": "text/html",
    ".htm": "text/html",
    ".pdf": "application/pdf",
}
_GENERIC = {"", "application/octet-stream", "binary/octet-stream"}


def media_type_of(content_type: str | None, filename: str | None) -> str:
    """The declared media type, or the file name's when the declaration is generic."""
    declared = (content_type or "").split(";")[0].strip().lower()
    if declared in _GENERIC and filename:
        return _BY_SUFFIX.get(PurePath(filename).suffix.lower(), declared or "")
    return declared


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UnsupportedMediaType(
            "The file is not UTF-8 text. Supported: text, Markdown, JSON, CSV, HTML, PDF."
        ) from None


# The parsers are imported on first use: ~0.2 s of every start for uploads most servers never get.
def _html(text: str) -> str:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(text, "html.parser")
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    lines = (line.strip() for line in soup.get_text("\n").splitlines())
    return "\n".join(line for line in lines if line)


def _pdf(data: bytes) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        raise BadRequest(f"Cannot read the PDF: {exc}", param="file") from None
    return "\n\n".join(p.strip() for p in pages if p.strip())


def extract_text(data: bytes, media_type: str) -> str:
    kind = SUPPORTED.get(media_type)
    if kind is None:
        raise UnsupportedMediaType(
            f"Unsupported attachment type '{media_type or 'unknown'}'. Supported: text/plain, "
            "text/markdown, application/json, text/csv, text/html, application/pdf.",
            param="file",
        )
    if kind == "pdf":
        return _pdf(data).replace("\x00", "")  # extraction noise, never text
    text = _decode(data)
    if "\x00" in text:  # PostgreSQL cannot store it; SQLite would: refused on both alike
        raise BadRequest("The file contains NUL characters: it is not text.", param="file")
    if kind == "json":
        try:
            json.loads(text)
        except ValueError as exc:
            raise BadRequest(f"The JSON file is not valid JSON: {exc}", param="file") from None
        return text
    if kind == "html":
        return _html(text)
    return text
