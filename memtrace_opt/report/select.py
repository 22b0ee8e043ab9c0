"""Which nodes of a question's slice to draw: those that explain the failure, within a node budget.

A slice of a long conversation can hold thousands of nodes, and a drawing of all of them explains
nothing. In priority order: the question's own answer session (question, retrieval, context, answer,
judge); the blamed op with what it wrote and some of what it read; the evidence messages; the path
from the evidence (and from the blamed op) to the answer, taken from both of its ends inward, since the
middle of a long version chain repeats itself (bookkeeping chains such as a message buffer or an index
last); finally the unread inputs of drawn ops. Everything
else of the slice is left for "+N more" nodes.
"""

from __future__ import annotations

from collections import Counter, deque
from typing import Callable, Iterable

from memtrace_opt.graph.model import MEMORY_UNIT, MemoryGraph

__all__ = ["MAX_STATE_NODES", "extras", "path_nodes", "pick", "resolve_evidence", "units_of_interest"]

#: At most this many bookkeeping nodes (buffer, index versions) are drawn per slice.
MAX_STATE_NODES = 4


def resolve_evidence(g: MemoryGraph, evidence: Iterable[str]) -> list[str]:
    """Variable ids for evidence given as variable ids, variable names or turn ids (``D1:3``)."""
    out: list[str] = []
    for item in map(str, evidence):
        if item in g.variables:
            out.append(item)
        elif item in g.latest:
            out.append(g.latest_id(item))
        elif f"message:{item}" in g.latest:
            out.append(g.latest_id(f"message:{item}"))
    return list(dict.fromkeys(out))


def extras(g: MemoryGraph, blamed: str | None, evidence: list[str]) -> set[str]:
    """Nodes outside the slice that explain a failure: the blamed op's neighbourhood, the evidence and its readers.

    A deleted or never-extracted fact does not reach the answer, so its ops are not in the slice.
    """
    extra: set[str] = set()
    if blamed is not None:
        op = g.ops[blamed]
        extra |= {blamed, *op.input_ids(), *op.output_ids()}
    for vid in evidence:
        extra.add(vid)
        for reader in g.consumers(vid)[:2]:
            extra |= {reader, *g.ops[reader].output_ids()}
    return extra


def _time(g: MemoryGraph, nid: str) -> int:
    return g.ops[nid].time if nid in g.ops else g.variables[nid].time


def _distances(starts: Iterable[str], step: Callable[[str], Iterable[str]], keep: set[str]) -> dict[str, int]:
    """Breadth-first hop counts from ``starts`` through ``step``, staying inside ``keep``."""
    dist = {s: 0 for s in starts if s in keep}
    queue = deque(dist)
    while queue:
        nid = queue.popleft()
        for nxt in step(nid):
            if nxt in keep and nxt not in dist:
                dist[nxt] = dist[nid] + 1
                queue.append(nxt)
    return dist


def path_nodes(g: MemoryGraph, keep: set[str], sources: list[str], qa_id: str) -> list[str]:
    """Nodes of ``keep`` on a path from ``sources`` to the answer, ordered from both ends of the path inward.

    The backward search runs only inside what the forward search reached, so the cost follows the
    length of the paths, not the size of the slice.
    """
    answer = f"answer:{qa_id}"
    if answer not in g.latest or not sources:
        return []
    succ, pred = g.nx.succ, g.nx.pred
    forward = _distances(sources, lambda n: succ[n], keep)
    backward = _distances([g.latest_id(answer)], lambda n: pred[n], set(forward))
    on_path = forward.keys() & backward.keys()
    return sorted(on_path, key=lambda n: (_is_state(g, n), min(forward[n], backward[n]), _time(g, n), n))


def _is_state(g: MemoryGraph, nid: str) -> bool:
    """Bookkeeping a system threads through every step (a message buffer, an index), not memory content.

    Such chains lie on the path to every answer and would crowd out the facts, so they are drawn last:
    a variable with several versions that is not a memory unit, or an op that only writes such variables.
    """
    if nid in g.variables:
        var = g.variables[nid]
        return var.category != MEMORY_UNIT and g.latest.get(var.name, 1) > 2
    outs = g.ops[nid].output_ids()
    return bool(outs) and all(_is_state(g, v) for v in outs)


def pick(g: MemoryGraph, universe: set[str], col: Callable[[str], int], session_ops: list[str], qa_id: str,
         blamed: str | None, evidence: list[str], max_nodes: int, per_col: int) -> list[str]:
    """The nodes to draw, most explanatory first, within the node and per-column budgets (all when they fit).

    ``col`` gives a node's column, ``session_ops`` the ops of the question's answer session.
    """
    if len(universe) <= max_nodes:
        return sorted(universe, key=lambda n: (_time(g, n), n))
    chosen: dict[str, None] = {}
    counts: Counter[int] = Counter()

    def add(nid: str, force: bool = False) -> None:
        if nid in chosen or nid not in universe:
            return
        if not force and (len(chosen) >= max_nodes or counts[col(nid)] >= per_col):
            return
        chosen[nid] = None
        counts[col(nid)] += 1

    session = f"answer:{qa_id}"
    for op_id in (n for n in session_ops if n in universe):
        op = g.ops[op_id]
        add(op_id, force=True)
        for vid in op.output_ids() + [v for v in op.input_ids() if g.variables[v].session == session]:
            add(vid, force=True)
    sources = list(evidence)
    if blamed is not None:
        op = g.ops[blamed]
        add(blamed, force=True)
        for vid in op.output_ids():
            add(vid, force=True)
        for vid in sorted(op.input_ids(), key=lambda v: (v not in evidence, -g.variables[v].time))[:4]:
            add(vid)
        sources += op.output_ids()
    for vid in evidence[:6]:
        add(vid)
    states = 0
    for nid in path_nodes(g, universe, sources, qa_id):
        if _is_state(g, nid):
            if states >= MAX_STATE_NODES:
                continue
            states += 1
        add(nid)
    for op_id in [n for n in chosen if n in g.ops]:
        unread = [v for v in g.ops[op_id].input_ids() if not _is_state(g, v)]
        for vid in sorted(unread, key=lambda v: -g.variables[v].time)[:2]:
            add(vid)
    return list(chosen)


def units_of_interest(g: MemoryGraph, blamed: str | None, chosen: list[str], path: set[str]) -> list[str]:
    """Memory units whose life explains the failure: the blamed op's units, else those on the evidence path."""
    names: list[str] = []
    if blamed is not None:
        op = g.ops[blamed]
        names = [g.variables[v].name for v in op.input_ids() + op.output_ids()
                 if g.variables[v].category == MEMORY_UNIT]
    if not names:
        names = [g.variables[v].name for v in chosen if v in path and v in g.variables
                 and g.variables[v].category == MEMORY_UNIT]
    return list(dict.fromkeys(names))[:3]
