"""The whole-suite log scan (tests/plugins/log_capture.py) finds what it must find."""

from __future__ import annotations

import logging

from tests.plugins.log_capture import SECRET, SecretScanner


def _record(message: str) -> logging.LogRecord:
    # Built by hand, not logged: a real record with a secret would fail this very session.
    return logging.LogRecord("app.test", logging.INFO, __file__, 1, message, (), None)


def test_scanner_flags_keys_and_authorization_values() -> None:
    scanner = SecretScanner()
    scanner.handle(_record("calling upstream with Authorization: Bearer abcdef123456"))
    scanner.handle(_record("issued sk-cg-0123456789abcdef for team a"))
    scanner.handle(_record("master key is sk-master-whatever"))
    assert len(scanner.hits) == 3


def test_scanner_passes_redacted_and_ordinary_lines() -> None:
    scanner = SecretScanner()
    scanner.handle(_record("Authorization: Bearer [redacted]"))
    scanner.handle(_record("chat request done in 12 ms, model gpt-4o-mini"))
    assert scanner.hits == []
    assert scanner.records == 2


def test_pattern_covers_every_secret_shape_the_suite_uses() -> None:
    for secret in ("sk-master", "sk-master-cli-keys", "sk-test", "sk-fake", "reject-me"):
        assert SECRET.search(f"value {secret} here"), secret
    assert not SECRET.search("sk-testing-the-flow is prose, not a key")
