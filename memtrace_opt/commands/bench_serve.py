"""``memtrace-opt bench-serve``: requests/s and tokens/s of a served model at concurrency 1, 2, 4.

Parses the options and runs :func:`memtrace_opt.bench.serve.run_bench_serve`: without ``--url`` it
starts the embedded model behind ``memtrace-opt serve``'s server (loopback, a fresh random key,
``--parallel`` slots) for the duration of the run; with ``--url`` it measures an endpoint already
running (key from ``--api-key-env``). Prints one line per level, or the JSON with ``--json``.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from memtrace_opt.errors import ConfigError

__all__ = ["register"]


def _levels(text: str) -> list[int]:
    """``"1,2,4"`` → ``[1, 2, 4]``; anything else is a ConfigError naming ``--levels``."""
    try:
        wanted = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError("--levels", None, f"expected comma-separated integers, got {text!r}") from None
    if not wanted or min(wanted) < 1:
        raise ConfigError("--levels", None, f"expected positive concurrency levels, got {text!r}")
    return wanted


def register(app: typer.Typer) -> None:
    """Add ``bench-serve`` to the CLI."""

    @app.command("bench-serve")
    def bench_serve(
        url: Annotated[Optional[str], typer.Option(help="Base URL of a running OpenAI-compatible server "
                                                        "(…/v1); default: start the embedded model.")] = None,
        model: Annotated[str, typer.Option(help="Model name the server knows (with --url), or the embedded tier.")]
        = "qwen-1.5b",
        api_key_env: Annotated[str, typer.Option(help="Environment variable holding the key (with --url).")]
        = "MEMTRACE_SERVE_KEY",
        parallel: Annotated[int, typer.Option(min=1, help="Slots of the server started here.")] = 4,
        levels: Annotated[str, typer.Option(help="Concurrency levels, comma-separated; the first is the baseline.")]
        = "1,2,4",
        requests: Annotated[int, typer.Option(min=1, help="Requests per level.")] = 8,
        max_tokens: Annotated[int, typer.Option(min=1, help="Completion tokens per request, at most.")] = 48,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
        quiet: Annotated[bool, typer.Option("--quiet", help="No progress lines.")] = False,
    ) -> None:
        """Measure a served model's throughput at several client concurrencies (ratios to the first level)."""
        from memtrace_opt.bench.serve import run_bench_serve
        from memtrace_opt.commands.console import Reporter

        report = Reporter(quiet=quiet, as_json=as_json)
        wanted = _levels(levels)
        result = run_bench_serve(url=url, model=model, api_key_env=api_key_env, parallel=parallel, levels=wanted,
                                 requests=requests, max_tokens=max_tokens, progress=report.progress)
        lines = [f"concurrency {r['concurrency']}: {r['requests_per_s']} req/s (x{r['requests_per_s_ratio']}), "
                 f"{r['tokens_per_s']} tok/s (x{r['tokens_per_s_ratio']})" for r in result["levels"]]
        report.result(result, *lines)
        best = max(result["levels"], key=lambda r: r["tokens_per_s"] or 0)
        report.summary(f"bench-serve: best at concurrency {best['concurrency']}: x{best['tokens_per_s_ratio']} "
                       f"tokens/s over concurrency {wanted[0]}")
