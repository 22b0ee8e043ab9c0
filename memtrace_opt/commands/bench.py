"""``memtrace-opt bench-trace``: what tracing costs, measured on this machine.

Runs :func:`memtrace_opt.bench.trace.run_benchmarks` (record overhead, pipeline slowdown, lineage query
time, graph save/load speed, each against its goal) and prints the figures, or one JSON object.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``bench-trace`` to the CLI."""

    @app.command("bench-trace")
    def bench_trace(
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
        quick: Annotated[bool, typer.Option("--quick", help="Smaller graphs and fewer rounds (for smoke tests).")] = False,
    ) -> None:
        """Measure tracing overhead, lineage query time and graph save/load speed on this machine."""
        from memtrace_opt.bench.trace import run_benchmarks

        result = run_benchmarks(quick=quick)
        if as_json:
            typer.echo(json.dumps(result))
            return
        for key, value in result.items():
            typer.echo(f"{key}: {value}")
