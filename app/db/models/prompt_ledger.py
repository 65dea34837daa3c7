"""The prompt a conversation's last call sent, kept by the prompt owner (app/turns/owner.py).

Stored append-only, as the prompt grows: a rebase writes a *base* part (the whole prompt), each
call that keeps the prompt writes one part with only the messages it appended. The ledger is the
newest part's figures (what the prompt cost in tokens, which stored answer it produced) and the
messages of every part from its base on, exactly as sent (provider cache marks aside). An
agent's call then writes its new tool step (~12 KiB) instead of its whole ~700 KiB prompt.
Each part names the chain hash of the prompt it extends (``previous_chain``), so a reader can
tell a complete ledger from one whose parts another writer replaced. Nothing here is needed to
rebuild the history, which stays in ``messages``.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Float, ForeignKey, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, utcnow

__all__ = ["PromptLedgerRow", "TokenCalibrationRow"]


class PromptLedgerRow(Base):
    __tablename__ = "prompt_ledger_parts"

    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    part: Mapped[int] = mapped_column(primary_key=True, default=0, autoincrement=False)
    base_part: Mapped[int] = mapped_column(default=0)  # the part holding this epoch's whole prompt
    previous_chain: Mapped[str] = mapped_column(String(32), default="")  # "" on a base part
    tenant_id: Mapped[str] = mapped_column(String(64))
    epoch: Mapped[int] = mapped_column(default=0)  # rebases so far
    # The stored answer this prompt produced: the next call continues after it.
    answer_sequence: Mapped[int]
    answer_tokens: Mapped[int] = mapped_column(default=0)
    # What the client controls outside the stored conversation and may change between calls.
    own_system_hash: Mapped[str] = mapped_column(String(64), default="")  # a content hash
    attachments_key: Mapped[str] = mapped_column(String(32), default="")
    tokens: Mapped[int] = mapped_column(default=0)  # contextgate's count of the messages
    system_tokens: Mapped[int] = mapped_column(default=0)
    memory_tokens: Mapped[int] = mapped_column(default=0)
    chain_hash: Mapped[str] = mapped_column(String(32), default="")  # seal.py's, after them
    cleared_tool_results: Mapped[int] = mapped_column(default=0)  # placeholders in the prompt
    cleared_tokens: Mapped[int] = mapped_column(default=0)
    messages_excluded: Mapped[int] = mapped_column(default=0)
    # orjson: this part's messages as sent, and the artifact outcomes in force for the prompt.
    messages: Mapped[bytes] = mapped_column(LargeBinary)
    artifacts: Mapped[bytes] = mapped_column(LargeBinary)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class TokenCalibrationRow(Base):
    """Per model: upstream-reported prompt tokens / contextgate's count of the same prompt."""

    __tablename__ = "token_calibration"

    model: Mapped[str] = mapped_column(String(200), primary_key=True)
    ratio: Mapped[float] = mapped_column(Float, default=1.0)
    samples: Mapped[int] = mapped_column(default=0)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
