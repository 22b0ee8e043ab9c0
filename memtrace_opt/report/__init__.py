"""The run report: one self-contained HTML file with the run summary, every failed question's graph
slice and blame, error-type charts, optimization rounds and prompt diffs, and benchmark tables.

The last step of a run: it only reads a run directory (:mod:`memtrace_opt.rundir`), whichever commands
wrote it, and notes what it cannot read instead of failing.

Usage (writes ``runs/quickstart/report.html``)::

    from memtrace_opt.report import render_report
    render_report("runs/quickstart")
"""

from memtrace_opt.report.collect import RunData, collect_run
from memtrace_opt.report.page import build_html, render_report, write_report
from memtrace_opt.report.questions import QuestionOptions

__all__ = ["QuestionOptions", "RunData", "build_html", "collect_run", "render_report", "write_report"]
