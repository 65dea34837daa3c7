"""Every ORM table, imported here so Alembic's autogenerate sees them all."""

from app.db.models.api_key import ApiKey
from app.db.models.attachment import Attachment
from app.db.models.base import Base, new_id, utcnow
from app.db.models.conversation import Conversation
from app.db.models.idempotency import IdempotencyRecord
from app.db.models.memory import Memory
from app.db.models.message import Message
from app.db.models.message_vector import MessageVector
from app.db.models.request_log import RequestLog
from app.db.models.response import ResponseRecord
from app.db.models.response_item import ResponseItem
from app.db.models.summary import ConversationSummaryRow
from app.db.models.ui_session import UiSession

__all__ = [
    "ApiKey",
    "Attachment",
    "Base",
    "Conversation",
    "ConversationSummaryRow",
    "IdempotencyRecord",
    "Memory",
    "Message",
    "MessageVector",
    "RequestLog",
    "ResponseItem",
    "ResponseRecord",
    "UiSession",
    "new_id",
    "utcnow",
]
