"""``memtrace-opt init [NAME]``: write a ready config into the current folder, from the installed package.

Someone who installed the wheel has no ``experiments/configs/``; this gives them the quickstart (or a
one-system evaluation) on the bundled mini data and the embedded model, and prints the commands that
run it. With no NAME it lists what it can write (:mod:`memtrace_opt.examples`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Add the ``init`` command to the CLI."""

    @app.command("init")
    def init(
        name: Annotated[str | None, typer.Argument(help="Which example to write (none: list them).")] = None,
        directory: Annotated[Path, typer.Option("--dir", help="Folder to write NAME.yaml into.")] = Path("."),
        force: Annotated[bool, typer.Option("--force", help="Overwrite an existing NAME.yaml.")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
    ) -> None:
        """Write a ready config (the quickstart, or one system on the mini data) and print how to run it."""
        from rich.table import Table

        from memtrace_opt.commands.console import Reporter
        from memtrace_opt.examples import list_examples, write_example

        reporter = Reporter(as_json=as_json)
        if name is None:
            examples = list_examples()
            table = Table(title="memtrace-opt init NAME writes NAME.yaml")
            for column in ("name", "run with", "what it is"):
                table.add_column(column)
            for example in examples:
                table.add_row(example.name, f"memtrace-opt {example.command}", example.summary)
            rows = [{"name": e.name, "command": e.command, "summary": e.summary} for e in examples]
            reporter.result(rows, table)
            return
        example, path = write_example(name, directory, force=force)
        steps = example.next_steps(path)
        lines = "\n".join([f"wrote {path}", "next:", *(f"  {step}" for step in steps)])
        reporter.result({"path": str(path), "next": steps}, lines)
