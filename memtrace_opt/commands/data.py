"""``memtrace-opt data ...``: look at a dataset before spending hours running a system on it."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Optional

import typer


class DatasetChoice(str, Enum):
    locomo = "locomo"
    longmemeval = "longmemeval"
    mini = "mini"


def register(app: typer.Typer) -> None:
    """Add the ``data`` command group to the CLI."""
    data_app = typer.Typer(help="Inspect datasets.", no_args_is_help=True)

    @data_app.callback()
    def _group() -> None:
        """Inspect datasets (LoCoMo, LongMemEval, the bundled mini set)."""

    @data_app.command("stats")
    def stats(
        dataset: Annotated[DatasetChoice, typer.Option("--dataset", help="Dataset name.")],
        path: Annotated[
            Optional[str], typer.Option("--path", help="File or http(s) URL (mini: bundled if omitted).")
        ] = None,
        audit: Annotated[Optional[str], typer.Option("--audit", help="LoCoMo gold-label audit file.")] = None,
        include_adversarial: Annotated[
            bool, typer.Option("--include-adversarial", help="Score LoCoMo category 5 too.")
        ] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    ) -> None:
        """Print conversation, session, turn and question counts."""
        from rich.table import Table

        from memtrace_opt.commands.console import Reporter
        from memtrace_opt.data import dataset_stats, load_dataset

        ds = load_dataset(dataset.value, path, audit_path=audit, include_adversarial=include_adversarial)
        stats = dataset_stats(ds)
        table = Table(title=f"{dataset.value} dataset")
        table.add_column("count")
        table.add_column("value", justify="right")
        for key, value in stats.items():
            table.add_row(key, _inline(value))
        Reporter(as_json=as_json).result(stats, table)

    app.add_typer(data_app, name="data")


def _inline(value: Any) -> str:
    """A nested count (per category, per conversation) on one line."""
    if isinstance(value, dict):  # per category, per flag
        return ", ".join(f"{k}: {v}" for k, v in value.items())
    return str(value)
