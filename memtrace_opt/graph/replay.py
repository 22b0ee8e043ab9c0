"""Replay: re-execute a recorded run with changed prompts, op inputs or op outputs.

A run is re-executed by its own driver (the system's ingest/answer loop, passed in as ``rerun``)
under a tracer that holds a :class:`Memo` of the recorded graph. Every memoizable op whose prompt
text, params and input values are unchanged reuses its recorded output (no LM call); everything
downstream of a change re-executes, and control flow may differ (a changed extraction can add a
memory unit). Without overrides the replayed graph equals the recorded one and costs zero LM calls.

A *scoped* replay (``scope``: the questions being scored) re-executes only the ops in the upstream
cone of those questions' recorded answers (:mod:`memtrace_opt.graph.cone`: through a search, only the
items it kept): an op outside it keeps its recorded output even when its prompt changed, because in
the recorded run nothing it made reached those answers. That is what
scoring an ingestion-prompt candidate on a 3-question minibatch should cost. It is an
approximation — a changed op outside the cone could, once changed, have reached the cone — so a
scoped graph is marked (``meta["scoped_to"]``) and is never a replay base or a validation score.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Mapping

from memtrace_opt.errors import GraphError
from memtrace_opt.graph.model import ANSWER, MemoryGraph
from memtrace_opt.graph.cone import upstream_cone
from memtrace_opt.graph.tracer import Memo, Overrides, TraceStats, Tracer
from memtrace_opt.lm.base import LMClient

Rerun = Callable[[Tracer], None]


@dataclass
class ReplayResult:
    """The new graph, the answers that changed (``{answer var name: (old, new)}``) and what it cost."""

    graph: MemoryGraph
    changed_answers: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    stats: TraceStats = field(default_factory=TraceStats)

    @property
    def executed_ops(self) -> list[str]:
        return self.stats.executed


def replay(
    graph: MemoryGraph,
    rerun: Rerun,
    *,
    from_op: str | None = None,
    overrides: Overrides | None = None,
    lm: LMClient | None = None,
    lms: Mapping[str, LMClient] | None = None,
    resources: Any = None,
    scope: Collection[str] | None = None,
) -> ReplayResult:
    """Re-run ``graph``'s run through ``rerun`` with ``overrides`` applied from ``from_op`` on.

    ``from_op`` names the first op the overrides are meant to affect; it must exist in ``graph``.
    Ops before it are, by construction, reused from the memo. Prompt overrides are merged over the
    prompt set recorded in ``graph.meta["prompts"]``. ``scope`` (question ids) makes the replay
    scoped (module docstring); an id with no recorded answer is an error.
    """
    overrides = overrides or Overrides()
    if from_op is not None and from_op not in graph.ops:
        raise GraphError(f"replay: from_op {from_op!r} is not an operation of this graph")
    for op_id in list(overrides.op_outputs) + list(overrides.op_inputs):
        if op_id not in graph.ops:
            raise GraphError(f"replay: override targets unknown operation {op_id!r}")
    prompts = {**graph.meta.get("prompts", {}), **overrides.prompts}
    meta = {**graph.meta, "prompts": prompts, "replayed_from": graph.meta.get("run_id")}
    pinned: set[str] = set()
    if scope is not None:
        pinned = set(graph.ops) - upstream_cone(graph, scope)
        meta["scoped_to"] = sorted(scope)
    memo = Memo(graph, pinned=pinned)
    tracer = Tracer(MemoryGraph(meta), lm=lm, lms=lms, prompts=prompts, resources=resources, memo=memo,
                    overrides=overrides)
    rerun(tracer)
    return ReplayResult(tracer.graph, changed_answers(graph, tracer.graph), tracer.stats)


def changed_answers(old: MemoryGraph, new: MemoryGraph) -> dict[str, tuple[Any, Any]]:
    """Answer variables (by name) whose final value differs between two graphs of the same run."""
    def answers(g: MemoryGraph) -> dict[str, Any]:
        return {v.name: v.value for v in g.variables.values() if v.category == ANSWER}

    before, after = answers(old), answers(new)
    return {name: (before.get(name), after.get(name)) for name in before.keys() | after.keys()
            if before.get(name) != after.get(name)}
