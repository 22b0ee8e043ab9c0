"""A synthetic mem0-shaped memory graph of any size: the input of the lineage and save/load measurements.

Real runs on the embedded model give a few hundred ops per conversation; the goals are stated for
100k ops, so the measurements build graphs of that size without running any system: per message an
extraction and an update (or deletion) of one of a fixed pool of memory units, and every so often a
question with its retrieval, answer and judgement. Seeded, so every run measures the same graph.
"""

from __future__ import annotations

import random
from typing import Any

from memtrace_opt.graph.model import (
    ANSWER, EXTRACTION, GOLD, JUDGE, JUDGEMENT, MEMORY_UNIT, MESSAGE, QA, QUERY, RETRIEVAL, RETRIEVED, UPDATE, MemoryGraph,
    Operation, PromptRef, Variable,
)

__all__ = ["synthetic_graph"]


def synthetic_graph(n_ops: int, *, units: int = 2000, question_every: int = 50, top_k: int = 10,
                    delete_rate: float = 0.02, seed: int = 0) -> MemoryGraph:
    """A mem0-shaped graph of about ``n_ops`` ops: per message extract + update (or delete) of one of
    ``units`` memory units; every ``question_every`` messages a retrieve (top_k live units), answer, judge."""
    rng = random.Random(seed)
    g = MemoryGraph({"synthetic": True, "seed": seed})
    clock = iter(range(1, 10**9))
    latest: dict[int, Variable] = {}

    def var(name: str, category: str, value: Any, version: int = 1, deleted: bool = False) -> Variable:
        v = Variable(name, version, category, value, next(clock), f"s{i // 20}", "", deleted)
        g.add_variable(v)
        return v

    def op(name: str, category: str, inputs: dict[str, tuple[str, ...]], outputs: dict[str, str], prompt: str | None = None) -> None:
        g.add_operation(Operation(f"s{i // 20}/{name}#{i}", name, category, inputs, outputs, next(clock), f"s{i // 20}",
                                  prompt=PromptRef(prompt, "0" * 12) if prompt else None))

    i = 0
    while len(g.ops) < n_ops:
        msg = var(f"message:{i}", MESSAGE, {"turn_id": f"D{i // 20}:{i % 20}", "speaker": "A", "text": f"turn {i} text"})
        fact = var(f"fact:{i}", "facts", [f"fact {i}"])
        op("extract", EXTRACTION, {"message": (msg.id,)}, {"facts": fact.id}, "fact_extraction")
        u = rng.randrange(units)
        prev = latest.get(u)
        deleting = prev is not None and not prev.deleted and rng.random() < delete_rate
        new = var(f"mem:{u}", MEMORY_UNIT, None if deleting else f"fact {i}", prev.version + 1 if prev else 1, deleting)
        ins: dict[str, tuple[str, ...]] = {"facts": (fact.id,), **({"_previous": (prev.id,)} if prev else {})}
        op("delete" if deleting else "update", UPDATE, ins, {"unit": new.id}, "update_decision")
        latest[u] = new
        if i % question_every == question_every - 1:
            _question(g, var, op, i, [v for v in latest.values() if not v.deleted], rng, top_k)
        i += 1
    return g


def _question(g: MemoryGraph, var: Any, op: Any, i: int, live: list[Variable], rng: random.Random, top_k: int) -> None:
    q = var(f"question:q{i}", QUERY, f"question {i}?")
    hits = rng.sample(live, min(top_k, len(live)))
    ctx = var(f"retrieved:q{i}", RETRIEVED, [{"text": h.value, "date": "2023"} for h in hits])
    op("retrieve", RETRIEVAL, {"query": (q.id,), "units": tuple(h.id for h in hits)}, {"context": ctx.id})
    ans = var(f"answer:q{i}", ANSWER, f"answer {i}")
    op("answer", QA, {"question": (q.id,), "context": (ctx.id,)}, {"answer": ans.id}, "question_answering")
    gold = var(f"gold:q{i}", GOLD, f"gold {i}")
    verdict = var(f"judgement:q{i}", JUDGEMENT, {"score": 1})
    op("judge", JUDGE, {"answer": (ans.id,), "gold": (gold.id,)}, {"verdict": verdict.id})
