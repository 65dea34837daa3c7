"""``lazy_module``: nothing imported until an attribute is read; then the real module takes
the stand-in's place in the importer's namespace."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

from app.core.lazy_module import lazy_module
from tests.support.proxy import REPO


def test_imports_at_the_first_read_and_takes_its_place() -> None:
    namespace: dict[str, Any] = {}
    namespace["cs"] = lazy_module("colorsys", namespace, "cs")
    sys.modules.pop("colorsys", None)
    assert "colorsys" not in sys.modules
    assert "imported at its first use" in repr(namespace["cs"])
    assert namespace["cs"].rgb_to_hsv(1.0, 0.0, 0.0) == (0.0, 1.0, 1.0)
    assert namespace["cs"] is sys.modules["colorsys"]


def test_concurrent_first_reads_see_one_module() -> None:
    namespace: dict[str, Any] = {}
    namespace["m"] = lazy_module("wave", namespace, "m")
    stand_in = namespace["m"]
    seen: list[object] = []
    threads = [threading.Thread(target=lambda: seen.append(stand_in.Wave_read)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 8
    assert len({id(value) for value in seen}) == 1
    assert namespace["m"] is sys.modules["wave"]


def test_the_vectors_still_work_where_numpy_comes_late() -> None:
    """A fresh process: the app imported without numpy, then a vector encoded and decoded
    through the modules that bind it lazily."""
    probe = (
        "import sys, app.main\n"
        "assert 'numpy' not in sys.modules\n"
        "from app.embedders import embedder\n"
        "blob = embedder.encode_vector([3.0, 4.0])\n"
        "assert embedder.np is sys.modules['numpy']\n"
        "print(embedder.decode_vector(blob).tolist())\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert result.stdout.strip() == "[3.0, 4.0]"
