"""Structural checks of a memory graph: the invariants replay, attribution and storage rely on.

A graph is valid when it is a directed acyclic *bipartite* graph (edges only join a variable and an
operation), every edge and record refers to an existing node, the edges match the ops' recorded
inputs and outputs, every variable has at most one producer, and each name's versions form an
unbroken chain (``name@v+1`` exists only after ``name@v`` and is made by an op that read ``name@v``).
Graphs built by the tracer satisfy these by construction; files loaded from disk or imported from
other tools are where they break, so loaders and tests call :func:`validate`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import networkx as nx

from memtrace_opt.errors import GraphError
from memtrace_opt.graph.model import MemoryGraph

__all__ = ["Problem", "problems", "validate"]

_SHOWN = 5


@dataclass(frozen=True)
class Problem:
    """One broken invariant: which ``check`` failed and the offending ``ids``."""

    check: str
    ids: tuple[str, ...]
    detail: str

    def __str__(self) -> str:
        return f"{self.check}: {self.detail}"


def _show(ids: list[str]) -> str:
    more = f" (+{len(ids) - _SHOWN} more)" if len(ids) > _SHOWN else ""
    return ", ".join(repr(i) for i in ids[:_SHOWN]) + more


def _dangling(g: MemoryGraph) -> list[Problem]:
    out = []
    unknown_nodes = [n for n in g.nx if n not in g.variables and n not in g.ops]
    if unknown_nodes:
        out.append(Problem("dangling edge", tuple(unknown_nodes),
                           f"edges touch ids that are no variable or op record: {_show(unknown_nodes)}"))
    missing = [f"{op.id} -> {vid}" for op in g.ops.values() for vid in op.input_ids() + op.output_ids()
               if vid not in g.variables]
    missing += [i for i in list(g.variables) + list(g.ops) if i not in g.nx]
    if missing:
        out.append(Problem("dangling edge", tuple(missing), f"records refer to missing nodes: {_show(missing)}"))
    return out


def _bipartite(g: MemoryGraph) -> list[Problem]:
    bad = [f"{a} -> {b}" for a, b in g.nx.edges
           if (a in g.variables and b in g.variables) or (a in g.ops and b in g.ops)]
    if not bad:
        return []
    return [Problem("not bipartite", tuple(bad), f"variable->variable or op->op edges: {_show(bad)}")]


def _edges_match_records(g: MemoryGraph) -> list[Problem]:
    expected = {(v, op.id) for op in g.ops.values() for v in op.input_ids()}
    expected |= {(op.id, v) for op in g.ops.values() for v in op.output_ids()}
    actual = {(a, b) for a, b in g.nx.edges if (a in g.ops) != (b in g.ops)}
    bad = sorted(f"{a} -> {b}" for a, b in expected ^ actual)
    if not bad:
        return []
    return [Problem("edge/record mismatch", tuple(bad), f"edges differ from the ops' inputs/outputs: {_show(bad)}")]


def _cycles(g: MemoryGraph) -> list[Problem]:
    if nx.is_directed_acyclic_graph(g.nx):
        return []
    cycle = [a for a, _ in nx.find_cycle(g.nx)]
    return [Problem("cycle", tuple(cycle), "cycle through " + " -> ".join(cycle + cycle[:1]))]


def _producers(g: MemoryGraph) -> list[Problem]:
    makers: dict[str, list[str]] = defaultdict(list)
    for op in g.ops.values():
        for vid in op.output_ids():
            makers[vid].append(op.id)
    for vid in g.variables:
        if vid in g.nx:
            for op_id in g.nx.predecessors(vid):
                if op_id in g.ops and op_id not in makers[vid]:
                    makers[vid].append(op_id)
    twice = [f"{vid} by {' and '.join(ops)}" for vid, ops in makers.items() if len(ops) > 1]
    if not twice:
        return []
    return [Problem("produced twice", tuple(twice), f"variables with more than one producer: {_show(twice)}")]


def _versions(g: MemoryGraph) -> list[Problem]:
    present: dict[str, set[int]] = defaultdict(set)
    for var in g.variables.values():
        present[var.name].add(var.version)
    gaps, unlinked = [], []
    for name, versions in present.items():
        for v in sorted(versions):
            if v > 1 and v - 1 not in versions:
                gaps.append(f"{name}@{v} without {name}@{v - 1}")
            elif v > 1:
                prev, vid = f"{name}@{v - 1}", f"{name}@{v}"
                op = g.ops.get(g.producer.get(vid, ""))
                if op is None or prev not in op.input_ids():
                    unlinked.append(f"{vid} not made by an op reading {prev}")
    out = []
    if gaps:
        out.append(Problem("version gap", tuple(gaps), f"missing versions: {_show(gaps)}"))
    if unlinked:
        out.append(Problem("version gap", tuple(unlinked), f"versions not linked to their predecessor: {_show(unlinked)}"))
    return out


def problems(g: MemoryGraph, *, versions: bool = True) -> list[Problem]:
    """Every broken invariant of ``g`` (empty when valid). ``versions=False`` skips the version-chain check,
    for imported graphs whose recorder did not link versions."""
    found = _dangling(g) + _bipartite(g) + _edges_match_records(g) + _producers(g)
    if not any(p.check == "dangling edge" for p in found):
        found += _cycles(g)
    if versions:
        found += _versions(g)
    return found


def validate(g: MemoryGraph, *, versions: bool = True, where: str = "graph") -> None:
    """Raise :class:`GraphError` naming the offending ids if ``g`` breaks an invariant; ``where`` names the graph.

    >>> from memtrace_opt.graph.model import Variable
    >>> g = MemoryGraph()
    >>> g.add_variable(Variable("mem:1", 2, "memory-unit", "x", 1))
    >>> validate(g)
    Traceback (most recent call last):
    ...
    memtrace_opt.errors.GraphError: graph is invalid: version gap: missing versions: 'mem:1@2 without mem:1@1'
    """
    found = problems(g, versions=versions)
    if found:
        raise GraphError(f"{where} is invalid: " + "; ".join(str(p) for p in found))
