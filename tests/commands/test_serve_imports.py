"""What the server never uses stays out of its memory (issue 26): ``contextgate serve`` keeps
trio, h2, httpx's command-line client and pydantic.v1 from being imported (app/cli.py), and
importing the app leaves the libraries of features used later (BM25, the inspector's
templates, a YAML model list, numpy for vectors) to the first use. The features themselves are
tested where they live. Its migrations run in a forked child (on Linux): alembic and mako stay
out too."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.proxy import REPO

# rich: httpx._main imports it; the commands that print import it when they do
SERVE_UNUSED = ("trio", "h2", "hpack", "httpx._main", "pygments", "rich", "pydantic.v1")
LATER = ("bm25s", "tqdm", "jinja2", "yaml", "numpy")
PROBE = (
    "import sys, app.cli, app.main\n"
    f"names = {SERVE_UNUSED + LATER!r}\n"
    "print(' '.join(n for n in names if sys.modules.get(n) is not None))\n"
)


def _imported(*argv: str, probe: str = PROBE, **env: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-", *argv],
        input=probe,
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
    """Nothing the server imports at start needs h2 (the upstream pool is HTTP/1.1, httpcore
    comes with litellm): asked for, it stays importable, and only it."""
    probe = PROBE.replace("print(", "import h2\nprint(", 1)
    imported = _imported("serve", probe=probe, LITELLM_HTTP2="true")
    assert "h2" in imported
    assert not imported & {"trio", "httpx._main"}
    with pytest.raises(subprocess.CalledProcessError):  # without it, h2 is kept out
        _imported("serve", probe=probe)


MIGRATE_PROBE = (
    "import sys, typer, app.cli\n"
    "from pathlib import Path\n"
    "from app.commands import migrations\n"
    "if sys.argv[3:] == ['--no-schema']:\n"
    "    migrations.SQLITE_SCHEMA = Path('/nonexistent/sqlite_schema.sql')\n"
    "try:\n"
    "    app.cli._migrate_apart_or_exit(sys.argv[2])\n"
    "except typer.Exit as exc:\n"
    "    sys.exit(exc.exit_code)\n"
    "print(' '.join(n for n in ('alembic', 'mako') if sys.modules.get(n) is not None))\n"
)


def _migrate_apart(url: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-", "serve", url, *flags],
        input=MIGRATE_PROBE,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )


def _stored_heads(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {row[0] for row in db.execute("SELECT version_num FROM alembic_version")}


@pytest.mark.parametrize("flags", [(), ("--no-schema",)], ids=["from-schema", "migrated"])
@pytest.mark.skipif(sys.platform != "linux", reason="serve migrates in a forked child on Linux")
def test_serve_migrates_without_holding_alembic(tmp_path: Path, flags: tuple[str, ...]) -> None:
    """A new SQLite database created from the schema, or (without one) migrated in a forked
    child: either way, none of alembic in the server."""
    from alembic.script import ScriptDirectory

    from app.commands.migrations import alembic_config

    url = f"sqlite+aiosqlite:///{tmp_path}/serve.db"
    result = _migrate_apart(url, *flags)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == []  # none of it in this process
    heads = ScriptDirectory.from_config(alembic_config(url)).get_heads()  # type: ignore[arg-type]
    assert _stored_heads(tmp_path / "serve.db") == set(heads)


def test_serve_reports_a_database_it_cannot_migrate_in_one_line() -> None:
    result = _migrate_apart("sqlite+aiosqlite:////no/such/dir/x.db")
    assert result.returncode == 2
    assert result.stderr.startswith("contextgate: cannot migrate the database: ")
    assert len(result.stderr.splitlines()) == 1, result.stderr


ORDER_PROBE = (
    "import sys, uvicorn, tiktoken.registry, app.cli\n"
    "from pathlib import Path\n"
    "from app.commands import migrations\n"
    "from app.commands.migrations import sqlite_at_heads\n"
    "migrations.SQLITE_SCHEMA = Path('/nonexistent/sqlite_schema.sql')  # migrate: a child\n"
    "url, seen = sys.argv[2], []\n"
    "class Watch:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name == 'app.main':\n"
    "            built = tiktoken.registry.ENCODINGS.get('cl100k_base')\n"
    "            seen.append('built' if built is not None else 'not-built')\n"
    "            seen.append('ranks' if hasattr(built, '_mergeable_ranks') else 'no-ranks')\n"
    "        return None\n"
    "sys.meta_path.insert(0, Watch())\n"
    "def run(*args, **kwargs):\n"
    "    print(*seen, 'app' if 'app.main' in sys.modules else 'no-app',\n"
    "          'at-heads' if sqlite_at_heads(url) else 'not-at-heads')\n"
    "uvicorn.run = run\n"
    "sys.argv[1:] = ['serve']\n"
    "app.cli.main()\n"
)


def test_serve_builds_its_tokenizer_before_the_app_is_imported(tmp_path: Path) -> None:
    """tiktoken's dict of ranks lives beside the built tokenizer for a moment (~15 MB): built
    after the app's imports, on the first request, that moment was the server's peak memory.
    The app is imported while the database migrates (in a child), and served once it is at
    every head."""
    url = f"sqlite+aiosqlite:///{tmp_path}/o.db"
    result = subprocess.run(
        [sys.executable, "-", "serve", url],
        input=ORDER_PROBE,
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "CONTEXTGATE_DATABASE_URL": url},
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["built", "no-ranks", "app", "at-heads"]
