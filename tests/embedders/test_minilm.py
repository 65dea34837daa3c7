"""The NumPy all-MiniLM-L6-v2 against sentence-transformers' own output, and the choice of the
embedded embedder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from app.embedders.embedded import MiniLMEmbedder, WordLlamaEmbedder
from app.embedders.embedder import embedded_embedder
from app.embedders.minilm import MiniLM, mapped_tensors, weights_folder

REFERENCE = Path(__file__).parent / "data" / "minilm_reference.json"


@pytest.fixture(scope="module")
def minilm() -> MiniLM:
    folder = weights_folder()
    assert folder is not None, "make install installs requirements/embedded-model.txt"
    return MiniLM(folder)


def test_vectors_match_sentence_transformers(minilm: MiniLM) -> None:
    # Made once with sentence-transformers and PyTorch on the same weights (see "made_by"):
    # plain, accented and CJK text, emoji, a text past the 256-token cut, one character.
    reference = json.loads(REFERENCE.read_text())
    ours = minilm.encode(reference["texts"])
    theirs = np.asarray(reference["vectors"], dtype=np.float32)
    assert ours.shape == theirs.shape == (5, 384)
    assert ours.dtype == np.float32
    cosines = (ours * theirs).sum(axis=1)
    assert cosines.min() > 0.9999
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_weights_are_mapped_not_copied_and_equal_safetensors_own_reading(minilm: MiniLM) -> None:
    from safetensors.numpy import load_file  # installed with wordllama

    folder = weights_folder()
    assert folder is not None
    path = folder / "model.safetensors"
    mapped = mapped_tensors(path)
    read = load_file(str(path))
    assert mapped.keys() == read.keys()
    for name, tensor in read.items():
        assert mapped[name].dtype == tensor.dtype, name
        assert np.array_equal(mapped[name], tensor), name
    # the model's weights are views of the file's memory map, read-only: no copy in the heap
    for weight in [*minilm._linear.values(), *minilm._w.values()]:
        assert isinstance(weight.base, np.memmap) or isinstance(weight, np.memmap)
        assert not weight.flags.writeable


def test_a_batch_gives_the_vectors_of_its_texts_alone(minilm: MiniLM) -> None:
    texts = ["short", "a much longer sentence that pads the other one in the batch " * 5]
    together = minilm.encode(texts)
    alone = np.vstack([minilm.encode([t]) for t in texts])
    assert np.allclose(together, alone, atol=1e-5)  # padding is masked out
    assert minilm.encode([]).shape == (0, 384)


def test_paraphrase_scores_above_the_calibrated_floor_and_unrelated_below(
    minilm: MiniLM,
) -> None:
    query, right, wrong = minilm.encode(
        [
            "Where did I leave my vehicle?",
            "I parked the car on level 3 of the airport garage, spot B14.",
            "Quarterly invoices are exported to the billing warehouse.",
        ]
    )
    floor = MiniLMEmbedder().min_similarity
    assert float(query @ right) >= floor > float(query @ wrong)


def test_embedded_means_minilm_when_installed_and_each_can_be_named() -> None:
    assert isinstance(embedded_embedder("embedded"), MiniLMEmbedder)
    assert isinstance(embedded_embedder("minilm"), MiniLMEmbedder)
    assert isinstance(embedded_embedder("wordllama"), WordLlamaEmbedder)
    assert embedded_embedder("minilm", 0.5).min_similarity == 0.5


def test_embedded_falls_back_to_wordllama_without_the_weights(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("app.embedders.embedded.weights_folder", lambda: None)
    embedder = embedded_embedder("embedded")
    assert isinstance(embedder, WordLlamaEmbedder)
    assert "MiniLM weights are not installed" in caplog.text
