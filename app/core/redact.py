"""Secret redaction: one ``Redactor`` for everything contextgate says to a client, the database,
a log or a metric label.

It masks two kinds of text. Exact secrets contextgate knows (the upstream key, the master key,
every ``api_key``/secret of the model_list config with ``os.environ/NAME`` resolved, provider
key variables such as ``OPENAI_API_KEY``), registered at start by :func:`configure_redaction`;
and anything shaped like a credential (``sk-…``/``sk-ant-…``/``sk-proj-…``/``sk-cg-…`` keys,
bearer tokens, AWS access key ids, a long token after "key"/"token"/"secret").
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping

__all__ = ["MASK", "Redactor", "configure_redaction", "redact", "redactor"]

MASK = "[redacted]"

# Shorter known values are not masked: a 3-letter "secret" would mask ordinary words.
_MIN_SECRET = 6

_PATTERNS = [
    # OpenAI-style keys (sk-, sk-proj-, sk-ant-, contextgate's sk-cg-), also as providers
    # print them half-masked ("sk-proj-ab****xyz").
    re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-*]{6,}"),
    re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"\bxox[abpors]-[A-Za-z0-9-]{10,}"),
    # Authorization headers and bearer tokens, in any rendering.
    re.compile(r"(?i)(authorization['\"]?\s*[:=]\s*['\"]?)(?:bearer\s+|basic\s+)?[^\s'\",}]+"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]+=*"),
    # Credentials in URLs: ?key=…, &api_key=…, ?token=…, and user:password@host.
    re.compile(
        r"(?i)([?&](?:api[_-]?key|key|token|access_token|secret|password|sig|signature)=)[^&\s'\"]+"
    ),
    re.compile(r"(?i)(\b[a-z][a-z0-9+.\-]*://[^/\s:@]+:)[^@\s/]+(@)"),
    # "api_key": "…" in dict/JSON renderings.
    re.compile(
        r"(?i)(['\"]?(?:api_key|x-api-key|master_key|upstream_api_key|password|secret)"
        r"['\"]?\s*[:=]\s*['\"]?)[^'\"\s,}]+"
    ),
    # A long hex/base64 token right after "key", "token" or "secret" (with a digit in it, so
    # that prose such as "the key insight…" stays).
    re.compile(
        r"(?i)(\b(?:[a-z]+[_-])?(?:key|token|secret)s?\b['\"]?(?:\s*[:=]\s*|\s+)['\"]?)"
        r"(?=[A-Za-z0-9+/_\-]*\d)[A-Za-z0-9+/_\-]{20,}={0,2}"
    ),
]

# Environment variables whose values are secrets, wherever they come from.
_SECRET_ENV = re.compile(
    r"(?i)(^CONTEXTGATE_(MASTER_KEY|UPSTREAM_API_KEY)$|_API_KEY$|_SECRET(_ACCESS)?_KEY$"
    r"|_AUTH_TOKEN$|_ACCESS_TOKEN$|^API_KEY$)"
)
# model_list litellm_params whose values are secrets.
_SECRET_PARAM = re.compile(r"(?i)(key|secret|token|password|credential)")


def _mask(match: re.Match[str]) -> str:
    groups = [g or "" for g in match.groups()]
    if not groups:
        return MASK
    return groups[0] + MASK + (groups[1] if len(groups) > 1 else "")


# Short texts are remembered with their redaction: the same notes and messages come back on
# every request (an agent's each call), and a dozen regexes over each cost more than a lookup.
_MEMO_CHARS = 2048
_MEMO_SIZE = 512


class Redactor:
    """Masks known secrets and credential-shaped text; ``add`` may be called at any time."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._lock = threading.Lock()
        self._secrets: set[str] = set()
        self._known: re.Pattern[str] | None = None
        self._memo: dict[str, str] = {}  # replaced, after ``_known``, when a secret is added
        self.add(*secrets)

    def add(self, *values: str | None) -> None:
        fresh = {v for v in values if v and len(v) >= _MIN_SECRET and v not in self._secrets}
        if not fresh:
            return
        with self._lock:
            self._secrets |= fresh
            # Longest first, so that a secret containing another is masked whole.
            ordered = sorted(self._secrets, key=len, reverse=True)
            self._known = re.compile("|".join(re.escape(value) for value in ordered))
            self._memo = {}

    @property
    def secrets(self) -> frozenset[str]:
        return frozenset(self._secrets)

    def __call__(self, text: str) -> str:
        short = len(text) <= _MEMO_CHARS
        memo = self._memo  # read before ``_known``: a memo never outlives the secrets it saw
        if short and (found := memo.get(text)) is not None:
            return found
        known = self._known
        redacted = text if known is None else known.sub(MASK, text)
        for pattern in _PATTERNS:
            redacted = pattern.sub(_mask, redacted)
        if short:
            if len(memo) >= _MEMO_SIZE:
                memo.clear()
            memo[text] = redacted
        return redacted

    def value(self, value: object) -> object:
        """Strings (also inside lists and dicts) redacted; other values as they are."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, dict):
            return {key: self.value(item) for key, item in value.items()}
        return value


redactor = Redactor()


def redact(text: str) -> str:
    """``text`` with every secret contextgate knows and every credential-shaped token masked."""
    return redactor(text)


def secrets_of_params(params: Mapping[str, object]) -> list[str]:
    """The secret values among a deployment's litellm_params (api_key, aws_secret_…, …)."""
    return [
        value
        for name, value in params.items()
        if isinstance(value, str) and _SECRET_PARAM.search(name)
    ]


def configure_redaction(
    *secrets: str | None,
    params: Iterable[Mapping[str, object]] = (),
    environ: Mapping[str, str] | None = None,
) -> Redactor:
    """Register every secret contextgate knows at start: the given ones (master key, upstream
    key), those of the model_list deployments, and provider key variables of the environment."""
    environ = os.environ if environ is None else environ
    redactor.add(*secrets)
    for deployment_params in params:
        redactor.add(*secrets_of_params(deployment_params))
    redactor.add(*(value for name, value in environ.items() if _SECRET_ENV.search(name)))
    return redactor
