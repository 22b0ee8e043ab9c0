"""``memtrace-opt trace show``: read a run's memory graphs as a person would, one question at a time.

Parses the options and prints :func:`memtrace_opt.interop.trace_text.show`'s lines: without
``--question`` the run's questions with their answers and judgements; with it, the question's slice
session by session (ops, the variables they read and wrote, evidence status, the run's blame).
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``trace`` command group to the CLI."""
    trace_app = typer.Typer(help="Inspect a run's memory evolution graphs.", no_args_is_help=True)

    @trace_app.callback()
    def _group() -> None:
        """Inspect a run's memory evolution graphs."""

    @trace_app.command("show")
    def show_cmd(
        run_dir: Annotated[str, typer.Argument(help="Run directory (graphs/<conversation>.jsonl.gz or graphs.sqlite).")],
        question: Annotated[Optional[str], typer.Option("--question", "-q", help="QA id to show the slice of.")] = None,
        conversation: Annotated[Optional[str], typer.Option("--conversation", "-c", help="Only this conversation.")] = None,
        full: Annotated[bool, typer.Option("--full", help="Print values whole instead of a short preview.")] = False,
        blame: Annotated[bool, typer.Option("--blame/--no-blame", help="Show RUN_DIR/blame.json's verdict (--no-blame: "
                                                                       "label a failure blind to the attributor).")] = True,
    ) -> None:
        """List a run's questions, or print one question's slice: evidence status, blame, ops, memory versions."""
        from memtrace_opt.interop.trace_text import show

        for line in show(run_dir, question, conversation, full=full, with_blame=blame):
            typer.echo(line)

    app.add_typer(trace_app, name="trace")
