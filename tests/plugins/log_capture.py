"""Whole-suite log capture: no secret may reach a log, anywhere in the suite.

Every log record of the test session (contextgate's own loggers at DEBUG, everything else at
INFO, as a server runs) is formatted with the server's JSON formatter and scanned, and so is the
log of every ``contextgate serve`` process the tests started. A key, an ``Authorization`` value
or a test secret in any of them fails the session, with the offending lines shown.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from app.core.logging import JsonFormatter
from tests.support.proxy import SERVER_LOGS

# Every secret the suite uses has one of these shapes (master keys, virtual keys, upstream keys).
# Anything holding "s3cr3t" is a test secret too (tests/security/test_redaction.py), key-shaped
# or not: an upstream key quoted back in an upstream error must not reach a log either.
SECRET = re.compile(
    r"sk-master[\w-]*|sk-cg-[A-Za-z0-9_-]{6,}|\bsk-test\b|\bsk-fake\b|reject-me|s3cr3t"
    r"|Bearer\s+(?!\[redacted\])[A-Za-z0-9._~+/=-]{6,}"
)


class SecretScanner(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.records = 0
        self.hits: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records += 1
        try:
            text = self.format(record)
        except Exception as exc:  # a record that cannot be formatted is a finding too
            text = f"unformattable record from {record.name}: {exc!r}"
        if SECRET.search(text):
            self.hits.append(text[:400])


_scanner = SecretScanner()


def pytest_configure(config: pytest.Config) -> None:
    root = logging.getLogger()
    root.addHandler(_scanner)
    if root.level > logging.INFO or root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
    logging.getLogger("app").setLevel(logging.DEBUG)


def _scan_server_logs() -> tuple[int, list[str]]:
    scanned, hits = 0, []
    for path in dict.fromkeys(SERVER_LOGS):
        if not Path(path).exists():
            continue
        scanned += 1
        for line in Path(path).read_text(errors="replace").splitlines():
            if SECRET.search(line):
                hits.append(f"{Path(path).name}: {line[:400]}")
    return scanned, hits


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    scanned, server_hits = _scan_server_logs()
    hits = _scanner.hits + server_hits
    session.config.stash[_RESULT] = (_scanner.records, scanned, hits)
    if hits:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_RESULT = pytest.StashKey[tuple[int, int, list[str]]]()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    result = terminalreporter.config.stash.get(_RESULT, None)
    if result is None:
        return
    records, scanned, hits = result
    if hits:
        terminalreporter.section("secrets in logs", sep="=", red=True, bold=True)
        for hit in hits[:50]:
            terminalreporter.write_line(hit)
        terminalreporter.write_line(f"{len(hits)} log line(s) hold a secret")
    else:
        terminalreporter.write_line(
            f"log capture: {records} in-process records and {scanned} server logs scanned, "
            "no secret found"
        )
