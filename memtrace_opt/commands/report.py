"""``memtrace-opt report RUN_DIR``: one self-contained HTML file to look at a run instead of reading JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def register(app: typer.Typer) -> None:
    """Add the ``report`` command to the CLI."""

    @app.command("report")
    def report(
        run_dir: Annotated[Path, typer.Argument(help="Run directory (from eval, attribute or optimize).")],
        out: Annotated[Optional[Path], typer.Option("--out", help="Output file (default RUN_DIR/report.html).")] = None,
        bench: Annotated[
            Optional[Path],
            typer.Option("--bench", help="Attribution benchmark JSON (default: RUN_DIR/attribution_bench.json)."),
        ] = None,
        compare: Annotated[
            Optional[list[Path]],
            typer.Option("--compare", help="Another optimize run whose round scores to plot too (repeatable)."),
        ] = None,
        max_graphs: Annotated[
            int, typer.Option("--max-graphs", min=0, help="Draw graphs for at most this many failed questions.")
        ] = 100,
        max_nodes: Annotated[int, typer.Option("--max-nodes", min=8, help="Nodes drawn per question slice.")] = 34,
    ) -> None:
        """Write an offline HTML report: summary, failed questions with their graph slices and blame, error-type
        charts, accuracy per optimization round, prompt diffs, attribution benchmark tables."""
        from memtrace_opt.report import QuestionOptions, collect_run, write_report

        data = collect_run(run_dir, bench_path=bench, compare=compare or ())
        path = write_report(data, out, QuestionOptions(max_graphs=max_graphs, max_nodes=max_nodes))
        for note in dict.fromkeys(data.notes):
            typer.echo(f"note: {note}", err=True)
        typer.echo(f"{path}  ({len(data.failed)} failed questions, {len(data.blame)} blamed)")
