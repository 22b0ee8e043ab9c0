"""Throughput of a served model at several client concurrencies: does the server keep its slots busy?

A served endpoint with N slots decodes up to N requests at once; on a CPU, batched decoding is
several times the throughput of one stream, and a client that sends one request at a time leaves
that on the table. This benchmark sends the same fixed set of short, distinct requests at each
concurrency level (a bounded thread pool of LiteLLM clients, the run's own client code, no disk
cache) and reports requests/s and completion tokens/s, each as a ratio to concurrency 1 measured in
the same run. :func:`run_bench_serve` is ``memtrace-opt bench-serve``: it measures an endpoint
already running, or starts the embedded model behind ``memtrace-opt serve``'s server (loopback, a
fresh random key) for the duration of the run. Figures belong in benchmarks, not tests.
"""

from __future__ import annotations

import os
import platform
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

from memtrace_opt.lm.config import ModelConfig
from memtrace_opt.lm.factory import build_base
from memtrace_opt.lm.serve import ServedModel, start_server

__all__ = ["PROMPTS", "measure_levels", "run_bench_serve"]

#: Short, distinct requests (no two share a reply through any cache), answered in a few dozen tokens.
PROMPTS: tuple[str, ...] = tuple(
    f"In one sentence, describe a {thing} to a child." for thing in (
        "river", "volcano", "library", "bicycle", "lighthouse", "glacier", "market", "telescope",
        "harbor", "orchard", "desert", "bridge", "forest", "museum", "comet", "windmill"))


def _level(chat: Callable[[str], Any], prompts: Sequence[str], concurrency: int) -> dict[str, Any]:
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="bench-serve") as pool:
        replies = list(pool.map(chat, prompts))
    seconds = time.perf_counter() - started
    tokens = sum(int(getattr(r, "completion_tokens", 0) or 0) for r in replies)
    return {"concurrency": concurrency, "requests": len(replies), "seconds": round(seconds, 3),
            "requests_per_s": round(len(replies) / seconds, 3) if seconds else None,
            "tokens_per_s": round(tokens / seconds, 2) if seconds else None, "completion_tokens": tokens}


def measure_levels(client: Any, levels: Sequence[int] = (1, 2, 4), *, requests: int = 8, max_tokens: int = 48,
                   progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Send ``requests`` prompts at each concurrency in ``levels`` through ``client`` (an LMClient); the
    JSON-ready result, with ratios to the first level."""
    if not levels or any(c < 1 for c in levels):
        raise ValueError(f"concurrency levels must be positive, got {list(levels)}")
    prompts = [PROMPTS[i % len(PROMPTS)] + ("" if i < len(PROMPTS) else f" ({i})") for i in range(requests)]

    def chat(prompt: str) -> Any:
        return client.chat([{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=0.0)

    chat(prompts[0])  # warm-up: the server's first request pays for loading caches, not for concurrency
    rows = []
    for level in levels:
        if progress is not None:
            progress(f"bench-serve: {requests} requests at concurrency {level}")
        rows.append(_level(chat, prompts, level))
    base = rows[0]
    for row in rows:
        for key in ("requests_per_s", "tokens_per_s"):
            row[f"{key}_ratio"] = round(row[key] / base[key], 2) if row[key] and base[key] else None
    return {"machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                        "load_average_1m": round(os.getloadavg()[0], 2)},
            "model": getattr(client, "model_id", "?"), "requests": requests, "max_tokens": max_tokens,
            "levels": rows}


def run_bench_serve(*, url: str | None = None, model: str = "qwen-1.5b", api_key_env: str = "MEMTRACE_SERVE_KEY",
                    parallel: int = 4, levels: Sequence[int] = (1, 2, 4), requests: int = 8, max_tokens: int = 48,
                    progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """:func:`measure_levels` on the server at ``url`` (its key in ``api_key_env``), or, with no ``url``, on
    the embedded ``model`` served here with ``parallel`` slots and closed afterwards; ``slots`` in the result
    says which (None: a server run elsewhere, whose slots this run cannot know)."""
    served: ServedModel | None = None
    if url is None:
        api_key_env = "MEMTRACE_BENCH_SERVE_KEY"
        os.environ[api_key_env] = secrets.token_urlsafe(16)
        if progress is not None:
            progress(f"bench-serve: starting the embedded {model} with {parallel} slot(s)")
        served = start_server(model=model, api_key_env=api_key_env, n_parallel=parallel, n_ctx=2048)
        url, model = served.base_url, served.model
    try:
        client = build_base(ModelConfig.model_validate({"provider": "openai_compatible", "model": model, "api_base": url,
                                                        "api_key_env": api_key_env, "num_retries": 0}))
        result = measure_levels(client, levels, requests=requests, max_tokens=max_tokens, progress=progress)
    finally:
        if served is not None:
            served.close()
    result["slots"] = parallel if served is not None else None
    return result
