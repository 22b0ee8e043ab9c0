"""``memtrace-opt export otel RUN_DIR``: the run's graphs as OpenTelemetry traces (see :mod:`memtrace_opt.interop.otel`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def register(app: typer.Typer) -> None:
    """Add the ``export`` command group to the CLI."""
    export = typer.Typer(help="Export a run to other tools.", no_args_is_help=True)
    app.add_typer(export, name="export")

    @export.command("otel")
    def otel(
        run_dir: Annotated[str, typer.Argument(help="Run directory with graphs/ (and blame.json).")],
        endpoint: Annotated[Optional[str], typer.Option(
            "--endpoint", help="OTLP/HTTP endpoint, e.g. http://127.0.0.1:6006 (Phoenix) or a collector.")] = None,
        out: Annotated[Optional[Path], typer.Option("--out", help="Write the spans to this JSON file instead.")] = None,
        content: Annotated[bool, typer.Option("--content/--no-content",
                                              help="Include message, memory, query and answer text in spans.")] = True,
    ) -> None:
        """One span per operation (GenAI and OpenInference attributes), sessions as parents, blame as events."""
        from memtrace_opt.interop.otel import export_run

        count = export_run(run_dir, endpoint=endpoint, out=out, content=content)
        typer.echo(f"exported {count} spans to {endpoint or out}")
