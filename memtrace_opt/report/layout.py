"""Lay out one question's slice of the evolution graph: columns by kind, rows by time, capped in size.

Columns run left to right the way memory flows (messages → ingest ops → extracted values → memory
ops → memory units and the question → retrieval → context → answer op → answer → judge → verdict);
inside a column nodes follow execution time, and each is nudged down toward the rows of the nodes
that feed it so edges stay short. Only ``max_nodes`` are drawn (chosen by :mod:`.select`); the rest
of each column becomes one "+N more" node.

Pure geometry and semantics (flags such as ``blamed`` or ``evidence``); :mod:`.graph_svg` draws it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from memtrace_opt.errors import GraphError
from memtrace_opt.graph.model import (
    ANSWER, BOUNDARY, BUFFER, EXTRACTION, GOLD, JUDGE, JUDGEMENT, MEMORY_UNIT, MESSAGE, QA, QUERY, MemoryGraph,
)
from memtrace_opt.report.escape import clip, plain
from memtrace_opt.report.select import extras, path_nodes, pick, resolve_evidence, units_of_interest
from memtrace_opt.report.slices import SliceIndex

__all__ = ["COLUMNS", "Edge", "Node", "SliceLayout", "clip_block", "column_of", "layout_question", "preview"]

COLUMNS = ("messages", "ingest ops", "extracted", "memory ops", "memory & question", "retrieval", "context",
           "answer op", "answer", "judge", "verdict")
MSG, INGEST_OP, EXTRACTED, MEM_OP, UNITS, RETRIEVAL_OP, CONTEXT, QA_OP, ANSWER_COL, JUDGE_OP, VERDICT = range(11)

VAR_H, OP_H = 40.0, 38.0
GAP_X, GAP_Y, TOP, LEFT = 24.0, 14.0, 40.0, 8.0
_SAMPLE = 400  # hidden nodes per column looked at for the "+N more" tooltip
#: Column widths: values need room for a preview, steps only for their name, the last two are short.
WIDTHS = {MSG: 150.0, INGEST_OP: 104.0, EXTRACTED: 150.0, MEM_OP: 104.0, UNITS: 150.0, RETRIEVAL_OP: 104.0,
          CONTEXT: 150.0, QA_OP: 104.0, ANSWER_COL: 150.0, JUDGE_OP: 84.0, VERDICT: 124.0}


@dataclass(frozen=True)
class Node:
    """A drawn node: a variable, an operation, or a ``more`` node standing for collapsed ones."""

    id: str
    kind: str
    column: int
    x: float
    y: float
    w: float
    h: float
    label: str
    detail: str
    tooltip: str
    category: str
    flags: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Edge:
    """A drawn edge; ``flags``: ``blamed`` (touches the blamed op), ``path`` (evidence → answer),
    ``version`` (an update reading the previous version), ``collapsed`` (to or from a ``more`` node)."""

    source: str
    target: str
    role: str
    flags: frozenset[str] = frozenset()


@dataclass(frozen=True)
class SliceLayout:
    """One question's drawing: nodes, edges, column titles with their x centres, and what was left out."""

    qa_id: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    columns: tuple[tuple[str, float], ...]
    width: float
    height: float
    total: int
    shown: int
    blamed_op: str | None = None
    units: tuple[str, ...] = ()
    evidence: tuple[str, ...] = field(default=())


def _in_answer(g: MemoryGraph, session: str | None) -> bool:
    rec = g.sessions.get(session or "")
    return (rec is not None and rec.kind == "answer") or (session or "").startswith("answer:")


def column_of(g: MemoryGraph, node_id: str) -> int:
    """The column of a variable or op, from its category, its session and (for values) its producer."""
    op = g.ops.get(node_id)
    if op is not None:
        if op.category == QA:
            return QA_OP
        if op.category == JUDGE:
            return JUDGE_OP
        if _in_answer(g, op.session):
            return RETRIEVAL_OP
        return INGEST_OP if op.category in (EXTRACTION, BOUNDARY, BUFFER) else MEM_OP
    var = g.variables[node_id]
    fixed = {MESSAGE: MSG, MEMORY_UNIT: UNITS, QUERY: UNITS, JUDGEMENT: VERDICT, ANSWER: ANSWER_COL, GOLD: ANSWER_COL}
    if var.category in fixed:
        return fixed[var.category]
    producer = g.producer.get(node_id)
    if producer is not None:
        return column_of(g, producer) + 1
    return CONTEXT if _in_answer(g, var.session) else EXTRACTED


