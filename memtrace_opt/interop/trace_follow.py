"""Follow one turn (or any variable) forward through a run's graph: ``memtrace-opt trace follow``.

``trace show --question`` looks backward from an answer, so a fact that never reached memory leaves
nothing to see there: the session that lost it is not in the slice. A person asking "where did turn
D1:7 go?" needs the forward view: the ops that read the turn and what they wrote, then the memory units
and retrieved contexts downstream of it that still carry its content, and the questions those contexts
answered. Ingesting a whole session in one call makes every unit of that session a descendant of every
turn in it, so lineage alone over-reports; a value counts as carrying the turn when one of its items (a
fact, a memory, a retrieved record) shares at least ``min_shared`` content words with it (by default half
of them; the same stemmed, stopword-free words attribution compares), and each line shows its count so a
reader sees how strong the match is. A paraphrase can share fewer words: lower ``--min-shared`` to see it.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from memtrace_opt.attribution.text import content_tokens, value_items, value_text
from memtrace_opt.errors import GraphError
from memtrace_opt.graph.model import MEMORY_UNIT, RETRIEVED, MemoryGraph, op_name
from memtrace_opt.graph.queries import descendants, short_value, unit_lifetime
from memtrace_opt.interop.run_graphs import RunGraphs
from memtrace_opt.interop.trace_text import op_heading

__all__ = ["follow", "render_follow", "render_unit", "resolve_variable", "unit"]

_TURN = re.compile(r"^D\d+:\d+$")
_WIDTH = 90


def resolve_variable(g: MemoryGraph, name: str) -> str:
    """A variable id from what a user types: a turn id (``D1:7``), a name (its first version) or an id."""
    if _TURN.match(name):
        name = f"message:{name}"
    if name in g.variables:
        return name
    if name in g.latest:
        return next(f"{name}@{v}" for v in range(1, g.latest[name] + 1) if f"{name}@{v}" in g.variables)
    raise GraphError(f"{name!r} is not a variable of this graph (a turn id such as D1:7, a variable name "
                     f"such as mem:<id>, or a versioned id such as mem:<id>@2)")


def _shared(words: frozenset[str], value: object) -> int:
    """The most content words of the turn that one item of ``value`` shares (a list of facts or memories is
    matched item by item, so a long list does not match by adding up stray words)."""
    return max((len(words & content_tokens(item)) for item in value_items(value)), default=0)


#: Words of a shared-image caption ("[shares a photo of ...]") and of every "X shared a picture" fact: they
#: match any other photo, so they say nothing about which turn a value carries.
_CAPTION_WORDS = content_tokens("shares shared a photo photography picture image")


def turn_words(g: MemoryGraph, value: object) -> frozenset[str]:
    """The content words that identify a turn: its text's, without the speakers' names (every fact names
    one of them) and without caption words."""
    speakers = tuple(str(s) for s in g.meta.get("speakers") or ())
    own = value.get("speaker") if isinstance(value, dict) else None
    drop = speakers + ((own,) if isinstance(own, str) else ())
    return frozenset(content_tokens(value_text(value), drop=drop) - _CAPTION_WORDS)


def _threshold(words: frozenset[str], min_shared: int | None) -> int:
    """``min_shared``, or by default half the turn's content words (at least 2)."""
    return min_shared if min_shared is not None else max(2, math.ceil(len(words) / 2))


def render_follow(g: MemoryGraph, var_id: str, *, min_shared: int | None = None, width: int = _WIDTH) -> list[str]:
    """The forward view of ``var_id`` as lines: the ingestion ops that carried it, then the memory units and
    retrieved contexts downstream that carry it (``min_shared`` content words in one item; default: half)."""
    start = g.variables[var_id]
    words = turn_words(g, start.value)
    min_shared = _threshold(words, min_shared)
    lines = [f"follow {var_id}  [{start.category}]  {short_value(start.value, width)}",
             f"  {len(words)} content words; a value carries it when one of its items shares ≥ {min_shared}"]
    lines.append("ingestion path (ops that read a variable carrying it, in order):")
    lines += _path(g, var_id, words, min_shared, width)
    later = sorted(descendants(g, var_id, kind="variable"), key=lambda v: g.variables[v].time)
    units = [v for v in later if g.variables[v].category == MEMORY_UNIT]
    carried = [(v, _shared(words, g.variables[v].value)) for v in units]
    held = [(v, n) for v, n in carried if n >= min_shared or g.variables[v].deleted]
    lines.append(f"memory units downstream: {len(units)}; sharing ≥ {min_shared} content words (or deleted): {len(held)}")
    for v, n in held:
        var = g.variables[v]
        maker = g.producer.get(v, "(input)")
        shown = "(deleted)" if var.deleted else short_value(var.value, width - 40)
        lines.append(f"  {v:<40} shares {n}/{len(words)}  by {maker}  {shown}")
    contexts = [v for v in later if g.variables[v].category == RETRIEVED]
    found = [(v, _shared(words, g.variables[v].value)) for v in contexts]
    hits = [(v, n) for v, n in found if n >= min_shared]
    lines.append(f"retrieved contexts downstream: {len(contexts)}; sharing ≥ {min_shared} content words: {len(hits)}")
    for v, n in hits:
        lines.append(f"  {v:<40} shares {n}/{len(words)}  (question {v.split('@')[0].removeprefix('retrieved:')})")
    return lines


