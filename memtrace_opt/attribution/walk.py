"""Forward walk of one fact through the graph: where did the information go, and where did it stop?

From an evidence message, follow the information forward, in execution order: for each variable
that still holds the fact, open the op subgraphs that read it (the op, its other inputs, what it
produced), keep the outputs that still hold the fact, and note the memory-forming ops whose outputs
all lost it. The frontier holds at most ``max_frontier`` variables, earliest created first — the
earliest decisive fault is what we look for, so later branches are the ones cut. Only ingestion ops
and this question's own answer session are opened.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from memtrace_opt.attribution.content import ContentJudge, Fact
from memtrace_opt.attribution.priors import SystemPrior
from memtrace_opt.attribution.view import is_relevant_op
from memtrace_opt.graph.model import JUDGE, MEMORY_UNIT, QA, MemoryGraph

__all__ = ["Walk", "forward_walk"]


@dataclass
class Walk:
    """What the walk saw: holding variables, memory units among them, ops that lost the fact."""

    fact: Fact
    holding: list[str] = field(default_factory=list)
    unit_holders: list[str] = field(default_factory=list)
    losses: list[str] = field(default_factory=list)
    visited: list[str] = field(default_factory=list)
    truncated: int = 0

    def first_loss(self, graph: MemoryGraph, prefer: tuple[str, ...]) -> str | None:
        """The earliest op that lost the fact, preferring content-forming categories (``prefer``)."""
        preferred = [o for o in self.losses if graph.ops[o].category in prefer]
        pool = preferred or self.losses
        return min(pool, key=lambda o: graph.ops[o].time) if pool else None


def forward_walk(
    graph: MemoryGraph,
    fact: Fact,
    start: str,
    *,
    judge: ContentJudge,
    qa_id: str,
    prior: SystemPrior,
    max_frontier: int = 16,
    max_ops: int = 5000,
) -> Walk:
    """Follow ``fact`` forward from variable ``start`` (an evidence message)."""
    walk = Walk(fact, holding=[start])
    frontier: list[tuple[int, str]] = [(graph.variables[start].time, start)]
    seen_vars: set[str] = {start}
    seen_ops: set[str] = set()
    while frontier and len(seen_ops) < max_ops:
        _, vid = heapq.heappop(frontier)
        for op_id in graph.consumers(vid):
            op = graph.ops[op_id]
            if op_id in seen_ops or op.category in (QA, JUDGE) or not is_relevant_op(graph, op, qa_id):
                continue
            seen_ops.add(op_id)
            walk.visited.append(op_id)
            held = [o for o in op.output_ids() if _holds(graph, judge, fact, o)]
            if not held and op.category in prior.forming and not _is_unit(graph, vid):
                walk.losses.append(op_id)
            for out in held:
                if out not in seen_vars:
                    seen_vars.add(out)
                    walk.holding.append(out)
                    if _is_unit(graph, out):
                        walk.unit_holders.append(out)
                    heapq.heappush(frontier, (graph.variables[out].time, out))
        walk.truncated += _bound(frontier, max_frontier)
    return walk


def _holds(graph: MemoryGraph, judge: ContentJudge, fact: Fact, vid: str) -> bool:
    var = graph.variables[vid]
    return not var.deleted and bool(judge.holds(fact, var.value).holds)


def _is_unit(graph: MemoryGraph, vid: str) -> bool:
    return graph.variables[vid].category == MEMORY_UNIT


def _bound(frontier: list[tuple[int, str]], limit: int) -> int:
    """Keep the ``limit`` earliest variables; return how many were cut."""
    if len(frontier) <= limit:
        return 0
    cut = len(frontier) - limit
    kept = heapq.nsmallest(limit, frontier)
    frontier[:] = kept
    heapq.heapify(frontier)
    return cut