def layout_question(
    g: MemoryGraph,
    qa_id: str,
    *,
    blamed_op: str | None = None,
    evidence: Sequence[str] = (),
    max_nodes: int = 34,
    max_per_column: int = 8,
    index: SliceIndex | None = None,
) -> SliceLayout:
    """Lay out question ``qa_id``'s slice plus the blamed op's neighbourhood; GraphError if it has no answer.

    ``index`` shares slice and column computations between the questions of one graph (see
    :class:`.slices.SliceIndex`); without it one is built for this question alone.
    """
    index = index if index is not None and index.has(qa_id) else SliceIndex(g, [qa_id], column_of)
    if not index.has(qa_id):
        raise GraphError(f"question {qa_id!r} has no answer:{qa_id} variable in this graph")
    universe = index.nodes(qa_id)
    ev = resolve_evidence(g, evidence)
    blamed = blamed_op if blamed_op in g.ops else None
    universe |= extras(g, blamed, ev)
    chosen = pick(g, universe, index.column, index.session_ops(f"answer:{qa_id}"), qa_id, blamed, ev,
                  max_nodes, max_per_column)
    path = set(path_nodes(g, set(chosen), ev, qa_id))
    nodes, edges, columns, width, height = _place(g, chosen, universe, index.column, blamed, set(ev), path, qa_id)
    units = units_of_interest(g, blamed, chosen, path)
    return SliceLayout(qa_id, tuple(nodes), tuple(edges), tuple(columns), width, height, len(universe),
                       len(chosen), blamed, tuple(units), tuple(ev))


def _place(g: MemoryGraph, chosen: list[str], universe: set[str], col: Callable[[str], int], blamed: str | None,
           evidence: set[str], path: set[str], qa_id: str
           ) -> tuple[list[Node], list[Edge], list[tuple[str, float]], float, float]:
    by_col: dict[int, list[str]] = {}
    for nid in chosen:
        by_col.setdefault(col(nid), []).append(nid)
    shown = set(chosen)
    hidden: Counter[int] = Counter()
    samples: dict[int, list[str]] = {}
    for nid in universe - shown:
        c = col(nid)
        hidden[c] += 1
        if hidden[c] <= _SAMPLE:
            samples.setdefault(c, []).append(nid)
    used = sorted(set(by_col) | set(hidden))
    xs, x = {}, LEFT
    for c in used:
        xs[c] = x
        x += WIDTHS[c] + GAP_X
    width = x - GAP_X + LEFT
    centre: dict[str, float] = {}
    nodes: list[Node] = []
    bottom = TOP
    verdict = _verdict(g, qa_id)
    for c in used:
        cursor = TOP
        for nid in _column_order(g, by_col.get(c, [])):
            w, h = WIDTHS[c], (OP_H if nid in g.ops else VAR_H)
            top = cursor + (14 if nid == blamed or nid in evidence else 0)  # room for the tag above it
            fed = [centre[n] for n in list(g.nx.pred[nid]) + list(g.nx.succ[nid]) if n in centre]
            y = max(top, (sum(fed) / len(fed) - h / 2) if fed else top)
            centre[nid] = y + h / 2
            nodes.append(_node(g, nid, c, xs[c], y, w, h, blamed, evidence, path, verdict))
            cursor = y + h + GAP_Y
        if hidden.get(c):
            nodes.append(_more_node(g, c, hidden[c], samples[c], xs[c], cursor, WIDTHS[c]))
            centre[f"more:{c}"] = cursor + VAR_H / 2
            cursor += VAR_H + GAP_Y
        bottom = max(bottom, cursor)
    edges = _edges(g, shown, universe, col, blamed, path)
    columns = [(COLUMNS[c], xs[c] + WIDTHS[c] / 2) for c in used]
    return nodes, edges, columns, width, bottom + 4


def _column_order(g: MemoryGraph, ids: list[str]) -> list[str]:
    """Execution order, except that the versions of one memory unit stay together (first seen first)."""
    first: dict[str, int] = {}
    for nid in ids:
        if nid in g.variables:
            var = g.variables[nid]
            first[var.name] = min(first.get(var.name, var.time), var.time)

    def key(nid: str) -> tuple[int, int, str]:
        if nid in g.ops:
            return (g.ops[nid].time, 0, nid)
        var = g.variables[nid]
        return (first[var.name], var.version, nid)

    return sorted(ids, key=key)


def _verdict(g: MemoryGraph, qa_id: str) -> int | None:
    """The question's judged score, or None when the graph holds no readable judgement (drawn unjudged)."""
    from memtrace_opt.graph.outcome import MissingOutcomeError, read_judged_outcome

    try:
        return read_judged_outcome(g, qa_id).score
    except MissingOutcomeError:
        return None


