"""Small SVG charts computed in Python: stacked bars, a line chart per method, an accuracy bar with its CI.

No chart library and no script: each chart is a string of SVG with escaped labels and a ``<title>``
on every mark, so the numbers are readable on hover and the chart works in a file opened from disk.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from memtrace_opt.report.escape import clip, esc
from memtrace_opt.report.rounds import RoundPoint
from memtrace_opt.report.theme import error_color, method_color

__all__ = ["ci_bar", "line_chart", "stacked_bars"]


def _f(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def stacked_bars(rows: Sequence[tuple[str, Mapping[str, int]]], order: Sequence[str], *, label_w: float = 200,
                 bar_w: float = 440) -> str:
    """One horizontal bar per row, split into segments per error type (in ``order``), coloured by type."""
    row_h, gap, top = 22.0, 9.0, 6.0
    biggest = max((sum(c.values()) for _, c in rows), default=0) or 1
    height = top + len(rows) * (row_h + gap)
    width = label_w + bar_w + 48
    parts = [f'<svg class="chart bars" viewBox="0 0 {_f(width)} {_f(height)}" width="{_f(width)}" '
             f'height="{_f(height)}" role="img" aria-label="error types per row">']
    for i, (label, counts) in enumerate(rows):
        y = top + i * (row_h + gap)
        parts.append(f'<text class="bar-label" x="{_f(label_w - 8)}" y="{_f(y + row_h / 2 + 4)}" text-anchor="end">'
                     f"<title>{esc(label)}</title>{esc(clip(label, 30))}</text>")
        x = label_w
        for kind in order:
            n = counts.get(kind, 0)
            if not n:
                continue
            w = bar_w * n / biggest
            parts.append(f'<rect class="seg" x="{_f(x)}" y="{_f(y)}" width="{_f(max(w - 1, 1))}" height="{_f(row_h)}" '
                         f'rx="3" fill="{error_color(kind)}"><title>{esc(label)} · {esc(kind)}: {n}</title></rect>')
            if w >= 20:
                parts.append(f'<text class="seg-n" x="{_f(x + w / 2)}" y="{_f(y + row_h / 2 + 4)}" '
                             f'text-anchor="middle">{n}</text>')
            x += w
        total = sum(counts.values())
        parts.append(f'<text class="bar-total" x="{_f(x + 6)}" y="{_f(y + row_h / 2 + 4)}">{total}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _nice_range(values: Sequence[float]) -> tuple[float, float, float]:
    """A y range covering ``values`` within [0, 1], with a tick step of 0.05, 0.1 or 0.2."""
    lo, hi = min(values), max(values)
    lo, hi = max(0.0, lo - 0.05), min(1.0, hi + 0.05)
    if hi - lo < 0.1:
        lo, hi = max(0.0, lo - 0.05), min(1.0, hi + 0.05)
    step = 0.05 if hi - lo <= 0.3 else 0.1 if hi - lo <= 0.6 else 0.2
    return math.floor(lo / step) * step, math.ceil(hi / step) * step, step


def line_chart(points: Sequence[RoundPoint], *, width: float = 720, height: float = 300) -> str:
    """Accuracy per round, one line per method, with CI whiskers where known; legend at the right."""
    methods = list(dict.fromkeys(p.method for p in points))
    rounds = sorted({p.round for p in points})
    values = [v for p in points for v in (p.accuracy, p.low, p.high) if v is not None]
    y0, y1, step = _nice_range(values)
    left, right, top, bottom = 52.0, 170.0, 16.0, 40.0
    pw, ph = width - left - right, height - top - bottom
    span = (rounds[-1] - rounds[0]) or 1

    def px(r: int) -> float:
        return left + (pw * (r - rounds[0]) / span if len(rounds) > 1 else pw / 2)

    def py(v: float) -> float:
        return top + ph * (1 - (v - y0) / ((y1 - y0) or 1))

    parts = [f'<svg class="chart line" viewBox="0 0 {_f(width)} {_f(height)}" width="{_f(width)}" '
             f'height="{_f(height)}" role="img" aria-label="accuracy per round per method">']
    n_ticks = int(round((y1 - y0) / step))
    for k in range(n_ticks + 1):
        v = y0 + k * step
        parts.append(f'<line class="grid" x1="{_f(left)}" x2="{_f(left + pw)}" y1="{_f(py(v))}" y2="{_f(py(v))}"/>'
                     f'<text class="tick" x="{_f(left - 8)}" y="{_f(py(v) + 4)}" text-anchor="end">{v:.0%}</text>')
    for r in rounds:
        parts.append(f'<text class="tick" x="{_f(px(r))}" y="{_f(top + ph + 18)}" text-anchor="middle">'
                     f'{"seed" if r == 0 else f"round {r}"}</text>')
    for i, method in enumerate(methods):
        color = method_color(i)
        series = sorted((p for p in points if p.method == method), key=lambda p: p.round)
        coords = " ".join(f"{_f(px(p.round))},{_f(py(p.accuracy))}" for p in series)
        parts.append(f'<g class="series" data-method="{esc(method)}">')
        if len(series) > 1:
            parts.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2.5"/>')
        for p in series:
            x = px(p.round)
            if p.low is not None and p.high is not None:
                parts.append(f'<line class="ci" x1="{_f(x)}" x2="{_f(x)}" y1="{_f(py(p.low))}" y2="{_f(py(p.high))}" '
                             f'stroke="{color}"/>')
            ci = f" (95% CI {p.low:.1%}–{p.high:.1%})" if p.low is not None and p.high is not None else ""
            parts.append(f'<circle cx="{_f(x)}" cy="{_f(py(p.accuracy))}" r="4.5" fill="{color}">'
                         f"<title>{esc(method)}, round {p.round}: {p.accuracy:.1%}{esc(ci)}</title></circle>")
        ly = top + 14 + i * 22
        parts.append(f'<line x1="{_f(left + pw + 18)}" x2="{_f(left + pw + 38)}" y1="{_f(ly - 4)}" y2="{_f(ly - 4)}" '
                     f'stroke="{color}" stroke-width="3"/><text class="legend-t" x="{_f(left + pw + 44)}" '
                     f'y="{_f(ly)}">{esc(clip(method, 18))}</text></g>')
    parts.append(f'<text class="axis-t" x="14" y="{_f(top + ph / 2)}" transform="rotate(-90 14 {_f(top + ph / 2)})" '
                 f'text-anchor="middle">accuracy</text></svg>')
    return "".join(parts)


def ci_bar(accuracy: float, low: float | None, high: float | None, *, width: float = 180) -> str:
    """A bar from 0 to ``accuracy`` on a 0–100% track, with the CI as a whisker."""
    h = 14.0
    parts = [f'<svg class="ci-bar" viewBox="0 0 {_f(width)} {_f(h)}" width="{_f(width)}" height="{_f(h)}" '
             f'aria-hidden="true"><rect class="track" width="{_f(width)}" height="{_f(h)}" rx="3"/>'
             f'<rect class="fill" width="{_f(width * max(0.0, min(1.0, accuracy)))}" height="{_f(h)}" rx="3"/>']
    if low is not None and high is not None:
        a, b = width * max(0.0, low), width * min(1.0, high)
        parts.append(f'<line class="whisker" x1="{_f(a)}" x2="{_f(b)}" y1="{_f(h / 2)}" y2="{_f(h / 2)}"/>'
                     f'<line class="whisker" x1="{_f(a)}" x2="{_f(a)}" y1="3" y2="{_f(h - 3)}"/>'
                     f'<line class="whisker" x1="{_f(b)}" x2="{_f(b)}" y1="3" y2="{_f(h - 3)}"/>')
    parts.append("</svg>")
    return "".join(parts)
