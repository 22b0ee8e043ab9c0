"""The attribution benchmark in the report: method × system accuracy tables and the cases' error mix.

Reads ``bench-attribution`` output (``{"rows": [one per method, with by_system / by_type / by_source
breakdowns], "cases", "case_counts": {system: {error type: n}}}``); rows that already carry a
``system`` (one per method × system) are read as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from memtrace_opt.report.charts import stacked_bars
from memtrace_opt.report.escape import esc
from memtrace_opt.report.fmt import count, num, pct
from memtrace_opt.report.theme import error_order

__all__ = ["BenchData", "bench_section", "read_bench"]

_ALL = "all systems"


@dataclass
class BenchData:
    """Flattened benchmark rows (``method``, ``system``, metrics), per-type rows, and cases per system and type."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    by_type: list[dict[str, Any]] = field(default_factory=list)
    case_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    cases: int = 0

    def __bool__(self) -> bool:
        return bool(self.rows)


def _metrics(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if isinstance(v, (int, float)) and not isinstance(v, bool) or v is None}


def read_bench(payloads: Iterable[Any]) -> BenchData:
    """Merge benchmark payloads (a list of rows, or ``{"rows"|"results": [...], ...}``) into one :class:`BenchData`."""
    out = BenchData()
    for payload in payloads:
        rows = payload
        if isinstance(payload, dict):
            rows = next((payload[k] for k in ("rows", "results", "table") if isinstance(payload.get(k), list)), [])
            counts = payload.get("case_counts")
            if isinstance(counts, dict):
                out.case_counts.update({str(s): dict(c) for s, c in counts.items() if isinstance(c, dict)})
            out.cases += int(payload.get("cases") or 0)
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, dict) and "method" in row:
                _add_row(out, row)
    return out


def _add_row(out: BenchData, row: dict[str, Any]) -> None:
    method = str(row["method"])
    if "system" in row:
        out.rows.append({"method": method, "system": str(row["system"]), **_metrics(row)})
        return
    for system, scores in (row.get("by_system") or {}).items():
        if isinstance(scores, dict):
            out.rows.append({"method": method, "system": str(system), **_metrics(scores)})
    out.rows.append({"method": method, "system": _ALL, **_metrics(row)})
    for etype, scores in (row.get("by_type") or {}).items():
        if isinstance(scores, dict):
            out.by_type.append({"method": method, "system": str(etype), **_metrics(scores)})


def _is_rate(key: str) -> bool:
    return any(w in key.lower() for w in ("accuracy", "acc", "rate", "precision", "recall"))


def _pivot(rows: list[dict[str, Any]], key: str, cols_title: str = "method") -> str:
    """Methods down, systems (or types) across, ``key`` in the cells; the best per column in bold."""
    methods = list(dict.fromkeys(r["method"] for r in rows))
    cols = list(dict.fromkeys(r["system"] for r in rows))
    cell = {(r["method"], r["system"]): r.get(key) for r in rows}
    best = {c: max((v for (m, s), v in cell.items() if s == c and isinstance(v, (int, float))), default=None)
            for c in cols}
    body = "".join(
        f"<tr><td>{esc(m)}</td>" + "".join(
            f"<td class='n{' best' if cell.get((m, c)) is not None and cell.get((m, c)) == best[c] else ''}'>"
            f"{pct(cell.get((m, c)))}</td>" for c in cols) + "</tr>" for m in methods)
    head = "".join(f"<th class='n'>{esc(c)}</th>" for c in cols)
    return f"<table class='pivot'><thead><tr><th>{esc(cols_title)}</th>{head}</tr></thead><tbody>{body}</tbody></table>"


def bench_section(bench: BenchData) -> str:
    """Accuracy tables (method × system, and per error type), the cases' error mix, and every metric flat."""
    if not bench:
        return ""
    keys = list(dict.fromkeys(k for r in bench.rows for k in r if k not in ("method", "system")))
    known = [k for k in ("type_accuracy", "op_accuracy", "joint_accuracy") if k in keys]
    rates = known or [k for k in keys if _is_rate(k)][:3]
    cards = [_card(f"{k.replace('_', ' ')} per system", _pivot(bench.rows, k)) for k in rates[:2]]
    if bench.by_type and "type_accuracy" in keys:
        cards.append(_card("type accuracy per true error type", _pivot(bench.by_type, "type_accuracy")))
    if bench.case_counts:
        rows = list(bench.case_counts.items())
        order = error_order(t for _, c in rows for t in c)
        cards.append(_card("benchmark cases per system, by true error type", stacked_bars(rows, order)))
    head = "".join(f"<th class='n'>{esc(k)}</th>" for k in keys)
    body = "".join(f"<tr><td>{esc(r['method'])}</td><td>{esc(r['system'])}</td>"
                   + "".join(f"<td class='n'>{pct(r.get(k)) if _is_rate(k) else num(r.get(k))}</td>" for k in keys)
                   + "</tr>" for r in bench.rows)
    cases = f" over {count(bench.cases)} cases" if bench.cases else ""
    return (f"<section id='bench'><h2>Attribution benchmark</h2><p class='lead'>How often each attribution method "
            f"names the right error type and the right operation{esc(cases)}, per memory system (best per column in "
            f"bold).</p><div class='grid2'>{''.join(cards)}</div><details class='card'><summary>all metrics</summary>"
            f"<table><thead><tr><th>method</th><th>system</th>{head}</tr></thead><tbody>{body}</tbody></table>"
            f"</details></section>")


def _card(title: str, body_html: str) -> str:
    return f"<div class='card'><h3>{esc(title)}</h3>{body_html}</div>"
