"""Starting points of tracing: the messages that carry the answer.

With annotated evidence (LoCoMo's turn ids) they are given. Without it, the reference method's
pseudo-evidence is used: every message variable is ranked by BM25 and by dense (MiniLM) similarity
to ``question + "\\n" + gold answer``, the two rankings are fused with reciprocal rank fusion
(k = 60) and the top 8 are kept. :func:`evidence_recall_at_k` measures how well that approximates
the annotation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from memtrace_opt.attribution.text import content_tokens, value_text
from memtrace_opt.graph.model import MESSAGE, MemoryGraph

if TYPE_CHECKING:
    from memtrace_opt.attribution.failures import FailureCase

__all__ = [
    "EmbedFn", "bm25_ranking", "dense_ranking", "evidence_recall_at_k", "pseudo_evidence", "rrf", "starting_points",
]

EmbedFn = Callable[[Sequence[str]], np.ndarray]


def default_embed(texts: Sequence[str]) -> np.ndarray:
    """MiniLM embeddings through the process-wide embedder (loaded on first use)."""
    from memtrace_opt.lm.embeddings import get_embedder

    return get_embedder().embed(list(texts))


def bm25_ranking(texts: Sequence[str], query: str) -> list[int]:
    """Indices of ``texts`` with a positive BM25 score for ``query``, best first."""
    import bm25s

    if not texts:
        return []
    corpus = bm25s.tokenize(list(texts), stopwords="en", show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    q = bm25s.tokenize([query], stopwords="en", show_progress=False)
    docs, scores = retriever.retrieve(q, k=len(texts), show_progress=False)
    return [int(d) for d, s in zip(docs[0], scores[0]) if s > 0]


def dense_ranking(texts: Sequence[str], query: str, embed: EmbedFn) -> list[int]:
    """Indices of ``texts`` by cosine similarity to ``query``, best first (ties by position)."""
    if not texts:
        return []
    vectors = embed([query, *texts])
    sims = vectors[1:] @ vectors[0]
    return sorted(range(len(texts)), key=lambda i: (-float(sims[i]), i))


def rrf(rankings: Sequence[Sequence[int]], *, k: int = 60) -> list[int]:
    """Reciprocal rank fusion: items ordered by the sum of 1/(k + rank) over rankings."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda i: (-scores[i], i))


def pseudo_evidence(
    graph: MemoryGraph,
    question: str,
    gold: str,
    *,
    top: int = 8,
    rrf_k: int = 60,
    embed: EmbedFn | None = default_embed,
) -> list[str]:
    """Message variable ids most similar to question + gold answer, BM25 ⊕ dense fused by RRF.

    ``embed=None`` uses BM25 alone (for tests and when the embedding model is unavailable).
    """
    messages = [v for v in graph.variables.values() if v.category == MESSAGE]
    texts = [value_text(v.value) for v in messages]
    query = f"{question}\n{gold}"
    rankings = [bm25_ranking(texts, query)]
    if embed is not None:
        rankings.append(dense_ranking(texts, query, embed))
    return [messages[i].id for i in rrf(rankings, k=rrf_k)[:top]]


def starting_points(graph: MemoryGraph, case: FailureCase, *, mode: str = "auto", top: int = 8,
                    embed: EmbedFn | None = default_embed) -> tuple[list[str], str]:
    """The evidence message ids to trace from, and where they came from (``annotated`` or ``pseudo``).

    ``mode``: annotated, pseudo, or auto (annotated when the case has any in this graph). Of the
    pseudo-evidence, the messages carrying at least half of the gold answer's tokens are kept (the
    rest are near misses that would send tracing down unrelated paths); if none does, the best two.
    """
    annotated = case.evidence_vars(graph)
    if mode == "annotated" or (mode == "auto" and annotated):
        return annotated, "annotated"
    ranked = pseudo_evidence(graph, case.question, case.gold, top=top, embed=embed)
    gold = content_tokens(case.gold)
    bearing = [m for m in ranked
               if gold and 2 * len(gold & content_tokens(value_text(graph.value(m)))) >= len(gold)]
    return (bearing or ranked[:2]), "pseudo"


def evidence_recall_at_k(pseudo: Sequence[str], annotated: Sequence[str], k: int) -> float:
    """Share of annotated evidence found in the first ``k`` pseudo-evidence items (1.0 if none annotated).

    Ids are compared by turn (``message:D1:3@1`` and ``D1:3`` are the same evidence).

    >>> evidence_recall_at_k(["message:D1:1@1", "message:D2:4@1"], ["D2:4", "D3:1"], 2)
    0.5
    """
    wanted = {_turn(a) for a in annotated}
    if not wanted:
        return 1.0
    found = {_turn(p) for p in pseudo[:k]} & wanted
    return len(found) / len(wanted)


def _turn(vid: str) -> str:
    name = vid.rpartition("@")[0] if "@" in vid else vid
    return name.removeprefix("message:")
