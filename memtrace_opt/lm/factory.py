"""Build the LM clients a run uses from its config, composed the same way every time.

Every client is ``ConfiguredLM(AccountedLM(CachedLM(base)))``: the role's temperature and
max_tokens become defaults first (so they are part of the cache key), then every call is counted
and published to observers (cache hits too), then the disk cache, then the model. Roles whose
model settings are equal share one base client and one cache connection, so an embedded model is
loaded once however many roles use it; each role keeps its own accounting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memtrace_opt.errors import LMError
from memtrace_opt.lm.base import LMClient, LMResult, LMRoles
from memtrace_opt.lm.cache import CachedLM
from memtrace_opt.lm.config import ModelConfig
from memtrace_opt.lm.embedded import LazyEmbedded
from memtrace_opt.lm.remote import LiteLLMClient
from memtrace_opt.lm.usage import AccountedLM, UsageLedger

__all__ = ["ConfiguredLM", "build_base", "build_lm", "build_roles", "CACHE_FILE"]

CACHE_FILE = "lm_cache.sqlite"


class ConfiguredLM:
    """Applies a role's configured ``max_tokens``/``temperature`` when a call does not give them."""

    def __init__(self, client: LMClient, *, max_tokens: int, temperature: float) -> None:
        self.client = client
        self.model_id = client.model_id
        self.max_tokens = max_tokens
        self.temperature = temperature

    def __repr__(self) -> str:
        return f"ConfiguredLM({self.client!r}, max_tokens={self.max_tokens}, temperature={self.temperature})"

    def chat(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        json_schema: dict[str, Any] | None = None,
        stop: list[str] | None = None,
    ) -> LMResult:
        return self.client.chat(
            messages,
            max_tokens=self.max_tokens if max_tokens is None else max_tokens,
            temperature=self.temperature if temperature is None else temperature,
            json_schema=json_schema,
            stop=stop,
        )


def build_base(cfg: ModelConfig) -> LMClient:
    """The bare model client for ``cfg`` (an embedded model is loaded lazily, on its first call)."""
    if cfg.provider == "embedded":
        return LazyEmbedded(cfg.model, n_ctx=cfg.n_ctx, threads=cfg.threads, speculative=cfg.speculative)
    if cfg.provider in ("litellm", "openai_compatible"):
        model = cfg.model if cfg.provider == "litellm" else f"openai/{cfg.model}"
        return LiteLLMClient(model, api_base=cfg.api_base, api_key_env=cfg.api_key_env, num_retries=cfg.num_retries,
                             timeout_s=cfg.timeout_s, backoff_s=cfg.backoff_s)
    raise LMError(f"unknown model provider {cfg.provider!r}: expected 'embedded', 'litellm' or 'openai_compatible'")


def _shared_key(cfg: ModelConfig) -> str:
    """What identifies the underlying model: everything but the per-role sampling defaults."""
    return cfg.model_dump_json(exclude={"temperature", "max_tokens"})


def _compose(base: LMClient, cfg: ModelConfig, ledger: UsageLedger | None, role: str) -> LMClient:
    accounted = AccountedLM(base, ledger, role)
    return ConfiguredLM(accounted, max_tokens=cfg.max_tokens, temperature=cfg.temperature)


def _cached(base: LMClient, cache_dir: Path | None, cache_sampled: bool) -> LMClient:
    if cache_dir is None:
        return base
    return CachedLM(base, Path(cache_dir) / CACHE_FILE, cache_sampled=cache_sampled)


def build_lm(
    cfg: ModelConfig,
    *,
    cache_dir: Path | None = None,
    ledger: UsageLedger | None = None,
    role: str = "task",
    cache_sampled: bool = False,
) -> LMClient:
    """One role's client: cached in ``cache_dir/lm_cache.sqlite`` (no cache when None), accounted."""
    return _compose(_cached(build_base(cfg), cache_dir, cache_sampled), cfg, ledger, role)


def build_roles(
    task_cfg: ModelConfig,
    judge_cfg: ModelConfig | None = None,
    reflection_cfg: ModelConfig | None = None,
    *,
    cache_dir: Path | None = None,
    ledger: UsageLedger | None = None,
    extra: dict[str, ModelConfig] | None = None,
    cache_sampled: bool = False,
) -> LMRoles:
    """The task, judge and reflection clients (a missing config means "same as task").

    Equal model settings share one base client and cache; each role is accounted under its name.
    """
    shared: dict[str, LMClient] = {}

    def make(cfg: ModelConfig, role: str) -> LMClient:
        key = _shared_key(cfg)
        if key not in shared:
            shared[key] = _cached(build_base(cfg), cache_dir, cache_sampled)
        return _compose(shared[key], cfg, ledger, role)

    return LMRoles(
        task=make(task_cfg, "task"),
        judge=make(judge_cfg or task_cfg, "judge"),
        reflection=make(reflection_cfg or task_cfg, "reflection"),
        extra={name: make(cfg, name) for name, cfg in (extra or {}).items()},
    )
