"""The in-process set of a conversation's recall vectors: rows added turn by turn land in
growing buffers, and a view taken before an addition keeps what it saw."""

from __future__ import annotations

import numpy as np

from app.recall.vector_sets import VectorSet


def _unit(seed: int, width: int = 8) -> np.ndarray:
    vector = np.random.default_rng(seed).standard_normal(width).astype(np.float32)
    return vector / np.linalg.norm(vector)


def test_rows_added_turn_by_turn_are_all_searchable_in_order() -> None:
    vectors = VectorSet(model="m")
    expected: list[tuple[int, int, np.ndarray]] = []
    for turn in range(40):  # past several doublings of the buffers
        stored = (100 + 2 * turn, 2 * turn, _unit(2 * turn))
        vectors._add([stored, (101 + 2 * turn, 2 * turn + 1, None)])
        expected.append(stored)
    assert vectors.size == 40
    assert vectors.message_ids.tolist() == [m for m, _, _ in expected]
    assert vectors.sequences.tolist() == [s for _, s, _ in expected]
    assert vectors.matrix is not None
    np.testing.assert_array_equal(vectors.matrix, np.stack([v for _, _, v in expected]))
    assert vectors.max_sequence == 79  # rows without a vector count as seen


def test_a_view_taken_before_growth_keeps_its_rows() -> None:
    vectors = VectorSet(model="m")
    vectors._add([(1, 0, _unit(0)), (2, 1, _unit(1))])
    before = vectors.matrix
    assert before is not None
    snapshot = before.copy()
    vectors._add([(i, i, _unit(i)) for i in range(3, 60)])
    np.testing.assert_array_equal(before, snapshot)
    assert before.shape[0] == 2
    assert vectors.size == 59


def test_repeated_ids_and_another_width_are_ignored() -> None:
    vectors = VectorSet(model="m")
    vectors._add([(1, 0, _unit(0))])
    vectors._add([(1, 0, _unit(5)), (2, 1, _unit(1, width=4))])
    assert vectors.size == 1
    assert vectors.matrix is not None
    np.testing.assert_array_equal(vectors.matrix[0], _unit(0))
