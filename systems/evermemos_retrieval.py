"""EverMemOS indexing and question-time retrieval: hybrid search, the two agentic rounds, final rerank.

Every step is a registered op, so attribution can tell "the store never held it" from "round 1
missed it and the rewrite did not recover it" from "the rerank cut it". Search ops are pure
functions of their inputs (the question or queries and the memory cells), which is what lets
replay reuse them; the BM25 + dense index over a set of cells is content-addressed (a chained
digest of cell ids and texts) and cached per process, so it is built once per conversation, not
once per question, and rebuilt transparently in a fresh process.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from memtrace_opt.graph import OpContext, OpFailure, operation
from memtrace_opt.graph.model import EMBEDDING, RETRIEVAL
from memtrace_opt.systems import evermemos_prompts as P
from memtrace_opt.systems.index import BM25Index, EmbeddingIndex, TextEmbedder, rrf_fuse
from memtrace_opt.systems.qa import shared_context_message

__all__ = ["cell_text", "chain_digest", "embedder_of", "hybrid_search", "record_of"]


# -- cells as search documents ---------------------------------------------------------------------
def cell_text(cell: Mapping[str, Any]) -> str:
    """What is indexed for a cell: its episode and its atomic facts."""
    facts = " ".join(cell.get("facts") or [])
    return f"{cell.get('episode', '')} {facts}".strip()


def record_of(cell: Mapping[str, Any], score: float) -> dict[str, Any]:
    """A candidate/context record: what the agentic prompts and the answer op read."""
    parts = [cell.get("episode", "")]
    if cell.get("facts"):
        parts.append("Facts: " + "; ".join(cell["facts"]))
    for item in cell.get("foresight") or []:
        until = f" (valid until {item['valid_until']})" if item.get("valid_until") else ""
        parts.append(f"Plan: {item['text']}{until}")
    return {"cell": cell["cell"], "text": " ".join(p for p in parts if p), "date": cell.get("date"),
            "turn_ids": list(cell.get("turn_ids") or []), "score": round(score, 6)}


def chain_digest(previous: str, cell: Mapping[str, Any]) -> str:
    """The index digest after adding ``cell`` to an index whose digest was ``previous``."""
    blob = f"{previous}\x00{cell['cell']}\x00{cell_text(cell)}".encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:16]


def cells_digest(cells: Sequence[Mapping[str, Any]]) -> str:
    digest = ""
    for cell in cells:
        digest = chain_digest(digest, cell)
    return digest


def embedder_of(ctx: OpContext) -> TextEmbedder:
    """The run's embedder: ``resources["embedder"]`` (tests pass a fake) or the shared MiniLM model.

    MiniLM is loaded on first use, so a run that never indexes a cell never loads it.
    """
    res = ctx.resources
    found = res.get("embedder") if isinstance(res, Mapping) else getattr(res, "embedder", None)
    if found is not None:
        return found
    from memtrace_opt.lm.embeddings import get_embedder

    return get_embedder()


# -- the content-addressed index cache --------------------------------------------------------------
@dataclass
class CellIndex:
    """BM25 and dense indexes over one set of cells."""

    bm25: BM25Index
    dense: EmbeddingIndex
    cells: dict[str, Mapping[str, Any]]


_CACHE: OrderedDict[tuple[str, str], CellIndex] = OrderedDict()
_CACHE_SIZE = 8
_CACHE_LOCK = threading.Lock()


def cell_index(cells: Sequence[Mapping[str, Any]], embedder: TextEmbedder) -> CellIndex:
    """The (cached) index over ``cells``; building it embeds only texts the embedder has not seen."""
    key = (getattr(embedder, "model_id", type(embedder).__qualname__), cells_digest(cells))
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
    ids, texts = [c["cell"] for c in cells], [cell_text(c) for c in cells]
    dense = EmbeddingIndex(embedder)
    dense.add(ids, texts)
    built = CellIndex(BM25Index(ids, texts), dense, {c["cell"]: c for c in cells})
    with _CACHE_LOCK:
        _CACHE[key] = built
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return built


def hybrid_search(query: str, cells: Sequence[Mapping[str, Any]], *, k: int, depth: int, rrf_k: int,
                  embedder: TextEmbedder) -> list[tuple[str, float]]:
    """BM25 top-``depth`` and dense top-``depth`` fused by RRF; the best ``k`` ``(cell id, score)``."""
    if not cells or k <= 0:
        return []
    index = cell_index(cells, embedder)
    lists = [[h.id for h in index.bm25.search(query, depth)], [h.id for h in index.dense.search(query, depth)]]
    return rrf_fuse(lists, k=rrf_k, limit=k)


def _records(ranked: Sequence[tuple[str, float]], cells: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    by_id = {c["cell"]: c for c in cells}
    return [record_of(by_id[cid], score) for cid, score in ranked]


# -- ingestion: indexing ----------------------------------------------------------------------------
@operation("evermemos.index", category=EMBEDDING, memoize=False)
def index_cell(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Embed a new cell (BM25 needs no precomputation) and advance the index digest.

    Not memoized: on replay it re-runs so the embedder's cache is warm again; it is cheap.
    """
    cell = inputs["cell"]
    previous = inputs.get("index") or {"size": 0, "digest": ""}
    embedder_of(ctx).embed([cell_text(cell)])
    return {"index": {"size": previous["size"] + 1, "digest": chain_digest(previous["digest"], cell),
                      "added": cell["cell"]}}


