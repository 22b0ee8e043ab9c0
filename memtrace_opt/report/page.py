"""Assemble the report: one self-contained HTML file (inline CSS, inline script, inline SVG, no network)."""

from __future__ import annotations

import base64
import hashlib
import time
from pathlib import Path
from typing import Sequence, TypedDict

from memtrace_opt.atomic import atomic_write_text
from memtrace_opt.report.assets import CSS, JS
from memtrace_opt.report.collect import RunData, collect_run
from memtrace_opt.report.escape import esc, json_blob
from memtrace_opt.report.graph_svg import MARKERS
from memtrace_opt.report.questions import QuestionOptions, failed_section
from memtrace_opt.report.bench import bench_section
from memtrace_opt.report.sections import errors_section, notes_section, optimization_section
from memtrace_opt.report.summary import header_html, summary_section

__all__ = ["CSP", "build_html", "render_report", "write_report"]

# Only the report's own script may run: an injected inline script or event handler is refused by the browser.
_SCRIPT_HASH = base64.b64encode(hashlib.sha256(JS.encode("utf-8")).digest()).decode("ascii")
CSP = (f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{_SCRIPT_HASH}'; img-src data:")

_NAV = (("summary", "Summary"), ("failures", "Failed questions"), ("errors", "Error types"),
        ("optimization", "Optimization"), ("bench", "Attribution benchmark"), ("notes", "Notes"))


def _title(data: RunData) -> str:
    return str(data.config.get("run_name") or data.summary.get("run_id") or data.run_dir.name)


class _FailedEntry(TypedDict):
    qa_id: str
    conversation: str | None
    error_type: str | None
    op_id: str | None


class _ReportBlob(TypedDict):
    run: str
    system: str
    accuracy: float | None  # summary.json's accuracy; None when the run has none
    failed_total: int
    failed: list[_FailedEntry]


def _blob(data: RunData) -> _ReportBlob:
    """What the page script reads, and what a tool scraping the report can rely on."""
    return {
        "run": _title(data),
        "system": data.system,
        "accuracy": data.summary.get("accuracy"),
        "failed_total": len(data.failed),
        "failed": [{"qa_id": f.qa_id, "conversation": f.conversation,
                    "error_type": f.blame.error_type if f.blame else None,
                    "op_id": f.blame.op_id if f.blame else None} for f in data.failed],
    }


def build_html(data: RunData, options: QuestionOptions = QuestionOptions()) -> str:
    """The whole report for ``data`` as one HTML string."""
    sections = [summary_section(data), failed_section(data, options), errors_section(data),
                optimization_section(data), bench_section(data.bench)]
    sections.append(notes_section(data))  # last: rendering the others may add notes
    present = [(anchor, label) for anchor, label in _NAV if any(f"id='{anchor}'" in s or f'id="{anchor}"' in s
                                                                 for s in sections)]
    nav = "".join(f'<a href="#{anchor}">{esc(label)}</a>' for anchor, label in present)
    title = _title(data)
    stamp = time.strftime("%Y-%m-%d %H:%M")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
        f"<title>{esc(title)} · memtrace-opt report</title><style>{CSS}</style></head><body>"
        f"{MARKERS}{header_html(data, title)}<nav class=\"toc\">{nav}</nav><main>{''.join(sections)}</main>"
        f"<footer>Generated {esc(stamp)} by memtrace-opt from <code>{esc(data.run_dir)}</code>.</footer>"
        f"{json_blob('report-data', _blob(data))}<script>{JS}</script></body></html>\n"
    )


def write_report(data: RunData, out: str | Path | None = None, options: QuestionOptions = QuestionOptions()) -> Path:
    """Write the report of already collected ``data`` to ``out`` (default ``RUN_DIR/report.html``), atomically."""
    html_text = build_html(data, options)
    path = Path(out) if out is not None else data.run_dir / "report.html"
    if path.is_dir():  # --out DIR means the report goes into DIR
        path = path / "report.html"
    return atomic_write_text(path, html_text)


def render_report(run_dir: str | Path, out: str | Path | None = None, *, bench_path: str | Path | None = None,
                  compare: Sequence[str | Path] = (), max_graphs: int = 100, max_nodes: int = 34) -> Path:
    """Write the report of ``run_dir`` to ``out`` (default ``RUN_DIR/report.html``); returns its path.

    ``compare`` adds other optimization runs' round scores to the round chart. A missing run directory,
    or one with no run file at all, is a DatasetError naming it.
    """
    data = collect_run(run_dir, bench_path=bench_path, compare=compare)
    return write_report(data, out, QuestionOptions(max_graphs=max_graphs, max_nodes=max_nodes))