def _node(g: MemoryGraph, nid: str, c: int, x: float, y: float, w: float, h: float, blamed: str | None,
          evidence: set[str], path: set[str], verdict: int | None) -> Node:
    flags = {"path"} if nid in path else set()
    if nid in g.ops:
        op = g.ops[nid]
        flags |= {"blamed"} if nid == blamed else set()
        flags |= {"failed"} if op.status != "ok" else set()
        flags |= {"llm"} if op.prompt is not None else set()
        label, detail = _op_lines(op.name.split(".", 1)[-1], op.prompt.component if op.prompt else op.category,
                                  int(w / (7.0 if op.prompt else 7.8)))  # a diamond has less room than an ellipse
        return Node(nid, "operation", c, x, y, w, h, label, detail, _op_tooltip(g, nid), op.category, frozenset(flags))
    var = g.variables[nid]
    flags |= {"evidence"} if nid in evidence else set()
    flags |= {"deleted"} if var.deleted else set()
    if var.category in (ANSWER, JUDGEMENT) and verdict is not None:
        flags.add("wrong" if verdict == 0 else "right")
    label = f"{var.name} · v{var.version}" if g.latest.get(var.name, 1) > 1 else var.name
    detail = "deleted" if var.deleted else clip(preview(var.value), int(w / 5.6))
    tooltip = f"{nid}  ({var.category}, t={var.time})\n\n{clip_block(var.value, 700)}"
    return Node(nid, "variable", c, x, y, w, h, clip(label, int(w / 7.0)), detail, tooltip, var.category,
                frozenset(flags))


def _op_lines(name: str, detail: str, width: int) -> tuple[str, str]:
    """An op's two text lines: its name and its prompt (or category), or a long name split at an underscore."""
    if len(name) <= width:
        return name, clip(detail, width + 2)
    cut = max((i for i, ch in enumerate(name[: width + 1]) if ch == "_"), default=-1)
    if cut <= 0:
        return clip(name, width), clip(detail, width + 2)
    return name[:cut + 1], clip(name[cut + 1:], width)


_TEXT_KEYS = ("episode", "summary", "memory", "content", "fact", "facts", "value", "query", "reason")


def preview(value: Any) -> str:
    """A one-line preview: a message as ``speaker: text``, a judgement as its label, a list by size and head."""
    if isinstance(value, dict):
        if isinstance(value.get("text"), str):
            return f"{value['speaker']}: {value['text']}" if value.get("speaker") else value["text"]
        if "label" in value:
            return str(value["label"])
        for key in _TEXT_KEYS:
            text = value.get(key)
            if isinstance(text, str) and text.strip():
                return text
    if isinstance(value, list):
        if not value:
            return "(empty)"
        return f"{len(value)} × {preview(value[0])}" if len(value) > 1 else preview(value[0])
    return plain(value)


def clip_block(value: Any, limit: int) -> str:
    """Multi-line display text cut to ``limit`` characters (for tooltips)."""
    text = plain(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _op_tooltip(g: MemoryGraph, nid: str) -> str:
    op = g.ops[nid]
    lines = [nid, f"category: {op.category}" + (f", prompt: {op.prompt.component}" if op.prompt else "")]
    if op.status != "ok":
        lines.append(f"FAILED: {op.error or ''}")
    if op.lm_calls:
        toks = sum(c.prompt_tokens + c.completion_tokens for c in op.lm_calls)
        lines.append(f"LM calls: {len(op.lm_calls)} ({toks} tokens)")
    if op.params:
        lines.append(f"params: {clip(op.params, 160)}")
    lines.append(f"reads: {clip(', '.join(op.input_ids()), 220)}")
    lines.append(f"writes: {clip(', '.join(op.output_ids()), 160)}")
    if op.raw:
        lines.append(f"LM said: {clip_block(op.raw, 300)}")
    return "\n".join(lines)


def _more_node(g: MemoryGraph, c: int, n: int, sample: list[str], x: float, y: float, w: float) -> Node:
    """The "+N more" node of column ``c``; its tooltip names the kinds left out (from a sample when many)."""
    kinds = Counter(g.ops[i].name if i in g.ops else g.variables[i].category for i in sample)
    of = "" if len(sample) == n else f" (kinds among the first {len(sample)})"
    tooltip = f"{n} more in '{COLUMNS[c]}' not drawn{of}:\n" + "\n".join(f"{k} × {m}" for k, m in kinds.most_common(8))
    return Node(f"more:{c}", "more", c, x, y, w, VAR_H, f"+{n} more", COLUMNS[c], tooltip, "more")


def _edges(g: MemoryGraph, shown: set[str], universe: set[str], col: Callable[[str], int], blamed: str | None,
           path: set[str]) -> list[Edge]:
    """Edges between drawn nodes, and one collapsed edge per drawn op and "+N more" node it touches."""
    out: dict[tuple[str, str], Edge] = {}
    for op_id in (n for n in shown if n in g.ops):
        op = g.ops[op_id]
        pairs = [(vid, op_id, role) for role, ids in op.inputs.items() for vid in ids]
        pairs += [(op_id, vid, role) for role, vid in op.outputs.items()]
        for src, dst, role in pairs:
            far = dst if src == op_id else src
            if far in shown:
                flags = {"blamed"} if op_id == blamed else set()
                flags |= {"version"} if role == "_previous" else set()
                flags |= {"path"} if src in path and dst in path else set()
                out.setdefault((src, dst), Edge(src, dst, role, frozenset(flags)))
            elif far in universe:
                more = f"more:{col(far)}"
                key = (more, op_id) if far == src else (op_id, more)
                out.setdefault(key, Edge(key[0], key[1], role, frozenset({"collapsed"})))
    return list(out.values())
