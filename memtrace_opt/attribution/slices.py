"""What an LLM attributor is shown of one case: the ops around the evidence and behind the answer.

The answer's lineage (:func:`memtrace_opt.graph.queries.question_slice`) misses the ops that *lost*
the fact — a deletion or a dropped extraction leaves no edge to the answer — so the case's ops are
that lineage plus the ops within a few hops downstream of the evidence messages, capped: the
question's answer session first, then the ops nearest the evidence, then the rest of the lineage.
"""

from __future__ import annotations

from memtrace_opt.attribution.failures import FailureCase
from memtrace_opt.attribution.view import answer_ops, is_relevant_op, question_slice, unit_chain
from memtrace_opt.graph.model import MEMORY_UNIT, MemoryGraph, Operation

__all__ = ["case_ops", "near_evidence"]


def near_evidence(graph: MemoryGraph, starts: list[str], qa_id: str, *, depth: int = 3) -> dict[str, int]:
    """Ops reachable within ``depth`` op hops forward of ``starts`` (relevant to ``qa_id``): ``{op id: hops}``."""
    hops: dict[str, int] = {}
    frontier = [v for v in starts if v in graph.variables]
    for hop in range(1, depth + 1):
        nxt: list[str] = []
        for vid in frontier:
            for op_id in graph.consumers(vid):
                if op_id in hops or not is_relevant_op(graph, graph.ops[op_id], qa_id):
                    continue
                hops[op_id] = hop
                nxt.extend(graph.ops[op_id].output_ids())
                _add_lifetime(graph, graph.ops[op_id].output_ids(), hop + 1, hops)
        frontier = nxt
    return hops


def _add_lifetime(graph: MemoryGraph, vids: list[str], hop: int, hops: dict[str, int]) -> None:
    """The ops that later update or delete the memory units among ``vids`` (their whole lifetime), and
    the ops whose decisions they carried out (the producers of their other inputs)."""
    for vid in vids:
        var = graph.variables[vid]
        if var.category != MEMORY_UNIT:
            continue
        for later in unit_chain(graph, var.name)[var.version:]:
            op = graph.ops.get(graph.producer.get(later.id, ""))
            if op is None:
                continue
            previous = set(op.inputs.get("_previous", ()))
            deciders = [graph.producer[v] for v in op.input_ids() if v not in previous and v in graph.producer]
            for op_id in [op.id, *deciders]:
                hops.setdefault(op_id, hop)


def case_ops(graph: MemoryGraph, case: FailureCase, starts: list[str], *, max_ops: int = 60,
             depth: int = 3) -> list[Operation]:
    """The case's ops in execution order, at most ``max_ops``."""
    answer = [op.id for op in answer_ops(graph, case.qa_id)]
    near = near_evidence(graph, starts, case.qa_id, depth=depth)
    lineage = [op.id for op in question_slice(graph, case.qa_id)]
    ordered = answer + sorted(near, key=lambda o: (near[o], graph.ops[o].time)) + lineage[::-1]
    keep = list(dict.fromkeys(ordered))[:max_ops]
    return sorted((graph.ops[o] for o in keep), key=lambda op: op.time)
