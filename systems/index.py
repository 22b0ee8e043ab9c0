"""Search over memory records, in one place: dense (faiss + MiniLM), BM25 (bm25s), and RRF fusion.

RAG, EverMemOS and attribution's pseudo-evidence all need "find the records nearest to this text";
keeping one implementation means one tokenizer, one embedding model and one tie-breaking rule, so
a record that RAG retrieves is also what attribution would call relevant.

Records are addressed by string ids (a memory unit name, a turn id); faiss only knows int64 ids,
so :class:`EmbeddingIndex` keeps the mapping. Vectors are L2-normalized, so inner product is
cosine similarity. The embedder is anything with ``embed(texts) -> (n, dim) float32 array`` —
by default the shared MiniLM :func:`memtrace_opt.lm.embeddings.get_embedder`, loaded on first use.

>>> bm = BM25Index(["d1", "d2"], ["Tom lives in Leeds", "Priya adopted a cat"])
>>> [h.id for h in bm.search("Where does Tom live?", k=2)]
['d1']
>>> [i for i, _ in rrf_fuse([["a", "b"], ["b", "c"]])]
['b', 'a', 'c']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

import numpy as np

__all__ = ["BM25Index", "EmbeddingIndex", "Hit", "TextEmbedder", "hybrid_rank", "rrf_fuse", "tokenize"]

RRF_K = 60


class TextEmbedder(Protocol):
    """What the index needs from an embedding model."""

    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: the record id and its score (higher is better)."""

    id: str
    score: float


def _default_embedder() -> TextEmbedder:
    from memtrace_opt.lm.embeddings import get_embedder

    return get_embedder()


class EmbeddingIndex:
    """A mutable dense index: ``add``/``remove``/``search`` records by string id.

    Adding an id that is already present replaces its text (an updated memory unit).
    """

    def __init__(self, embedder: TextEmbedder | None = None) -> None:
        self._embedder = embedder
        self._index: Any = None
        self._to_int: dict[str, int] = {}
        self._to_str: dict[int, str] = {}
        self._next = 0

    @property
    def embedder(self) -> TextEmbedder:
        if self._embedder is None:
            self._embedder = _default_embedder()
        return self._embedder

    def __len__(self) -> int:
        return len(self._to_int)

    def __contains__(self, rid: object) -> bool:
        return rid in self._to_int

    def ids(self) -> list[str]:
        """Ids in insertion order."""
        return list(self._to_int)

    def add(self, ids: Sequence[str], texts: Sequence[str]) -> None:
        """Embed ``texts`` and index them under ``ids`` (replacing existing ids)."""
        if len(ids) != len(texts):
            raise ValueError(f"add: {len(ids)} ids but {len(texts)} texts")
        if not ids:
            return
        self.remove([i for i in ids if i in self._to_int])
        vectors = np.ascontiguousarray(self.embedder.embed(list(texts)), dtype=np.float32)
        ints = np.arange(self._next, self._next + len(ids), dtype=np.int64)
        self._next += len(ids)
        for rid, n in zip(ids, ints.tolist(), strict=True):
            self._to_int[rid] = n
            self._to_str[n] = rid
        self._faiss(vectors.shape[1]).add_with_ids(vectors, ints)

    def remove(self, ids: Iterable[str]) -> None:
        """Drop ``ids`` from the index (unknown ids are ignored: removing is idempotent)."""
        ints = [self._to_int.pop(i) for i in ids if i in self._to_int]
        for n in ints:
            del self._to_str[n]
        if ints and self._index is not None:
            self._index.remove_ids(np.asarray(ints, dtype=np.int64))

    def search(self, query: str, k: int) -> list[Hit]:
        """The ``k`` records most similar to ``query``, best first (fewer if the index is smaller)."""
        if k <= 0 or not self._to_int:
            return []
        q = np.ascontiguousarray(self.embedder.embed([query]), dtype=np.float32)
        scores, ints = self._index.search(q, min(k, len(self._to_int)))
        return [Hit(self._to_str[int(n)], float(s)) for s, n in zip(scores[0], ints[0], strict=True) if n >= 0]

    def _faiss(self, dim: int) -> Any:
        if self._index is None:
            import faiss

            self._index = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
        return self._index


@lru_cache(maxsize=1)
def _stem_words() -> Callable[[list[str]], list[str]]:
    from nltk.stem import PorterStemmer

    stemmer = PorterStemmer()
    return lambda words: [stemmer.stem(w) for w in words]


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """BM25 tokens: lower-cased words, English stopwords removed, Porter-stemmed ("lives" ~ "live")."""
    import bm25s

    return bm25s.tokenize(list(texts), stopwords="en", stemmer=_stem_words(), return_ids=False,
                          show_progress=False)


class BM25Index:
    """An immutable BM25 index over ``texts`` addressed by ``ids`` (rebuild it when records change)."""

    def __init__(self, ids: Sequence[str], texts: Sequence[str]) -> None:
        if len(ids) != len(texts):
            raise ValueError(f"BM25Index: {len(ids)} ids but {len(texts)} texts")
        self.ids = list(ids)
        self._retriever: Any = None
        if self.ids:
            import bm25s

            self._retriever = bm25s.BM25()
            self._retriever.index(tokenize(texts), show_progress=False)

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, query: str, k: int) -> list[Hit]:
        """Up to ``k`` records sharing at least one term with ``query``, best first."""
        if k <= 0 or self._retriever is None:
            return []
        docs, scores = self._retriever.retrieve(tokenize([query]), k=min(k, len(self.ids)), show_progress=False)
        return [Hit(self.ids[int(d)], float(s)) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]


def rrf_fuse(rankings: Sequence[Sequence[str]], k: int = RRF_K, limit: int | None = None) -> list[tuple[str, float]]:
    """Reciprocal-rank fusion: score(id) = sum over rankings of 1 / (k + rank), rank from 1.

    Ties keep the order in which ids were first seen, so the result is deterministic.
    """
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, rid in enumerate(ranking, start=1):
            scores[rid] = scores.get(rid, 0.0) + 1.0 / (k + rank)
    fused = sorted(scores.items(), key=lambda kv: -kv[1])  # stable: first-seen order on ties
    return fused if limit is None else fused[:limit]


def hybrid_rank(
    query: str,
    ids: Sequence[str],
    texts: Sequence[str],
    k: int,
    *,
    embedder: TextEmbedder | None = None,
    rrf_k: int = RRF_K,
) -> list[tuple[str, float]]:
    """One-shot BM25 + dense search over ``texts`` fused with RRF; the top ``k`` ``(id, score)``.

    For callers that search a fixed record set once (attribution's pseudo-evidence over messages).
    """
    if not ids:
        return []
    dense = EmbeddingIndex(embedder)
    dense.add(ids, texts)
    depth = max(k, min(len(ids), 4 * k))
    lists = [[h.id for h in BM25Index(ids, texts).search(query, depth)], [h.id for h in dense.search(query, depth)]]
    return rrf_fuse(lists, k=rrf_k, limit=k)