# -- question time ----------------------------------------------------------------------------------
#: What a search keeps of the store it reads (``OpSpec.selects``): the cells its candidates name. The
#: index holds no cell record (a size and a digest), so a minibatch's cone never follows it: the
#: search ranks every cell, but only the cells it returned reach an answer.
SEARCHED_STORE: dict[str, str] = {"cells": "cell", "index": "cell"}


@operation("evermemos.hybrid_retrieval", category=RETRIEVAL, selects=SEARCHED_STORE)
def hybrid_retrieval(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Round 1 candidates: the question against BM25 and dense indexes, fused with RRF."""
    cells = inputs.get("cells") or []
    ranked = hybrid_search(inputs["query"], cells, k=params["k"], depth=params["depth"], rrf_k=params["rrf_k"],
                           embedder=embedder_of(ctx))
    return {"candidates": _records(ranked, cells)}


#: The agentic checks are shown only the top ``shown`` candidates: the cone follows only those.
SHOWN_CANDIDATES: dict[str, tuple[str, str]] = {"candidates": ("cell", "shown")}


def _messages(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any], separate_user: str,
              shared_tail: str = "") -> list[dict[str, str]]:
    """The check's and the rewrite's chat: the op's prompt first (``separate``), or the question's shared
    context first and the prompt after it (``shared_prefix``, the prefix the answer op sends too)."""
    if params.get("layout", "separate") == "shared_prefix":
        shared = shared_context_message(inputs["query"], inputs["candidates"][: params["shown"]],
                                        params.get("question_date"))
        return [shared, {"role": "user", "content": f"{ctx.prompt}{shared_tail}"}]
    return [{"role": "system", "content": ctx.prompt or ""}, {"role": "user", "content": separate_user}]


@operation("evermemos.sufficiency_check", category=RETRIEVAL, prompt=P.SUFFICIENCY, reads_first=SHOWN_CANDIDATES)
def sufficiency_check(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Agentic round 1: does the top of the candidate list suffice to answer? Unparsable → assume yes.

    ``reason_chars`` caps the "missing" reason the grammar allows (0: none, a bare verdict of a few tokens).
    """
    shown = inputs["candidates"][: params["shown"]]
    reason_chars = params.get("reason_chars", P.REASON_CHARS)
    messages = _messages(ctx, inputs, params, P.render_sufficiency(inputs["query"], shown))
    reply = ctx.chat(messages, max_tokens=P.sufficiency_max_tokens(reason_chars),
                     json_schema=P.sufficiency_schema(reason_chars))
    verdict = P.parse_sufficiency(reply.text) if reply.finish_reason != "length" else None
    if verdict is None:
        raise OpFailure("sufficiency reply is not JSON with a boolean 'sufficient'",
                        fallback={"verdict": {"sufficient": True, "missing": ""}}, raw=reply.text)
    return {"verdict": verdict}


@operation("evermemos.query_rewrite", category=RETRIEVAL, prompt=P.REWRITE, reads_first=SHOWN_CANDIDATES)
def query_rewrite(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Agentic round 2: 2-3 follow-up queries aimed at the missing information. Unparsable → the question."""
    shown = inputs["candidates"][: params["shown"]]
    missing = inputs["verdict"].get("missing", "")
    messages = _messages(ctx, inputs, params, P.render_rewrite(inputs["query"], shown, missing),
                         f"\n\nMissing information: {missing or 'unknown'}")
    reply = ctx.chat(messages, max_tokens=160, json_schema=P.REWRITE_SCHEMA)
    queries = P.parse_queries(reply.text, inputs["query"], params["max_queries"]) \
        if reply.finish_reason != "length" else None
    if queries is None:
        raise OpFailure("rewrite reply holds no usable query", fallback={"queries": [inputs["query"]]},
                        raw=reply.text)
    return {"queries": queries}


@operation("evermemos.multi_query_retrieval", category=RETRIEVAL,
           selects={**SEARCHED_STORE, "candidates": "cell"})
def multi_query_retrieval(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Round 2 candidates: each rewritten query's hybrid results, RRF-fused with the round-1 list."""
    cells = inputs.get("cells") or []
    rankings = [[c["cell"] for c in inputs["candidates"]]]
    for query in inputs["queries"]:
        ranked = hybrid_search(query, cells, k=params["k"], depth=params["depth"], rrf_k=params["rrf_k"],
                               embedder=embedder_of(ctx))
        rankings.append([cid for cid, _ in ranked])
    fused = rrf_fuse(rankings, k=params["rrf_k"], limit=params["k"])
    return {"candidates": _records(fused, cells)}


@operation("evermemos.final_rerank", category=RETRIEVAL, selects={"candidates": "cell"})
def final_rerank(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Keep the ``top_k`` best-scored candidates (one per cell), shown in chronological (cell) order.

    A timeline reads better for the answer model than a relevance list: "most recent wins" and
    relative dates need the order of events.
    """
    seen: dict[str, dict[str, Any]] = {}
    for cand in sorted(inputs["candidates"], key=lambda c: -c["score"]):
        seen.setdefault(cand["cell"], cand)
    kept = [dict(c, rank=i) for i, c in enumerate(list(seen.values())[: params["top_k"]], start=1)]
    kept.sort(key=lambda c: _cell_ordinal(c["cell"]))
    return {"context": kept}


def _cell_ordinal(cell_id: str) -> int:
    digits = "".join(ch for ch in cell_id.rpartition("cell")[2] if ch.isdigit())
    return int(digits) if digits else 0
