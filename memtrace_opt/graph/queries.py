"""Read-only questions asked of a memory graph: where a value came from, what it reached, how a unit lived.

These are the views attribution needs: the lineage of a wrong answer back to its messages, the
answers a faulty memory unit reached, the op subgraph an agent opens around one variable, one
question's slice of the run, and the flat time-ordered op log the edge-free baseline reads. All are
pure functions taking the graph first; none modifies it. Walks are iterative over the networkx
adjacency, so a lineage query on a 100k-op graph stays in the tens of milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Literal, Mapping

from memtrace_opt.errors import GraphError
from memtrace_opt.graph.model import ANSWER, JUDGEMENT, MEMORY_UNIT, MESSAGE, MemoryGraph, Operation, Variable

__all__ = [
    "OpLogEntry", "OpView", "UnitEvent", "ancestors", "descendants", "flat_op_log", "forward_impact", "lineage",
    "lineage_messages", "live_units", "op_subgraph", "question_slice", "short_value", "subgraph", "unit_lifetime",
]

Kind = Literal["variable", "operation"] | None


def _require(g: MemoryGraph, node_id: str) -> None:
    if node_id not in g.variables and node_id not in g.ops:
        raise GraphError(f"{node_id!r} is neither a variable nor an operation of this graph")


def _walk(adjacency: Mapping[str, Mapping[str, Any]], start: str) -> set[str]:
    """Every node reachable from ``start`` through ``adjacency`` (start excluded): an iterative DFS."""
    seen: set[str] = set()
    stack = [start]
    pop, push, add = stack.pop, stack.extend, seen.add
    while stack:
        for nxt in adjacency[pop()]:
            if nxt not in seen:
                add(nxt)
                push((nxt,))
    seen.discard(start)
    return seen


def _filter(g: MemoryGraph, ids: set[str], kind: Kind) -> set[str]:
    if kind is None:
        return ids
    pool = g.variables if kind == "variable" else g.ops
    return {i for i in ids if i in pool}


def ancestors(g: MemoryGraph, node_id: str, *, kind: Kind = None) -> set[str]:
    """Ids of every variable and op ``node_id`` depends on (itself excluded); ``kind`` keeps one side only."""
    _require(g, node_id)
    return _filter(g, _walk(g.nx.pred, node_id), kind)


def descendants(g: MemoryGraph, node_id: str, *, kind: Kind = None) -> set[str]:
    """Ids of every variable and op that depends on ``node_id`` (itself excluded)."""
    _require(g, node_id)
    return _filter(g, _walk(g.nx.succ, node_id), kind)


def lineage(g: MemoryGraph, var_id: str, *, kind: Kind = None) -> set[str]:
    """The ancestors of variable ``var_id``: what a value was made from, all the way back to its messages.

    >>> from memtrace_opt.graph.model import Operation, Variable
    >>> g = MemoryGraph()
    >>> g.add_variable(Variable("m", 1, "message", "hi", 1))
    >>> g.add_variable(Variable("f", 1, "facts", "HI", 3))
    >>> g.add_operation(Operation("s/up#0", "up", "extraction", {"text": ("m@1",)}, {"fact": "f@1"}, 2))
    >>> sorted(lineage(g, "f@1"))
    ['m@1', 's/up#0']
    """
    if var_id not in g.variables:
        raise GraphError(f"lineage: {var_id!r} is not a variable of this graph")
    return ancestors(g, var_id, kind=kind)


def _by_time(g: MemoryGraph, var_ids: Iterable[str]) -> list[str]:
    vs = g.variables
    return sorted(var_ids, key=lambda v: (vs[v].time, v))


def lineage_messages(g: MemoryGraph, var_id: str) -> list[str]:
    """The message variables ``var_id`` came from, oldest first: the turns that fed a memory or answer."""
    vs = g.variables
    return _by_time(g, (v for v in lineage(g, var_id, kind="variable") if vs[v].category == MESSAGE))


def forward_impact(g: MemoryGraph, var_id: str, *, categories: tuple[str, ...] = (ANSWER, JUDGEMENT)) -> list[str]:
    """The answers and judgements (or other ``categories``) downstream of ``var_id``, oldest first.

    This is what a faulty memory unit could have spoiled, and what a fix to it should be re-checked on.
    """
    if var_id not in g.variables:
        raise GraphError(f"forward_impact: {var_id!r} is not a variable of this graph")
    vs = g.variables
    return _by_time(g, (v for v in descendants(g, var_id, kind="variable") if vs[v].category in categories))


@dataclass(frozen=True)
class OpView:
    """One op around a variable, as an attribution agent opens it: what it read, made, and finally reached.

    ``relation`` is ``"producer"`` (the op made the variable) or ``"consumer"`` (it read it);
    ``leaves`` are the sink variables downstream of the op's outputs (answers, judgements, final
    memory states), oldest first and capped, so the agent can jump to where the effect ended.
    """

    op: Operation
    relation: str
    inputs: dict[str, tuple[Variable, ...]]
    outputs: dict[str, Variable]
    leaves: tuple[Variable, ...]
    leaves_truncated: bool = False


def _op_view(g: MemoryGraph, op_id: str, relation: str, max_leaves: int) -> OpView:
    op = g.ops[op_id]
    vs, succ = g.variables, g.nx.succ
    reached: set[str] = set()
    for out in op.output_ids():
        reached |= {out} | _walk(succ, out)
    sinks = _by_time(g, (v for v in reached if v in vs and not succ[v]))
    return OpView(
        op=op, relation=relation,
        inputs={role: tuple(vs[v] for v in ids) for role, ids in op.inputs.items()},
        outputs={role: vs[v] for role, v in op.outputs.items()},
        leaves=tuple(vs[v] for v in sinks[:max_leaves]), leaves_truncated=len(sinks) > max_leaves,
    )


def op_subgraph(g: MemoryGraph, var_id: str, *, max_leaves: int = 20) -> list[OpView]:
    """The op that produced ``var_id`` and the ops that read it, in execution order, each as an :class:`OpView`.

    This is the unit an attribution agent inspects when it expands a variable on its frontier.
    """
    if var_id not in g.variables:
        raise GraphError(f"op_subgraph: {var_id!r} is not a variable of this graph")
    views = []
    if var_id in g.producer:
        views.append(_op_view(g, g.producer[var_id], "producer", max_leaves))
    views += [_op_view(g, op_id, "consumer", max_leaves) for op_id in g.consumers(var_id)]
    return views


@dataclass(frozen=True)
class UnitEvent:
    """One version in a unit's life: ``event`` is created, updated or deleted (or ``input`` if no op made it)."""

    var: Variable
    event: str
    op: Operation | None
    readers: tuple[str, ...]

    @property
    def var_id(self) -> str:
        return self.var.id


