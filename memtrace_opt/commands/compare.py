"""``memtrace-opt compare RUN_DIR...``: the method × system table of finished optimize runs.

Per run: held-out accuracy without and with optimization, the gain with its 95% paired bootstrap
CI and p-value, rollouts, LM calls, tokens and wall time (see :mod:`memtrace_opt.loop.compare`);
the paired difference against the ``unattributed`` run on the same questions; and routing: the
prompts the best set changed and the blame share per prompt component (:mod:`memtrace_opt.loop.routing`).
``--json`` prints ``{"rows": [...]}`` instead of the table.
"""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``compare`` command to the CLI."""

    @app.command("compare")
    def compare_command(
        run_dirs: Annotated[list[str], typer.Argument(help="Run directories written by `memtrace-opt optimize`.")],
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    ) -> None:
        """Compare optimize runs: held-out gain over no optimization, with paired CIs and costs."""
        from memtrace_opt.commands.console import Reporter
        from memtrace_opt.loop.compare import render_table
        from memtrace_opt.run import compare

        rows = compare(run_dirs)
        report = Reporter(as_json=as_json)
        report.result({"rows": [r.to_dict() for r in rows]}, render_table(rows))
        for r in rows:
            for warning in r.warnings:
                report.note(f"warning {r.run_dir}: {warning}")
