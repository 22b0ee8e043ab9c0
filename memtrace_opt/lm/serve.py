"""The embedded model (or any GGUF file) behind an OpenAI-compatible HTTP endpoint.

Why: several processes — parallel experiments, a Ray worker per conversation, another tool — can
then share one loaded model instead of each loading its own 1–2 GB copy; and every client path
(``provider: openai_compatible``) is tested against a real server, not a mocked transport.

Safety: the listener binds a loopback address unless the caller names another host explicitly, and
it always requires an API key, read from an environment variable (never a command-line argument:
those are visible to every local user in ``ps``). ``n_parallel`` slots let concurrent requests
batch their generation; the throughput settings (speculative decoding) are the embedded model's.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memtrace_opt.errors import ConfigError, LMError
from memtrace_opt.lm.embedded import server_params
from memtrace_opt.lm.embedded_model import embedded_model_id, ensure_model

__all__ = ["ServedModel", "is_loopback", "start_server"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost`` or a loopback IP)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class ServedModel:
    """A running server: its base URL (``…/v1``), the model name clients send, and the server handle."""

    base_url: str
    model: str
    server: Any

    def close(self) -> None:
        """Drop the server (llama.cpp stops the listener when the object is released)."""
        self.server = None


def start_server(*, model: str = "qwen-1.5b", gguf: Path | None = None, host: str = "127.0.0.1", port: int = 0,
                 api_key_env: str = "MEMTRACE_SERVE_KEY", n_parallel: int = 2, n_ctx: int = 8192,
                 threads: int | None = None, speculative: str = "none", allow_remote: bool = False) -> ServedModel:
    """Load the model and start listening; the key comes from ``api_key_env`` (required)."""
    key = os.environ.get(api_key_env, "")
    if not key:
        raise ConfigError("--api-key-env", None, f"the environment variable {api_key_env} is not set: export a "
                          "secret key there; clients send it as their API key")
    if not is_loopback(host) and not allow_remote:
        raise ConfigError("--host", None, f"{host!r} is not a loopback address; pass --allow-remote to listen "
                          "beyond this machine")
    if n_parallel < 1:
        raise ConfigError("--parallel", None, f"expected at least 1 slot, got {n_parallel}")
    path = Path(gguf) if gguf is not None else ensure_model(model)
    if not path.is_file():
        raise ConfigError("--gguf", None, f"no model file at {path}")
    name = embedded_model_id(model) if gguf is None else path.stem
    # Each slot gets n_ctx tokens of context (llama.cpp splits the total across slots).
    params = server_params(path, n_ctx=n_ctx * n_parallel, threads=threads or os.cpu_count() or 1,
                           speculative=speculative, api_key=key, n_parallel=n_parallel, host=host, port=port,
                           alias=name)
    try:
        import xllamacpp

        server = xllamacpp.Server(params)
    except Exception as exc:
        raise LMError(f"could not start the server for {path}: {exc}") from exc
    address = str(server.listening_address).rstrip("/")
    return ServedModel(f"{address}/v1", name, server)