def unit_lifetime(g: MemoryGraph, name: str) -> list[UnitEvent]:
    """Every version of variable ``name`` in order, with the op that made it and the ops that read it.

    Shows a memory unit being created, overwritten by an update and ended by a deletion: the history an
    UpdateError or DeletionError is found in.
    """
    if name not in g.latest:
        raise GraphError(f"unit_lifetime: no variable named {name!r} in this graph")
    events = []
    for version in range(1, g.latest[name] + 1):
        vid = f"{name}@{version}"
        var = g.variables.get(vid)
        if var is None:
            continue
        op = g.ops.get(g.producer.get(vid, ""))
        if var.deleted:
            event = "deleted"
        elif op is None:
            event = "input"
        else:
            event = "created" if version == 1 else "updated"
        events.append(UnitEvent(var, event, op, tuple(g.consumers(vid))))
    return events


def question_slice(g: MemoryGraph, qa_id: str) -> MemoryGraph:
    """A new graph holding ``answer:<qa_id>`` (and ``judgement:<qa_id>`` if judged) and everything they depend on.

    Records keep their execution order; meta gains ``slice_of``. This is what one failed question's
    attribution needs to look at, and what ``trace show`` prints.
    """
    roots = [g.latest_id(n) for n in (f"answer:{qa_id}", f"judgement:{qa_id}") if n in g.latest]
    if not roots:
        raise GraphError(f"question {qa_id!r} has no answer:{qa_id} variable in this graph")
    keep: set[str] = set(roots)
    for root in roots:
        keep |= _walk(g.nx.pred, root)
    return subgraph(g, keep, meta={**g.meta, "slice_of": qa_id})


