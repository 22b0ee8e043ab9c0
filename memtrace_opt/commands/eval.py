"""``memtrace-opt eval CONFIG``: run a memory system on a dataset slice, traced, and score it.

Writes the run directory (see :mod:`memtrace_opt.rundir`) conversation by conversation, so an
interrupted run resumes where it stopped (``--resume``, the default), and prints a short table:
accuracy with its 95% CI, F1, BLEU-1, per category, LM calls, tokens, wall time, failed ops.

The work is :func:`memtrace_opt.run.evaluate`; tests hand the command scripted LMs through
``memtrace_opt.cli.main(argv, injected=...)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Optional

import typer

__all__ = ["register", "summary_table"]


def summary_table(summary: Mapping[str, Any]) -> Any:
    """The run summary as a rich table: overall and per-category rows, then cost lines."""
    from rich.table import Table

    def pct(x: float) -> str:
        return f"{100 * x:.1f}"

    table = Table(title=f"{summary.get('system')} on {summary.get('dataset')} (judge: {summary.get('judge')})")
    for col in ("category", "n", "accuracy %", "95% CI", "F1", "BLEU-1"):
        table.add_column(col, justify="left" if col == "category" else "right")
    rows = [("all", summary)] + list(summary.get("per_category", {}).items())
    for name, block in rows:
        low, high = block.get("accuracy_ci", [0.0, 0.0])
        table.add_row(name, str(block.get("n", 0)), pct(block.get("accuracy", 0.0)), f"{pct(low)}–{pct(high)}",
                      f"{block.get('f1', 0.0):.3f}", f"{block.get('bleu1', 0.0):.3f}")
    usage = summary.get("lm_usage", {})
    failed = summary.get("failed_ops", {})
    table.caption = (
        f"LM calls {usage.get('lm_calls', 0)} (+{usage.get('cached_calls', 0)} cached) · tokens "
        f"{usage.get('prompt_tokens', 0)} in / {usage.get('completion_tokens', 0)} out · wall "
        f"{summary.get('wall_s', 0.0):.1f} s · failed ops {summary.get('failed_ops_total', 0)}"
        + (f" ({', '.join(f'{k} {v}' for k, v in sorted(failed.items()))})" if failed else "")
        + (f" · judge failures {summary['judge_failures']}" if summary.get("judge_failures") else "")
    )
    return table


def register(app: typer.Typer) -> None:
    """Add the ``eval`` command to the CLI."""

    @app.command("eval")
    def eval_command(
        ctx: typer.Context,
        config: Annotated[str, typer.Argument(help="Run config (YAML).")],
        resume: Annotated[bool, typer.Option("--resume/--no-resume",
                                             help="Skip conversations already finished in the run dir.")] = True,
        out: Annotated[Optional[str], typer.Option("--out", help="Run directory (default: output_dir/run_name).")] = None,
        dataset_path: Annotated[Optional[str], typer.Option("--dataset-path",
                                                            help="Dataset file, overriding dataset.path.")] = None,
        quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
        force: Annotated[bool, typer.Option("--force", help="Resume although the config changed (recorded in "
                                                            "config_changes.json).")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print summary.json instead of a table.")] = False,
    ) -> None:
        """Evaluate the config's memory system on its dataset slice; writes graphs, results and a summary."""
        from memtrace_opt.commands.console import Reporter, injected_lms
        from memtrace_opt.run import evaluate

        report = Reporter(quiet=quiet, as_json=as_json)
        result = evaluate(config, resume=resume, out=out, dataset_path=dataset_path, progress=not quiet, force=force,
                          **injected_lms(ctx.obj))
        report.result({**dict(result.summary), "run_dir": str(result.run_dir)}, summary_table(result.summary))
        if result.resumed:
            report.note(f"resumed: {', '.join(result.resumed)} (already finished)")
        summary = result.summary
        report.summary(f"eval: {summary.get('n', 0)} questions, accuracy {100 * summary.get('accuracy', 0):.1f}% · "
                       f"run dir: {result.run_dir}")
