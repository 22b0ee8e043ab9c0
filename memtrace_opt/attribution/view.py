"""Read-only views of a memory graph that attribution needs (pure functions, graph first).

Thin adapters over :mod:`memtrace_opt.graph.queries` in the shapes attribution uses (op lists,
a unit's version chain, ops relevant to one question) plus compact op records and renderings for
LLM prompts and for the optimizer.
"""

from __future__ import annotations

from typing import Any

from memtrace_opt.attribution.text import short
from memtrace_opt.graph import queries
from memtrace_opt.graph.model import MEMORY_UNIT, MemoryGraph, Operation, Variable

__all__ = [
    "answer_ops", "compact_op", "is_relevant_op", "live_units", "question_slice", "render_op", "unit_chain",
    "unit_names",
]


def is_relevant_op(graph: MemoryGraph, op: Operation, qa_id: str) -> bool:
    """Ops of ingestion sessions and of this question's own answer session (not other questions')."""
    rec = graph.sessions.get(op.session or "")
    in_answer = (rec is not None and rec.kind == "answer") or (op.session or "").startswith("answer:")
    return not in_answer or op.session == f"answer:{qa_id}"


def answer_ops(graph: MemoryGraph, qa_id: str) -> list[Operation]:
    """The ops of ``answer:<qa_id>`` in execution order (retrieval steps, the answer, the judge)."""
    session = f"answer:{qa_id}"
    return [op for op in graph.ops.values() if op.session == session]


def question_slice(graph: MemoryGraph, qa_id: str) -> list[Operation]:
    """Every op the answer (and judgement) of ``qa_id`` depends on, in execution order; [] if unanswered."""
    if f"answer:{qa_id}" not in graph.latest:
        return []
    return list(queries.question_slice(graph, qa_id).ops.values())


def unit_names(graph: MemoryGraph) -> list[str]:
    """Names of memory-unit variables, in order of first appearance."""
    return list(dict.fromkeys(v.name for v in graph.variables.values() if v.category == MEMORY_UNIT))


def unit_chain(graph: MemoryGraph, name: str) -> list[Variable]:
    """All versions of variable ``name``, oldest first."""
    return [graph.variables[f"{name}@{v}"] for v in range(1, graph.latest.get(name, 0) + 1)
            if f"{name}@{v}" in graph.variables]


def live_units(graph: MemoryGraph, before: int) -> list[Variable]:
    """The version of each memory unit current just before time ``before``, tombstones left out."""
    return queries.live_units(graph, before - 1)


def compact_op(graph: MemoryGraph, op: Operation, *, limit: int = 160) -> dict[str, Any]:
    """An op as a small dict: name, category, prompt, inputs and outputs with value previews."""
    def preview(vid: str) -> str:
        var = graph.variables.get(vid)
        return "<deleted>" if var is not None and var.deleted else short(var.value if var else None, limit)

    return {
        "op_id": op.id, "name": op.name, "category": op.category,
        "prompt": op.prompt.component if op.prompt else None, "status": op.status,
        "inputs": {vid: preview(vid) for vid in op.input_ids()},
        "outputs": {vid: preview(vid) for vid in op.output_ids()},
    }


def render_op(graph: MemoryGraph, op: Operation, *, limit: int = 160, edges: bool = True) -> str:
    """One op as text lines for an LLM prompt; ``edges=False`` gives the flat, edge-free log line."""
    prompt = f" prompt={op.prompt.component}" if op.prompt else ""
    head = f"[{op.time}] {op.id} ({op.category}{prompt}{', FAILED' if op.status != 'ok' else ''})"
    c = compact_op(graph, op, limit=limit)
    if not edges:
        outs = "; ".join(c["outputs"].values())
        return f"{head}: {outs}"
    ins = "\n".join(f"    in  {k}: {v}" for k, v in c["inputs"].items())
    outs = "\n".join(f"    out {k}: {v}" for k, v in c["outputs"].items())
    return "\n".join(x for x in (head, ins, outs) if x)
