"""``memtrace-opt serve``: the embedded model as an OpenAI-compatible endpoint until Ctrl-C."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Annotated, Optional

import typer

from memtrace_opt.commands.console import stamped as _say

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the CLI."""

    @app.command("serve")
    def serve(
        model: Annotated[str, typer.Option(help="Embedded model tier (qwen-1.5b or qwen-0.5b).")] = "qwen-1.5b",
        gguf: Annotated[Optional[Path], typer.Option(help="Serve this GGUF file instead of an embedded tier.")] = None,
        host: Annotated[str, typer.Option(help="Address to listen on (loopback unless --allow-remote).")]
        = "127.0.0.1",
        port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free one).")] = 8080,
        api_key_env: Annotated[str, typer.Option(help="Environment variable holding the required API key.")]
        = "MEMTRACE_SERVE_KEY",
        parallel: Annotated[int, typer.Option(min=1, help="Slots: requests decoded concurrently.")] = 2,
        n_ctx: Annotated[int, typer.Option(min=512, help="Context tokens per slot.")] = 8192,
        threads: Annotated[Optional[int], typer.Option(min=1, help="Model threads (default: all cores).")] = None,
        speculative: Annotated[str, typer.Option(help="none, ngram_mod or ngram_simple.")] = "none",
        allow_remote: Annotated[bool, typer.Option(help="Allow a non-loopback --host.")] = False,
    ) -> None:
        """Serve a model over HTTP (OpenAI chat completions) for other processes; Ctrl-C stops it.

        Point a config at it with `provider: openai_compatible`, `api_base` the printed URL, `model`
        the printed name and `api_key_env` the same variable.
        """
        from memtrace_opt.lm.serve import start_server

        served = start_server(model=model, gguf=gguf, host=host, port=port, api_key_env=api_key_env,
                              n_parallel=parallel, n_ctx=n_ctx, threads=threads, speculative=speculative,
                              allow_remote=allow_remote)
        _say(f"serving {served.model} at {served.base_url} ({parallel} slot(s); key from ${api_key_env}); "
             "Ctrl-C stops it")
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            while not stop.wait(1.0):
                pass
        finally:
            served.close()
            _say("server stopped")
