"""What a recorded graph cost and where it failed, read off the graph alone.

Every op keeps its LM calls (tokens, latency, whether a cache answered), so a run's usage needs no
ledger: :func:`graph_stats` sums one graph per op name (a reused op and a cached call count as cached,
not computed), :func:`merge_graph_stats` sums many. An evaluation stores one graph's figures per
conversation in ``results.json`` and the merged ones in ``summary.json`` and ``usage.json``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memtrace_opt.graph.model import MemoryGraph

__all__ = ["graph_stats", "merge_graph_stats"]


def graph_stats(graph: MemoryGraph) -> dict[str, Any]:
    """What one conversation's graph cost and where it failed: LM usage per op name, failed ops."""
    by_op: dict[str, dict[str, Any]] = {}
    failed: dict[str, int] = {}
    for op in graph.ops.values():
        row = by_op.setdefault(op.name, {"ops": 0, "lm_calls": 0, "cached_calls": 0, "prompt_tokens": 0,
                                         "completion_tokens": 0, "latency_s": 0.0})
        row["ops"] += 1
        for call in op.lm_calls:
            if op.reused or call.cached:
                row["cached_calls"] += 1
                continue
            row["lm_calls"] += 1
            row["prompt_tokens"] += call.prompt_tokens
            row["completion_tokens"] += call.completion_tokens
            row["latency_s"] = round(row["latency_s"] + call.latency_s, 4)
        if op.status == "failed":
            failed[op.name] = failed.get(op.name, 0) + 1
    return {"ops": len(graph.ops), "variables": len(graph.variables), "by_op": by_op, "failed_ops": failed,
            "wall_s": graph.meta.get("wall_s", 0.0)}


def merge_graph_stats(stats: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Many :func:`graph_stats` summed: totals over every op name, per op name, failed ops and wall time."""
    by_op: dict[str, dict[str, Any]] = {}
    failed: dict[str, int] = {}
    for s in stats:
        for name, row in s.get("by_op", {}).items():
            acc = by_op.setdefault(name, {k: 0 for k in row})
            for k, v in row.items():
                acc[k] = round(acc.get(k, 0) + v, 4)
        for name, n in s.get("failed_ops", {}).items():
            failed[name] = failed.get(name, 0) + n
    totals = {k: round(sum(row[k] for row in by_op.values()), 4)
              for k in ("lm_calls", "cached_calls", "prompt_tokens", "completion_tokens", "latency_s")}
    return {"totals": totals, "by_op": by_op, "failed_ops": failed,
            "wall_s": round(sum(float(s.get("wall_s", 0.0)) for s in stats), 3)}
