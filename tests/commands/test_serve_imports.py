"""What the server never uses stays out of its memory (issue 26): ``contextgate serve`` keeps
trio, h2 and httpx's command-line client from being imported (app/cli.py), and importing the
app leaves the libraries of features used later (BM25, the inspector's templates, a YAML
model list) to the first use. The features themselves are tested where they live."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.proxy import REPO

SERVE_UNUSED = ("trio", "h2", "hpack", "httpx._main", "pygments")
LATER = ("bm25s", "tqdm", "jinja2", "yaml")
PROBE = (
    "import sys, app.cli, app.main\n"
    f"names = {SERVE_UNUSED + LATER!r}\n"
    "print(' '.join(n for n in names if sys.modules.get(n) is not None))\n"
)


def _imported(*argv: str, **env: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-", *argv],
        input=PROBE,
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **env},
        timeout=120,
        check=True,
    )
    return set(result.stdout.split())


def test_serve_imports_none_of_them() -> None:
    assert _imported("serve") == set()


def test_importing_the_app_leaves_the_later_ones() -> None:
    assert not _imported() & set(LATER)


def test_serve_keeps_h2_when_litellm_is_asked_for_http2() -> None:
    imported = _imported("serve", LITELLM_HTTP2="true")
    assert "h2" in imported
    assert not imported & {"trio", "httpx._main"}
