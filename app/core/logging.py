"""Structured (JSON) logs carrying the request id; never keys or message text at INFO."""

from __future__ import annotations

import atexit
import logging
import logging.handlers
import queue
import sys
import traceback
from contextvars import ContextVar
from datetime import UTC, datetime

import orjson

from app.core.redact import MASK, redact, redactor

__all__ = [
    "configure_logging",
    "install_redaction",
    "redact",
    "register_secret",
    "request_id_var",
]

request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        # Taken when the record was made (the listener's thread has no request context).
        request_id = getattr(record, "_request_id", None) or request_id_var.get()
        if request_id:
            payload["request_id"] = request_id
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                if key in _CONTENT_FIELDS and record.levelno > logging.DEBUG:
                    payload[key] = _MASK
                else:
                    payload[key] = _redact_value(value)
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(self.formatException(record.exc_info))
        if record.exc_text:
            payload["exc"] = record.exc_text
        return orjson.dumps(payload, default=str).decode()


class _RecordQueueHandler(logging.handlers.QueueHandler):
    """Hands the record itself to the listener's thread, which formats and writes it: the
    event loop only makes the record (redacted, the request id taken: the factory below).
    The standard ``prepare`` would format it here, on the loop."""

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        return record


_listener: logging.handlers.QueueListener | None = None


def configure_logging(level: str = "INFO") -> None:
    """JSON lines on stderr, formatted and written by a thread of their own (a log line
    cost the loop ~0.2 ms on the bench machine, most of it the formatting and the write);
    what is queued is written before the process exits."""
    global _listener
    install_redaction()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    if not _stop_listener():  # the first time
        atexit.register(_stop_listener)
    records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    _listener = logging.handlers.QueueListener(records, handler)
    _listener.start()
    root = logging.getLogger()
    root.handlers[:] = [_RecordQueueHandler(records)]
    root.setLevel(level)
    # Third-party chatter stays at WARNING: litellm and httpx may log URLs and payloads.
    for noisy in ("LiteLLM", "litellm", "httpx", "httpcore", "aiosqlite", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _stop_listener() -> bool:
    """Write what is queued, then end the listener's thread (at exit, or before another);
    whether there was one."""
    global _listener
    if _listener is None:
        return False
    _listener.stop()
    _listener = None
    return True


# ---- redaction -------------------------------------------------------------------------------
# Every record is redacted when it is created (a LogRecord factory), so the rule holds for every
# logger and handler: ours, uvicorn's, litellm's, pytest's capture.

_MASK = MASK
# Record attributes that would carry message or attachment text: kept at DEBUG only.
_CONTENT_FIELDS = frozenset(
    {"content", "messages", "message_text", "prompt", "completion", "text", "body", "attachment"}
)
_factory_installed = False


def register_secret(*values: str | None) -> None:
    """Exact strings (the master key, provider keys) never to appear in a log."""
    redactor.add(*values)


def _redact_value(value: object) -> object:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, int | float | bool) or value is None:
        return value
    return redact(str(value))


def _redact_record(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a broken format string: keep the template only
        message = str(record.msg)
    record.msg, record.args = redact(message), ()
    record._request_id = request_id_var.get()
    if record.exc_info and not record.exc_text:
        record.exc_text = redact("".join(traceback.format_exception(*record.exc_info)).rstrip())
    elif record.exc_text:
        record.exc_text = redact(record.exc_text)
    if record.stack_info:
        record.stack_info = redact(record.stack_info)


def install_redaction() -> None:
    """Redact every log record from now on (idempotent)."""
    global _factory_installed
    if _factory_installed:
        return
    previous = logging.getLogRecordFactory()

    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        _redact_record(record)
        return record

    logging.setLogRecordFactory(factory)
    _factory_installed = True
