"""``memtrace-opt attribute RUN_DIR``: blame every failed question of a run on its earliest decisive faulty op.

The work is :func:`memtrace_opt.run.attribute` (shared with ``optimize``'s held-out attribution and
the Python API); this module is the command: options, table, summary.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from memtrace_opt.attribution.methods import ATTRIBUTE_METHODS

__all__ = ["register", "summary_table"]


def summary_table(report: Any) -> Any:
    """A :class:`~memtrace_opt.rundir.BlameReport`'s blame per prompt component and error type, as a rich table."""
    from rich.table import Table

    agg = report.aggregate
    table = Table(title=f"blame ({report.method}{', counterfactual' if report.counterfactual else ''}): "
                        f"{agg['total']} failed questions")
    for col in ("prompt component", "failures", "error types"):
        table.add_column(col, justify="right" if col == "failures" else "left")
    rows = [(name, g) for name, g in agg["components"].items()] + [("(unoptimizable)", agg["unoptimizable"])]
    for name, group in rows:
        types = ", ".join(f"{t} {n}" for t, n in sorted(group["error_types"].items()))
        chained = f" (+{group['chained']} compound)" if group.get("chained") else ""
        table.add_row(name, f"{group['count']}{chained}", types or "-")
    if agg["unattributed"]["count"]:
        table.add_row("(not attributed)", str(agg["unattributed"]["count"]), "-")
    rescued = [s.counterfactual_rescued for s in report.signals if s.counterfactual_rescued is not None]
    if rescued:
        table.caption = f"counterfactual fix rescued {sum(rescued)}/{len(rescued)} verified blames"
    compound = sum(bool(s.chain) for s in report.signals)
    if compound:
        table.caption = (f"{table.caption}; " if table.caption else "") + (
            f"{compound} compound failure(s): still wrong once the blamed op is fixed (+N compound: the "
            f"component of an op at fault after that)")
    return table


def register(app: typer.Typer) -> None:
    """Add the ``attribute`` command to the CLI."""

    @app.command("attribute")
    def attribute_command(
        ctx: typer.Context,
        run_dir: Annotated[str, typer.Argument(help="Run directory written by `memtrace-opt eval`.")],
        method: Annotated[str, typer.Option("--method", help=f"One of: {', '.join(ATTRIBUTE_METHODS)}.")] = "tracing",
        counterfactual: Annotated[Optional[bool], typer.Option(
            "--counterfactual/--no-counterfactual",
            help="Verify tracing's blame by replay (needs the LMs). Default: the run config's "
                 "attribution.counterfactual (on).")] = None,
        evidence: Annotated[Optional[str], typer.Option(
            "--evidence", help="annotated, pseudo or auto. Default: the run config's attribution.evidence.")] = None,
        llm_content: Annotated[bool, typer.Option("--llm-content", help="Tracing asks the LM where the token "
                                                                        "content test is inconclusive.")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print blame.json instead of a table.")] = False,
        quiet: Annotated[bool, typer.Option("--quiet", help="No progress lines.")] = False,
    ) -> None:
        """Attribute each failed question to its earliest decisive faulty operation; writes RUN_DIR/blame.json."""
        from memtrace_opt.attribution.aggregate import unoptimizable_line
        from memtrace_opt.commands.console import Reporter, injected_lms
        from memtrace_opt.rundir import blame_payload
        from memtrace_opt.run import attribute

        report = Reporter(quiet=quiet, as_json=as_json)
        blame = attribute(run_dir, method=method, counterfactual=counterfactual, evidence=evidence,
                          llm_content=llm_content, progress=report.progress, **injected_lms(ctx.obj))
        report.result(blame_payload(blame), summary_table(blame))
        beyond_prompts = unoptimizable_line(blame.aggregate)
        if beyond_prompts:
            report.note(beyond_prompts)
        for note in blame.notes:
            report.note(f"note: {note}")
        report.summary(f"attributed {len(blame.signals)} failed question(s): {blame.counts_line()} · "
                       f"wrote {Path(run_dir) / 'blame.json'}")
        if blame.verification_failed:
            print(f"memtrace-opt: {blame.verification_failed} counterfactual verification(s) failed "
                  "(listed above; their blame is tracing's, unverified)", file=sys.stderr)
            raise typer.Exit(1)
