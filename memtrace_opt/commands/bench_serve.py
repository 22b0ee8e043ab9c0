"""``memtrace-opt bench-serve``: requests/s and tokens/s of a served model at concurrency 1, 2, 4.

Without ``--url`` it starts the embedded model behind ``memtrace-opt serve``'s server (loopback, a
fresh random key, ``--parallel`` slots) for the duration of the run; with ``--url`` it measures an
endpoint already running (key from ``--api-key-env``). See :mod:`memtrace_opt.serve_bench`.
"""

from __future__ import annotations

import os
import secrets
from typing import Annotated, Any, Optional

import typer

__all__ = ["register"]


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
        from memtrace_opt.commands.console import Reporter
        from memtrace_opt.errors import ConfigError
        from memtrace_opt.lm.config import ModelConfig
        from memtrace_opt.lm.factory import build_base
        from memtrace_opt.serve_bench import measure_levels

        report = Reporter(quiet=quiet, as_json=as_json)
        try:
            wanted = [int(x) for x in levels.split(",") if x.strip()]
        except ValueError:
            raise ConfigError("--levels", None, f"expected comma-separated integers, got {levels!r}") from None
        if not wanted or min(wanted) < 1:
            raise ConfigError("--levels", None, f"expected positive concurrency levels, got {levels!r}")
        served: Any = None
        if url is None:
            from memtrace_opt.lm.serve import start_server

            api_key_env = "MEMTRACE_BENCH_SERVE_KEY"
            os.environ[api_key_env] = secrets.token_urlsafe(16)
            report.say(f"bench-serve: starting the embedded {model} with {parallel} slot(s)")
            served = start_server(model=model, api_key_env=api_key_env, n_parallel=parallel, n_ctx=2048)
            url, model = served.base_url, served.model
        try:
            client = build_base(ModelConfig(provider="openai_compatible", model=model, api_base=url,
                                            api_key_env=api_key_env, num_retries=0))
            result = measure_levels(client, wanted, requests=requests, max_tokens=max_tokens,
                                    progress=report.progress)
        finally:
            if served is not None:
                served.close()
        result["slots"] = parallel if served is not None else None
        lines = [f"concurrency {r['concurrency']}: {r['requests_per_s']} req/s (x{r['requests_per_s_ratio']}), "
                 f"{r['tokens_per_s']} tok/s (x{r['tokens_per_s_ratio']})" for r in result["levels"]]
        report.result(result, *lines)
        best = max(result["levels"], key=lambda r: r["tokens_per_s"] or 0)
        report.summary(f"bench-serve: best at concurrency {best['concurrency']}: x{best['tokens_per_s_ratio']} "
                       f"tokens/s over concurrency {wanted[0]}")
