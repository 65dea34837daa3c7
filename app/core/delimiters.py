"""One escaping function for every data block of every prompt contextgate writes.

Prompts quote untrusted text (documents, tool output, conversation turns, the planner's own
focus text, which a document can steer) between tags such as ``<contextgate_context>``,
``<document>``, ``<artifact_preview>``, ``<source>``, ``<transcript>``. Quoted text must not
open or close any of them: every tag-like sequence naming one of these delimiters, in any case
and spacing (``</DOCUMENT >``, ``< /contextgate_context>``, ``<document id="x">``, a bare
``</source``), has its ``<`` written as ``&lt;``. The bracketed markers (``[RECALLED: …]``,
``[/RECALLED]``, ``[CONTEXT: …]``, in any case and spacing: ``[ / recalled ]``) have their ``[``
written as ``&#91;``. Nothing else in the text changes.
"""

from __future__ import annotations

import re

__all__ = ["BRACKET_MARKERS", "DELIMITERS", "escape_delimiters", "tag_block"]

# Every tag name a contextgate prompt uses as a delimiter.
DELIMITERS = (
    "contextgate_context",
    "document",
    "artifact_preview",
    "question",
    "goal",
    "source",
    "focus",
    "transcript",
    "existing_memories",
    "summaries",
)

_TAG = re.compile(
    r"<(?=\s*/?\s*(?:" + "|".join(DELIMITERS) + r")(?![\w-]))",
    re.IGNORECASE,
)

# Every bracketed marker a contextgate prompt uses as a delimiter: the recalled-messages block
# (app/recall/search.py) and the per-turn context stamp (app/memories/template.py).
BRACKET_MARKERS = ("recalled", "context")

_BRACKET = re.compile(
    r"\[(?=\s*/?\s*(?:" + "|".join(BRACKET_MARKERS) + r")(?![\w-]))",
    re.IGNORECASE,
)


def escape_delimiters(text: str) -> str:
    """``text`` with no sequence that could open or close a delimiter of ours."""
    if "<" in text:
        text = _TAG.sub("&lt;", text)
    if "[" in text:
        text = _BRACKET.sub("&#91;", text)
    return text


def tag_block(tag: str, text: str, attributes: str = "") -> str:
    """``text`` escaped, between ``<tag attributes>`` and ``</tag>`` on their own lines."""
    assert tag in DELIMITERS, tag
    opening = f"<{tag} {attributes}>" if attributes else f"<{tag}>"
    return f"{opening}\n{escape_delimiters(text)}\n</{tag}>"
