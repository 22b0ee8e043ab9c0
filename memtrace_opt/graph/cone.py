"""The upstream cone of some answers: the recorded ops whose outputs reached them, item by item.

A plain lineage walk makes every ingestion op an ancestor of every answer in a system whose
retrieval reads the whole store (EverMemOS's hybrid search reads every MemCell and the index), so
a minibatch's cone would be the whole conversation and scoped replay would save nothing. But a
search only *ranks* what it reads; what carries content onward is the items it kept. An op that
declares ``selects`` (:class:`~memtrace_opt.graph.ops.OpSpec`: input role → the record field naming
an item) is therefore walked item-wise: from its output, the cone follows only the input variables
whose items the output kept — and, through a chain of selections (hybrid search → rerank), only the
items kept at the end. Every other op, and any op no system has registered (a graph loaded without
its system), is followed through all of its inputs, as a lineage walk would. An op that declares
``reads_first`` (role → item field and the param that says how many leading records it reads) is
followed into that role only through the records it read.
"""

from __future__ import annotations

from typing import Any, Collection, Iterable, Iterator, Mapping

from memtrace_opt.errors import GraphError
from memtrace_opt.graph.model import MemoryGraph, Operation
from memtrace_opt.graph.ops import REGISTRY

__all__ = ["item_ids", "upstream_cone"]

#: The items of a variable a walk still needs: (the record field naming them, their ids), or None for all.
Wanted = tuple[str, frozenset[str]] | None


def item_ids(value: Any, field: str) -> set[str]:
    """The ids (``record[field]``) of the records in ``value``: one record, or a list of them."""
    records = value if isinstance(value, (list, tuple)) else [value]
    return {str(r[field]) for r in records if isinstance(r, Mapping) and r.get(field) is not None}


def upstream_cone(graph: MemoryGraph, qa_ids: Collection[str]) -> set[str]:
    """The ops the recorded answers of ``qa_ids`` depend on, the answer ops included (module docstring)."""
    wanted: dict[str, Wanted] = {}
    stack: list[tuple[str, Wanted]] = []
    for qa_id in qa_ids:
        name = f"answer:{qa_id}"
        if name not in graph.latest:
            raise GraphError(f"replay scope: question {qa_id!r} has no recorded answer in this graph")
        stack.append((graph.latest_id(name), None))
    ops: set[str] = set()
    while stack:
        var_id, need = stack.pop()
        if var_id in wanted:
            had = wanted[var_id]
            if had is None or (need is not None and need[0] == had[0] and need[1] <= had[1]):
                continue  # nothing new to follow
            need = (had[0], had[1] | need[1]) if need is not None and need[0] == had[0] else None
        wanted[var_id] = need
        op_id = graph.producer.get(var_id)
        if op_id is None:
            continue
        ops.add(op_id)
        stack.extend(_followed_inputs(graph, graph.ops[op_id], var_id, need))
    return ops


def _followed_inputs(graph: MemoryGraph, op: Operation, out_id: str, need: Wanted) -> Iterator[tuple[str, Wanted]]:
    """The inputs of ``op`` the walk goes on to from its output ``out_id``, with the items each must supply."""
    spec = REGISTRY.get(op.name)
    selects = spec.selects if spec is not None else {}
    reads_first = spec.reads_first if spec is not None else {}
    for role, ids in op.inputs.items():
        if role in reads_first:
            yield from _read_prefix(graph, op, ids, *reads_first[role])
            continue
        field = selects.get(role)
        if field is None:
            yield from ((vid, None) for vid in ids)
            continue
        kept = item_ids(graph.value(out_id), field)
        if need is not None and need[0] == field:
            kept &= need[1]
        for vid in ids:
            supplied = item_ids(graph.value(vid), field) & kept
            if supplied:
                yield vid, (field, frozenset(supplied))


def _read_prefix(graph: MemoryGraph, op: Operation, ids: Iterable[str], field: str,
                 param: str) -> Iterator[tuple[str, Wanted]]:
    """The inputs of a ``reads_first`` role, each wanted only for the leading records the op read
    (all of them when the recorded params do not say how many)."""
    count = op.params.get(param)
    for vid in ids:
        value = graph.value(vid)
        if not isinstance(count, int) or not isinstance(value, (list, tuple)):
            yield vid, None
            continue
        read = item_ids(list(value)[:count], field)
        if read:
            yield vid, (field, frozenset(read))
