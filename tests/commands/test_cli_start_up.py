"""``contextgate serve`` starts with the collector off (app/cli.py) and the app turns it back
on once it has frozen what start-up built (app/main.py); importing the CLI module for anything
else (the benchmarks, the tests, a migration) leaves the collector alone."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.proxy import REPO

PROBE = "import gc, app.cli; print(gc.isenabled())"


def _collector_after_import(*argv: str) -> str:
    result = subprocess.run(
        [sys.executable, "-", *argv],
        input=PROBE,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=True,
    )
    return result.stdout.strip()


def test_importing_the_cli_leaves_the_collector_on() -> None:
    assert _collector_after_import() == "True"
    assert _collector_after_import("migrate") == "True"


def test_serve_starts_with_the_collector_off() -> None:
    assert _collector_after_import("serve") == "False"


async def test_the_started_app_turns_the_collector_on() -> None:
    import gc

    from app.main import _freeze_startup_objects

    gc.disable()
    try:
        _freeze_startup_objects()
        assert gc.isenabled()
    finally:
        gc.enable()


def test_the_started_app_sizes_the_young_generation_for_a_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The app's start sets the youngest generation's threshold and keeps the older ones'."""
    import gc

    from app import main

    monkeypatch.setattr(main, "_frozen", False)  # as in a new process
    before = gc.get_threshold()
    gc.set_threshold(700, 9, 11)  # CPython's default young generation; older ones marked
    try:
        main._freeze_startup_objects()
        assert gc.get_threshold() == (main.YOUNG_GENERATION_THRESHOLD, 9, 11)
        assert main.YOUNG_GENERATION_THRESHOLD > 700
    finally:
        gc.set_threshold(*before)
