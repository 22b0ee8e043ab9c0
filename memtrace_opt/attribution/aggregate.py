"""Blame grouped by prompt component: the optimizer's input.

An optimizer can only change prompts, so blame is grouped by the prompt component of the blamed
op: how many failures, of which error types, example reasons, the cases, and the blamed ops'
subgraphs in compact form (what the op read and wrote) for the reflection step. Blame on ops
without a prompt (vector retrieval, a store write, an AnnotationError with no op) is counted apart
as ``unoptimizable``, with the ops it names (``ops``: op name → failures; a system's ``op_settings``
says which settings govern each); failed attributions (no error type) as ``unattributed``.

A compound failure (a blame with a ``chain``: faults still standing once the blamed op is fixed)
also reaches the components of its chain's links, counted apart as ``chained`` (with
``chained_case_ids``), so ``count`` stays the number of failures whose earliest fault is there.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Sequence

from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.attribution.view import compact_op
from memtrace_opt.graph.model import MemoryGraph, op_name

__all__ = ["aggregate", "unoptimizable_line"]


def aggregate(signals: Sequence[BlameSignal], graphs: Mapping[str, MemoryGraph] | None = None, *,
              max_examples: int = 5, spread_over: Sequence[str] | None = None,
              op_settings: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """``{"total", "components": {name: {...}}, "unoptimizable": {...}, "unattributed": {...}}``.

    The one shape of grouped blame: ``blame.json``'s aggregate, each round's ``blame.json`` summary
    and the report all read it. ``graphs`` maps a case id to the graph its blame refers to (for the
    op subgraphs); cases without one get no subgraph. ``spread_over`` (the unattributed ablation)
    counts every signal for every one of those components, whatever op it names. ``op_settings``
    (the system's :attr:`~memtrace_opt.systems.base.MemorySystem.op_settings`) adds, for each
    unoptimizable op, the settings that govern it.

    >>> s = BlameSignal("c/q1", "q", "g", "p", "RetrievalError", "answer:q1/search#0", None, "missed")
    >>> aggregate([s])["unoptimizable"]["count"]
    1
    """
    components: dict[str, dict[str, Any]] = {}
    unopt = _group()
    unattributed: dict[str, Any] = {"count": 0, "case_ids": [], "reasons": []}
    for s in signals:
        if s.error_type is None:
            unattributed["count"] += 1
            unattributed["case_ids"].append(s.case_id)
            _example(unattributed["reasons"], s.reason, max_examples)
            continue
        names = list(spread_over) if spread_over is not None else [s.prompt_component] if s.prompt_component else []
        for group in [components.setdefault(n, _group()) for n in names] or [unopt]:
            group["count"] += 1
            group["error_types"][s.error_type] += 1
            group["case_ids"].append(s.case_id)
            _example(group["reasons"], s.reason, max_examples)
            graph = (graphs or {}).get(s.case_id)
            if graph is not None and s.op_id in graph.ops and len(group["op_subgraphs"]) < max_examples:
                group["op_subgraphs"].append(compact_op(graph, graph.ops[s.op_id]))
        for name in s.chained_components if spread_over is None else ():
            group = components.setdefault(name, _group())
            group["chained"] += 1
            group["chained_case_ids"].append(s.case_id)
    unopt["ops"] = dict(Counter(op_name(s.op_id) for s in signals
                                if s.error_type is not None and not s.prompt_component and spread_over is None))
    unopt["settings"] = {op: list((op_settings or {})[op]) for op in unopt["ops"] if op in (op_settings or {})}
    for group in [*components.values(), unopt]:
        group["error_types"] = dict(group["error_types"])
    ordered = dict(sorted(components.items(), key=lambda kv: (-kv[1]["count"], -kv[1]["chained"], kv[0])))
    return {"total": len(signals), "components": ordered, "unoptimizable": unopt, "unattributed": unattributed}


def _group() -> dict[str, Any]:
    return {"count": 0, "error_types": Counter(), "reasons": [], "case_ids": [], "op_subgraphs": [],
            "chained": 0, "chained_case_ids": []}


def _example(reasons: list[str], reason: str, limit: int) -> None:
    if len(reasons) < limit and reason not in reasons:
        reasons.append(reason)


def unoptimizable_line(agg: Mapping[str, Any]) -> str | None:
    """Blame no prompt can fix, said with what can: ``"49 failures on steps no prompt controls:
    long_context.trim 49 (setting context_tokens) ..."``; None when there is none.

    Why say it: an optimizer reports "changed nothing" or a small gain, and the reader cannot tell
    a weak optimizer from failures beyond its reach; the governing settings are the next lever.
    """
    group = agg.get("unoptimizable") or {}
    ops: Mapping[str, int] = group.get("ops") or {}
    if not group.get("count") or not ops:
        return None
    settings: Mapping[str, Sequence[str]] = group.get("settings") or {}
    parts = [f"{op} {n}" + (f" (setting {', '.join(settings[op])})" if settings.get(op) else "")
             for op, n in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))]
    tune = " — tune those settings (config `tuning.space`)" if settings else ""
    return f"{group['count']} failure(s) on steps no prompt controls: {', '.join(parts)}{tune}"
