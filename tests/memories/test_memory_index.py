"""The per-user retrieval index updated row by row (app/memories/memory_index.py) ends where an
index built from scratch on the same rows starts: same order, vectors, weights and BM25."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import numpy as np

from app.embedders.embedder import encode_vector
from app.memories.lexical import LexicalIndex
from app.memories.memory_index import MemoryRow, UserIndex

MODEL = "test-model"
START = datetime(2026, 11, 1, tzinfo=UTC)
TOPICS = ["tea", "volvo", "piano", "lisbon", "garage", "invoice", "nurse", "cello", "marathon"]


def vector(seed: int, width: int = 8) -> bytes:
    return encode_vector(np.random.default_rng(seed).normal(size=width).astype(np.float32))


def row(
    i: int,
    content: str | None = None,
    *,
    created: int | None = None,
    updated: int | None = None,
    embedding: bytes | None = None,
    model: str | None = MODEL,
    key: str | None = None,
    active: bool = True,
) -> MemoryRow:
    return MemoryRow(
        id=f"mem_{i:03d}",
        content=content or f"memory {i} about {TOPICS[i % len(TOPICS)]} number n{i}",
        memory_type="fact",
        importance=1 + i % 10,
        created_at=START + timedelta(minutes=i if created is None else created),
        updated_at=START + timedelta(minutes=i if updated is None else updated),
        embedding=embedding,
        embedding_model=model if embedding is not None else None,
        key=key,
        active=active,
    )


def assert_same(index: UserIndex, fresh: UserIndex, queries: list[str]) -> None:
    assert [c.id for c in index.candidates] == [c.id for c in fresh.candidates]
    assert [c.content for c in index.candidates] == [c.content for c in fresh.candidates]
    assert index.facts == fresh.facts
    assert index.count == fresh.count
    assert np.array_equal(index.importance, fresh.importance)
    assert np.array_equal(index.timestamps, fresh.timestamps)
    assert np.array_equal(index.has_vector, fresh.has_vector)
    assert index.matrix is not None
    assert fresh.matrix is not None
    assert np.allclose(index.matrix, fresh.matrix)
    for query in queries:
        for strong in (False, True):
            got = index.lexical_scores(query, strong=strong)
            want = fresh.lexical_scores(query, strong=strong)
            assert np.allclose(got[0], want[0])
            assert np.array_equal(got[1], want[1])


def assert_snapshot_points_right(index: UserIndex, word: str) -> None:
    """Before a new BM25 snapshot, the old one still scores the memories it holds, in place."""
    raw, _ = index.lexical_scores(word, strong=False)
    scored = {index.candidates[i].id for i in np.flatnonzero(raw)}
    held = {c.id for c in index.candidates if word in c.content and c.id not in index._pending}
    assert scored == held
    assert held


def rebuild_lexical(index: UserIndex) -> None:
    ids, contents, tokens = index.lexical_snapshot()
    index.install_lexical(ids, contents, LexicalIndex.from_tokens(tokens))


def test_rows_applied_one_by_one_match_a_fresh_build() -> None:
    rows = {r.id: r for r in (row(i, embedding=vector(i) if i % 4 else None) for i in range(30))}
    index = UserIndex.build(list(rows.values()), MODEL)
    assert index.count == 30
    assert int(index.has_vector.sum()) == 22

    changes = [
        row(30, "Uma's locker code is QX-7731", embedding=vector(30)),  # new, stored vector
        row(31, "Uma plays the cello in an orchestra"),  # new, no vector yet
        row(3, "memory 3 rewritten about lisbon", updated=100),  # new content: vector gone
        row(5, updated=101, embedding=vector(55)),  # same content, a vector computed since
        row(6, updated=102, embedding=vector(6)),  # re-read unchanged (the overlap)
        row(7, updated=103, active=False),  # superseded
        row(40, "favourite colour: green", key="colour"),  # a key/value fact
        row(32, "late commit from a slow clock", created=-5, embedding=vector(32)),  # sorts first
    ]
    index.apply(changes)
    for change in changes:
        rows[change.id] = change
    # pending in BM25 until a new snapshot: the query sharing a term with them says so
    assert index.lexical_stale
    assert index.needs_lexical("what is QX-7731?")
    assert not index.needs_lexical("volvo")
    assert index.lexical_scores("QX-7731", strong=False)[0].max() == 0.0
    assert_snapshot_points_right(index, "volvo")
    # a deletion: no row says so, the active ids do
    del rows["mem_009"]
    active = {r.id for r in rows.values() if r.active and r.key is None}
    index.retain(active, {"mem_040"})
    assert_snapshot_points_right(index, "lisbon")
    rebuild_lexical(index)
    assert not index.lexical_stale

    final = [r for r in rows.values() if r.active and r.key is None]
    fresh = UserIndex.build(final, MODEL, {"mem_040"})
    assert fresh.candidates[0].id == "mem_032"
    assert index.count == fresh.count == len(final) + 1
    ids = [c.id for c in index.candidates]
    assert not index.has_vector[ids.index("mem_003")]  # its new content has no vector yet
    assert index.has_vector[ids.index("mem_005")]
    assert_same(index, fresh, ["QX-7731 locker", "cello orchestra", "lisbon", "n12 tea"])
    top = int(np.argmax(index.lexical_scores("QX-7731", strong=False)[0]))
    assert index.candidates[top].id == "mem_030"


def test_stored_vectors_are_unit_rows_and_foreign_ones_count_as_missing() -> None:
    scaled = encode_vector(np.asarray([3.0, 4.0, 0.0, 0.0], dtype=np.float32))
    rows = [
        row(0, embedding=scaled),
        row(1, embedding=scaled, model="another-model"),  # another embedder's vector
        row(2, embedding=encode_vector(np.ones(5, dtype=np.float32))),  # another width
        row(3, embedding=b"\x00\x01\x02"),  # not float32
        row(4),
    ]
    index = UserIndex.build(rows, MODEL)
    assert index.width == 4
    assert index.matrix is not None
    assert np.allclose(index.matrix[0], [0.6, 0.8, 0.0, 0.0])
    assert index.has_vector.tolist() == [True, False, False, False, False]
    assert [c.id for c in index.missing_vectors(10)] == [f"mem_{i:03d}" for i in range(1, 5)]
    computed = np.eye(4, dtype=np.float32)
    index.set_vectors(["mem_001", "mem_004", "mem_gone", "mem_003"], computed)
    assert index.has_vector.tolist() == [True, True, False, True, True]
    assert np.allclose(index.matrix[4], [0.0, 1.0, 0.0, 0.0])


def test_no_vectors_yet_then_the_first_ones() -> None:
    index = UserIndex.build([row(i) for i in range(3)], MODEL)
    assert index.semantic_matrix() is None
    assert index.width is None
    index.apply([row(3, embedding=vector(3))])
    assert index.width == 8
    assert index.has_vector.tolist() == [False, False, False, True]
    assert index.semantic_matrix() is not None


def test_importing_app_gives_numpy_one_blas_thread_unless_the_environment_says() -> None:
    """A similarity search is one matrix-vector product: OpenBLAS threads on busy cores made it
    ~25x slower (bench/README.md). A deployment's own value wins."""
    script = "import os, app, numpy; print(os.environ['OPENBLAS_NUM_THREADS'])"
    for preset, expected in ((None, "1"), ("3", "3")):
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
        if preset is not None:
            env["OPENBLAS_NUM_THREADS"] = preset
        result = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == expected