def subgraph(g: MemoryGraph, keep: set[str], *, meta: Mapping[str, Any] | None = None) -> MemoryGraph:
    """The records of ``g`` whose ids are in ``keep`` (an ancestor-closed set), as a new graph in the same order.

    A kept op brings all its outputs along (an update that wrote two units stays one whole op).
    """
    keep = set(keep) | {vid for op_id in keep if op_id in g.ops for vid in g.ops[op_id].output_ids()}
    out = MemoryGraph(meta if meta is not None else g.meta)
    sessions = set()
    for vid, var in g.variables.items():
        if vid in keep:
            out.add_variable(var)
            sessions.add(var.session)
    for op_id, op in g.ops.items():
        if op_id in keep:
            out.add_operation(op)
            sessions.add(op.session)
    for sid, rec in g.sessions.items():
        if sid in sessions:
            out.add_session(rec)
    return out


def short_value(value: Any, width: int = 80) -> str:
    """A one-line preview of a value for logs and trees; a message record shows as ``speaker: text``.

    >>> short_value({"speaker": "Ann", "text": "a" * 100}, width=12)
    'Ann: aaaaaa…'
    >>> short_value(["x", None])
    "['x', None]"
    """
    if isinstance(value, Mapping) and isinstance(value.get("text"), str):
        text = f"{value['speaker']}: {value['text']}" if value.get("speaker") else value["text"]
    else:
        text = repr(value)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass(frozen=True)
class OpLogEntry:
    """One line of the flat op log: an op with the names and short values of what it read and wrote."""

    time: int
    op_id: str
    name: str
    category: str
    session: str | None
    prompt: str | None
    status: str
    inputs: tuple[tuple[str, str, str], ...]
    outputs: tuple[tuple[str, str, str], ...]

    def line(self) -> str:
        """The entry as one grep-able text line: ``[time] op (category) in: ... -> out: ...``."""
        def fmt(items: tuple[tuple[str, str, str], ...]) -> str:
            return ", ".join(f"{role}={vid} {val}" for role, vid, val in items) or "-"

        flag = " FAILED" if self.status != "ok" else ""
        prompt = f" prompt={self.prompt}" if self.prompt else ""
        return f"[{self.time}] {self.op_id} ({self.category}{prompt}){flag} in: {fmt(self.inputs)} -> out: {fmt(self.outputs)}"


def flat_op_log(g: MemoryGraph, *, width: int = 60) -> list[OpLogEntry]:
    """The run as a time-ordered op log with no edges: the view the flat-log attribution baseline gets."""
    vs = g.variables
    entries = []
    for op in sorted(g.ops.values(), key=lambda o: o.time):
        ins = tuple((role, vid, short_value(vs[vid].value, width)) for role, ids in op.inputs.items() for vid in ids)
        outs = tuple((role, vid, short_value(vs[vid].value, width)) for role, vid in op.outputs.items())
        entries.append(OpLogEntry(op.time, op.id, op.name, op.category, op.session,
                                  op.prompt.component if op.prompt else None, op.status, ins, outs))
    return entries


def live_units(g: MemoryGraph, at_time: int, *, category: str = MEMORY_UNIT) -> list[Variable]:
    """The memory units alive at logical time ``at_time``: each name's newest version by then, unless deleted.

    This is the store as a retrieval at that time could see it, oldest unit first.
    """
    newest: dict[str, Variable] = {}
    for var in g.variables.values():
        if var.category != category or var.time > at_time:
            continue
        cur = newest.get(var.name)
        if cur is None or var.version > cur.version:
            newest[var.name] = var
    first = {name: g.variables.get(f"{name}@1", var).time for name, var in newest.items()}
    return sorted((v for v in newest.values() if not v.deleted), key=lambda v: (first[v.name], v.name))
