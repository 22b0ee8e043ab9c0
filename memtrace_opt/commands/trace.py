"""``memtrace-opt trace show|follow|unit``: read a run's memory graphs as a person would.

``show`` prints :func:`memtrace_opt.interop.trace_text.show`'s lines: without ``--question`` the run's
questions with their answers and judgements; with it, the question's slice session by session (ops, the
variables they read and wrote, evidence status, the run's blame): the backward view. ``follow`` is the
forward view of one turn or variable (:mod:`memtrace_opt.interop.trace_follow`): where its content went,
which a fact lost at ingestion needs, since it leaves nothing in a question's slice. ``unit`` is one
memory unit's life, version by version.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

__all__ = ["register"]

#: The arguments every ``trace`` view shares, declared once.
RunDir = Annotated[str, typer.Argument(help="Run directory (graphs/<conversation>.jsonl.gz or graphs.sqlite).")]
Full = Annotated[bool, typer.Option("--full", help="Print values whole instead of a short preview.")]
Conversation = Annotated[str, typer.Option("--conversation", "-c", help="The conversation whose graph to read.")]


def register(app: typer.Typer) -> None:
    """Add the ``trace`` command group to the CLI."""
    trace_app = typer.Typer(help="Inspect a run's memory evolution graphs.", no_args_is_help=True)

    @trace_app.callback()
    def _group() -> None:
        """Inspect a run's memory evolution graphs."""

    @trace_app.command("show")
    def show_cmd(
        run_dir: RunDir,
        question: Annotated[Optional[str], typer.Option("--question", "-q", help="QA id to show the slice of.")] = None,
        conversation: Annotated[Optional[str], typer.Option("--conversation", "-c", help="Only this conversation.")] = None,
        full: Full = False,
        blame: Annotated[bool, typer.Option("--blame/--no-blame", help="Show RUN_DIR/blame.json's verdict (--no-blame: "
                                                                       "label a failure blind to the attributor).")] = True,
    ) -> None:
        """List a run's questions, or print one question's slice: evidence status, blame, ops, memory versions."""
        from memtrace_opt.interop.trace_text import show

        for line in show(run_dir, question, conversation, full=full, with_blame=blame):
            typer.echo(line)

    @trace_app.command("follow")
    def follow_cmd(
        run_dir: RunDir,
        variable: Annotated[str, typer.Argument(help="A turn id (D1:7), a variable name (mem:<id>) or id (mem:<id>@2).")],
        conversation: Conversation,
        min_shared: Annotated[Optional[int], typer.Option("--min-shared", min=1, help=(
            "Content words one item of a value must share with the turn to carry it (default: half)."))] = None,
        full: Full = False,
    ) -> None:
        """Follow a turn forward: the ops that read it, then the memory units and contexts that still carry it."""
        from memtrace_opt.interop.trace_follow import follow

        for line in follow(run_dir, conversation, variable, min_shared=min_shared, full=full):
            typer.echo(line)

    @trace_app.command("unit")
    def unit_cmd(
        run_dir: RunDir,
        name: Annotated[str, typer.Argument(help="A memory unit's name (mem:<id>) or any variable name.")],
        conversation: Conversation,
        full: Full = False,
    ) -> None:
        """One memory unit's life: each version, the op that made it (created, updated, deleted), its readers."""
        from memtrace_opt.interop.trace_follow import unit

        for line in unit(run_dir, conversation, name, full=full):
            typer.echo(line)

    app.add_typer(trace_app, name="trace")