def _answering(g: MemoryGraph, op_id: str) -> bool:
    session = g.ops[op_id].session
    record = g.sessions.get(session) if session else None
    return record is not None and record.kind == "answer"


def _path(g: MemoryGraph, var_id: str, words: frozenset[str], min_shared: int, width: int) -> list[str]:
    """The ingestion ops that carried the content on (an output sharing ``min_shared`` words, or a deletion),
    in order; then, where the trail ends before any memory unit, the ops that read it and let it go."""
    carrying = {var_id}
    ops = sorted({op for v in descendants(g, var_id, kind="variable") | {var_id} for op in g.consumers(v)},
                 key=lambda op_id: g.ops[op_id].time)
    lines, let_go = [], []
    for op_id in ops:
        op = g.ops[op_id]
        read = carrying & set(op.input_ids())
        if _answering(g, op_id) or not read:
            continue
        outs = [(role, out, _shared(words, g.variables[out].value)) for role, out in op.outputs.items()]
        kept = [(role, out, n) for role, out, n in outs if n >= min_shared or g.variables[out].deleted]
        if not kept:
            let_go.append(op_id)
            continue
        lines.append(op_heading(op) + ("" if op.status == "ok" else f"  ✗ {op.status}"))
        for role, out, n in kept:
            carrying.add(out)
            out_var = g.variables[out]
            shown = "(deleted)" if out_var.deleted else short_value(out_var.value, width - 30)
            lines.append(f"    → {role:<10} {out:<28} shares {n}/{len(words)}  {shown}")
    if not lines:
        lines.append("  (no op carried it on)")
    if not any(g.variables[v].category == MEMORY_UNIT for v in carrying):
        kinds = Counter(op_name(op_id) for op_id in let_go)
        first: dict[str, str] = {}
        for op_id in let_go:
            first.setdefault(op_name(op_id), op_id)
        gone = "; ".join(f"{name} ×{n} (first {first[name]})" for name, n in kinds.items()) or "no op"
        lines.append(f"  ✗ it reached no memory unit: read, and not carried on, by {gone}")
    return lines


def render_unit(g: MemoryGraph, name: str, *, width: int = _WIDTH) -> list[str]:
    """A variable's life, version by version: the op that made each version and how many ops read it."""
    base = name.split("@")[0]
    lines = [f"unit {base}"]
    for event in unit_lifetime(g, base):
        shown = "(deleted)" if event.var.deleted else short_value(event.var.value, width - 30)
        maker = event.op.id if event.op else "(input)"
        lines.append(f"  {event.var_id:<28} {event.event:<8} by {maker}; read by {len(event.readers)} op(s)  {shown}")
    return lines


def _graph(run_dir: str, conversation: str) -> MemoryGraph:
    return RunGraphs(run_dir).load(conversation)


def follow(run_dir: str, conversation: str, name: str, *, min_shared: int | None = None,
           full: bool = False) -> list[str]:
    """What ``trace follow`` prints (a GraphError naming the run, conversation or variable otherwise)."""
    g = _graph(run_dir, conversation)
    return render_follow(g, resolve_variable(g, name), min_shared=min_shared, width=10**6 if full else _WIDTH)


def unit(run_dir: str, conversation: str, name: str, *, full: bool = False) -> list[str]:
    """What ``trace unit`` prints."""
    g = _graph(run_dir, conversation)
    return render_unit(g, resolve_variable(g, name), width=10**6 if full else _WIDTH)
