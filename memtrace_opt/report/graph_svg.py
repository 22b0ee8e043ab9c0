"""Draw a laid-out question slice, and a memory unit's life, as inline SVG (escaped text only).

Shapes carry meaning the legend explains: rounded boxes are values (variables), ellipses are steps
that call the LLM with a prompt, diamonds are steps that are plain code. The blamed op gets a red
outline, a fill in its error type's colour and a tag naming the error type. Full values live in
``<title>`` tooltips; node and edge ``data-`` attributes let the page script highlight neighbours.
"""

from __future__ import annotations

from memtrace_opt.graph.model import MemoryGraph
from memtrace_opt.graph.queries import UnitEvent, unit_lifetime
from memtrace_opt.report.escape import clip, esc
from memtrace_opt.report.layout import Edge, Node, SliceLayout, clip_block, preview
from memtrace_opt.report.theme import BLAME_RED, error_color, short_error

__all__ = ["MARKERS", "slice_svg", "timeline_svg"]

#: Arrowheads, defined once per page (``url(#…)`` references reach across inline SVGs).
MARKERS = (
    '<svg class="defs" width="0" height="0" aria-hidden="true"><defs>'
    + "".join(
        f'<marker id="{mid}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        f'orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z" fill="{color}"/></marker>'
        for mid, color in (("arr", "#94A3B8"), ("arr-dark", "#475569"), ("arr-red", BLAME_RED))
    )
    + "</defs></svg>"
)


