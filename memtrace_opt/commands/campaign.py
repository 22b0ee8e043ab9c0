"""``memtrace-opt campaign run|status FOLDER``: experiments that outlive their machine.

``run`` starts a campaign or continues it (the same command): each method of ``campaign.yaml`` in
order, resumed from its checkpoint, with the LM answers imported from and exported to the
committed chunks in ``FOLDER/state`` (see :mod:`memtrace_opt.campaign`). Kill it anywhere, commit
the folder, and rerun the command on any clone. ``status`` prints where the campaign stands
without running anything.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Optional

import typer

__all__ = ["register", "status_table"]


def status_table(report: Any) -> Any:
    """The methods of a campaign as a rich table."""
    from rich.table import Table

    table = Table(title=f"campaign {report.name}")
    for col in ("method", "status", "rounds done", "held-out %", "LM calls"):
        table.add_column(col, justify="left" if col in ("method", "status") else "right")
    for m in report.methods:
        accuracy = "-" if m.heldout_accuracy is None else f"{100 * m.heldout_accuracy:.1f}"
        table.add_row(m.method, m.text().split(": ", 1)[1], f"{m.round}/{m.rounds}" if m.status != "not started"
                      else "-", accuracy, str(m.llm_calls))
    return table


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (a machine being taken away, ``kill``) stops the campaign as Ctrl-C does: the paid-for LM
    answers are exported on the way out instead of the process dying without its ``finally``.

    SIGINT too when it is ignored: a shell starts a background job (``nohup ... &``) with SIGINT ignored,
    and Python then installs no Ctrl-C handler, so ``kill -INT`` would do nothing at all.
    """

    def interrupt(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = [signal.SIGTERM] + ([signal.SIGINT] if signal.getsignal(signal.SIGINT) == signal.SIG_IGN else [])
    previous = {sig: signal.signal(sig, interrupt) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def register(app: typer.Typer) -> None:
    """Add the ``campaign`` command group to the CLI."""
    group = typer.Typer(help="Start, continue or inspect a campaign (experiments/campaigns/NAME/).",
                        no_args_is_help=True)
    app.add_typer(group, name="campaign")

    @group.command("run")
    def run_command(
        ctx: typer.Context,
        folder: Annotated[str, typer.Argument(help="Campaign folder (holds campaign.yaml).")],
        stop_after: Annotated[Optional[int], typer.Option(
            "--stop-after", min=1, help="Return once this many methods are finished (to split the work).")] = None,
        quiet: Annotated[bool, typer.Option("--quiet", help="No progress lines.")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print the progress as JSON.")] = False,
        export_every: Annotated[float, typer.Option(
            "--export-every", min=0, help="Minutes between saves of the LM answers while a method runs (0: off).")] = 15,
    ) -> None:
        """Start or continue a campaign: nothing finished is recomputed; commit the folder to keep the work."""
        from memtrace_opt.campaign import run_campaign
        from memtrace_opt.commands.console import Reporter

        report = Reporter(quiet=quiet, as_json=as_json)
        with _sigterm_as_interrupt():
            progress = run_campaign(folder, injected=ctx.obj, progress=report.progress, stop_after=stop_after,
                                    export_every_s=60 * export_every or None)
        report.result(progress.to_dict(), status_table(progress))
        report.summary(str(progress))

    @group.command("status")
    def status_command(
        folder: Annotated[str, typer.Argument(help="Campaign folder (holds campaign.yaml).")],
        as_json: Annotated[bool, typer.Option("--json", help="Print the progress as JSON.")] = False,
    ) -> None:
        """Where a campaign stands: each method's status, LM answers stored, LM time spent (runs nothing)."""
        from memtrace_opt.campaign import campaign_progress
        from memtrace_opt.commands.console import Reporter

        report = Reporter(as_json=as_json)
        progress = campaign_progress(folder)
        report.result(progress.to_dict(), status_table(progress))
        report.summary(str(progress))
