"""``memtrace-opt systems``: which memory systems exist, their prompt components and default settings.

What a config's ``system.name``, ``system.prompts`` and ``system.settings`` may say
(:func:`memtrace_opt.systems.catalog.describe_systems`), as a table or as JSON with ``--json``.
"""

from __future__ import annotations

from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Add the ``systems`` command to the CLI."""

    @app.command("systems")
    def systems(
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    ) -> None:
        """List the memory systems with their prompt components and default settings."""
        from rich.table import Table

        from memtrace_opt.commands.console import Reporter
        from memtrace_opt.systems.catalog import describe_systems

        described = describe_systems()
        table = Table(title="memory systems")
        for column in ("system", "prompt components", "published seed (seed: published)", "default settings"):
            table.add_column(column)
        for row in described:
            settings = ", ".join(f"{k}={v}" for k, v in (row.get("settings") or {}).items())
            published = ", ".join(sorted(row.get("published_seed") or {})) or "-"
            table.add_row(row["name"], ", ".join(row.get("prompts") or []), published, settings or "-")
        Reporter(as_json=as_json).result(described, table)