def _f(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def slice_svg(layout: SliceLayout, *, error_type: str | None = None) -> str:
    """The slice as one ``<svg>`` element, sized to its content (the page scales it down to fit)."""
    by_id = {n.id: n for n in layout.nodes}
    parts = [f'<svg class="slice" viewBox="0 0 {_f(layout.width)} {_f(layout.height)}" width="{_f(layout.width)}" '
             f'height="{_f(layout.height)}" style="min-width:{_f(layout.width * 0.75)}px" role="img" '
             f'aria-label="{esc("evolution graph of " + layout.qa_id)}">']
    for title, cx in layout.columns:
        parts.append(f'<text class="col-title" x="{_f(cx)}" y="18" text-anchor="middle">{esc(title)}</text>')
    parts.append('<g class="edges">')
    for edge in layout.edges:
        if edge.source in by_id and edge.target in by_id:
            parts.append(_edge(edge, by_id[edge.source], by_id[edge.target]))
    parts.append('</g><g class="nodes">')
    parts += [_node(n, error_type) for n in layout.nodes]
    parts.append("</g></svg>")
    return "".join(parts)


def _edge(edge: Edge, s: Node, t: Node) -> str:
    y1, y2 = s.y + s.h / 2, t.y + t.h / 2
    if t.x > s.x + s.w / 2:
        x1, x2 = s.x + s.w, t.x
        dx = max((x2 - x1) / 2, 18.0)
        d = f"M{_f(x1)} {_f(y1)} C{_f(x1 + dx)} {_f(y1)} {_f(x2 - dx)} {_f(y2)} {_f(x2)} {_f(y2)}"
    elif t.x < s.x:
        x1, x2 = s.x, t.x + t.w
        d = f"M{_f(x1)} {_f(y1)} C{_f(x1 - 34)} {_f(y1)} {_f(x2 + 34)} {_f(y2)} {_f(x2)} {_f(y2)}"
    else:
        x1 = x2 = s.x + s.w
        d = f"M{_f(x1)} {_f(y1)} C{_f(x1 + 40)} {_f(y1)} {_f(x2 + 40)} {_f(y2)} {_f(x2)} {_f(y2)}"
    flags = sorted(edge.flags)
    marker = "arr-red" if "blamed" in edge.flags else "arr-dark" if "path" in edge.flags else "arr"
    cls = " ".join(["edge", *flags])
    return (f'<path class="{esc(cls)}" d="{d}" marker-end="url(#{marker})" data-s="{esc(edge.source)}" '
            f'data-t="{esc(edge.target)}"><title>{esc(edge.role)}: {esc(edge.source)} → {esc(edge.target)}</title>'
            "</path>")


def _node(n: Node, error_type: str | None) -> str:
    flags = sorted(n.flags)
    cat = "cat-" + "".join(ch if ch.isalnum() else "-" for ch in n.category.lower())
    cls = " ".join(["node", n.kind, cat, *flags])
    shape = _shape(n, error_type)
    cx = n.w / 2
    label_cls = "l1 strike" if "deleted" in n.flags else "l1"
    text = (f'<text class="{label_cls}" x="{_f(cx)}" y="{_f(n.h / 2 - 3)}" text-anchor="middle">{esc(n.label)}</text>'
            f'<text class="l2" x="{_f(cx)}" y="{_f(n.h / 2 + 11)}" text-anchor="middle">{esc(n.detail)}</text>')
    extra = ""
    if "blamed" in n.flags:
        extra = (f'<text class="blame-tag" x="{_f(cx)}" y="-7" text-anchor="middle" fill="{BLAME_RED}">'
                 f'✗ {esc(error_type or "blamed")}</text>')
    elif "evidence" in n.flags:
        extra = f'<text class="ev-tag" x="{_f(n.w - 4)}" y="-4" text-anchor="end">evidence</text>'
    return (f'<g class="{esc(cls)}" data-id="{esc(n.id)}" transform="translate({_f(n.x)},{_f(n.y)})">'
            f"<title>{esc(n.tooltip)}</title>{shape}{text}{extra}</g>")


def _shape(n: Node, error_type: str | None) -> str:
    fill = f' style="fill:{error_color(error_type)}33"' if "blamed" in n.flags else ""
    if n.kind == "operation" and "llm" in n.flags:
        rx, ry = _f(n.w / 2), _f(n.h / 2)
        return f'<ellipse class="shape" cx="{rx}" cy="{ry}" rx="{rx}" ry="{ry}"{fill}/>'
    if n.kind == "operation":
        w, h = n.w, n.h
        pts = f"{_f(w / 2)},0 {_f(w)},{_f(h / 2)} {_f(w / 2)},{_f(h)} 0,{_f(h / 2)}"
        return f'<polygon class="shape" points="{pts}"{fill}/>'
    return f'<rect class="shape" width="{_f(n.w)}" height="{_f(n.h)}" rx="9"{fill}/>'


def timeline_svg(g: MemoryGraph, name: str, *, blamed_op: str | None = None, max_events: int = 8) -> str:
    """Memory unit ``name``'s life as a small timeline: created, updated, deleted, each with its op.

    Long lives (a long-context buffer has a version per turn) show the first two and the last few
    versions around a "… N more" gap, always keeping the version the blamed op made.
    """
    events = unit_lifetime(g, name)
    keep = list(range(len(events)))
    if len(events) > max_events:
        blamed_at = [i for i, e in enumerate(events) if e.op is not None and e.op.id == blamed_op]
        keep = sorted(set([0, 1] + list(range(len(events) - (max_events - 3), len(events))) + blamed_at))
    step, pad = 150.0, 70.0
    slots: list[int | None] = []
    for i in keep:
        if slots and slots[-1] is not None and i - slots[-1] > 1:
            slots.append(None)
        slots.append(i)
    width = pad * 2 + step * (len(slots) - 1)
    parts = [f'<svg class="timeline" viewBox="0 0 {_f(width)} 74" width="{_f(width)}" height="74" role="img" '
             f'aria-label="{esc("life of " + name)}"><line class="tl-axis" x1="{_f(pad - 30)}" y1="30" '
             f'x2="{_f(width - pad + 30)}" y2="30"/>']
    prev_i = -1
    for k, slot in enumerate(slots):
        x = pad + step * k
        if slot is None:
            skipped = next(s for s in slots[k + 1:] if s is not None) - prev_i - 1
            parts.append(f'<text class="tl-gap" x="{_f(x)}" y="34" text-anchor="middle">… {skipped} more</text>')
            continue
        prev_i = slot
        event = events[slot]
        parts.append(_event(event, x, event.op is not None and event.op.id == blamed_op))
    parts.append("</svg>")
    return "".join(parts)


def _event(event: UnitEvent, x: float, blamed: bool) -> str:
    var = event.var
    op_name = event.op.name.split(".", 1)[-1] if event.op is not None else "input"
    value = "(tombstone)" if var.deleted else clip_block(var.value, 500)
    tip = (f"{var.id} {event.event} by {event.op.id if event.op else 'input'} (t={var.time}); read by "
           f"{len(event.readers)} op(s)\n\n{value}")
    ring = (f'<circle cx="{_f(x)}" cy="30" r="11" fill="none" stroke="{BLAME_RED}" stroke-width="2.5"/>'
            if blamed else "")
    return (f'<g class="tl-event {esc(event.event)}"><title>{esc(tip)}</title>{ring}'
            f'<circle class="tl-dot" cx="{_f(x)}" cy="30" r="7"/>'
            f'<text class="tl-top" x="{_f(x)}" y="13" text-anchor="middle">v{var.version} {esc(event.event)}</text>'
            f'<text class="tl-op" x="{_f(x)}" y="52" text-anchor="middle">{esc(clip(op_name, 22))}</text>'
            f'<text class="tl-val" x="{_f(x)}" y="66" text-anchor="middle">'
            f'{esc("deleted" if var.deleted else clip(preview(var.value), 24))}</text></g>')


def error_tag(error_type: str | None) -> str:
    """A small coloured chip naming an error type (HTML)."""
    return (f'<span class="chip" style="--c:{error_color(error_type)}" title="{esc(error_type or "no blame")}">'
            f"{esc(short_error(error_type))}</span>")
