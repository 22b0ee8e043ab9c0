"""The embedded model: llama.cpp in-process through xllamacpp, behind ``LMClient``.

Why in-process: no server to start, no port to configure, nothing to download at run time. Why a
process-wide singleton per (tier, n_ctx): loading costs seconds and ~2 GB, and every role that
asks for the same model must share one copy. Why one slot and a call lock: on a small CPU one
request at a time is as fast as batching, and a single slot keeps the previous prompt in its KV
cache, so the long shared prefix of DSPy/mem0 prompts is not re-processed on every call.

Speculative decoding (``speculative``): llama.cpp drafts tokens from n-grams already seen — in the
prompt or in earlier replies — and the model verifies a whole draft in one batch. No second model
is needed, and at temperature 0 only drafts the model would have produced are accepted, so the
output text is the same. It pays where outputs copy text (Mem0's update decision re-lists every
memory; extraction quotes turns); elsewhere drafts are rejected and cost a little. ``ngram_mod``
learns n-grams across calls; ``ngram_simple`` looks up the current prompt (settings measured in
shared/NOTES.md: n=3, m=16, one hit). ``draft`` drafts with the smaller model of the same family (the
0.5B tier, same tokenizer) instead: it guesses text no earlier n-gram holds, at the price of running a
second model; ``draft+ngram_mod`` tries both.

xllamacpp also opens an HTTP listener on 127.0.0.1 (random port). It is protected with a random
API key generated here and never stored on the Python object, so other local users cannot drive
the model through it.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from pathlib import Path
from typing import Any

from memtrace_opt.errors import LMError
from memtrace_opt.lm.base import LMResult
from memtrace_opt.lm.embedded_model import embedded_model_id, ensure_model, tier_of

__all__ = ["SPECULATIVE_MODES", "EmbeddedLlama", "LazyEmbedded", "get_embedded"]

# Host-RAM cache of evicted prompt states (llama.cpp's default is 8 GiB). A few hundred MiB lets
# two alternating prompts (extract / update) both keep their prefixes without crowding the machine.
_PROMPT_CACHE_MIB = 512

#: The speculative-decoding modes a config may name (``models.<role>.speculative``).
SPECULATIVE_MODES = ("none", "ngram_mod", "ngram_simple", "draft", "draft+ngram_mod")
#: The draft model's tier for ``draft`` speculation (same family and tokenizer as every larger tier).
DRAFT_TIER = "qwen-0.5b"
#: Tokens drafted per step, at most and at least, and the draft's minimum token probability to go on.
_DRAFT_N_MAX, _DRAFT_N_MIN, _DRAFT_P_MIN = 16, 0, 0.75

_registry: dict[tuple[str, int, str], EmbeddedLlama] = {}
_registry_lock = threading.Lock()


def _speculate(params: Any, mode: str) -> None:
    """Set llama.cpp's n-gram speculation on ``params`` (``none`` leaves it off)."""
    import xllamacpp

    if mode not in SPECULATIVE_MODES:
        raise LMError(f"unknown speculative mode {mode!r}; expected one of {SPECULATIVE_MODES}")
    if mode == "none":
        return
    kinds = xllamacpp.common_speculative_type
    if mode.startswith("draft"):
        if Path(params.model.path).name == tier_of(DRAFT_TIER).filename:
            raise LMError(f"speculative mode {mode!r} drafts with {DRAFT_TIER}: it cannot speed up {DRAFT_TIER} itself")
        draft = params.speculative.draft
        draft.mparams.path = str(ensure_model(DRAFT_TIER))
        draft.n_max, draft.n_min, draft.p_min = _DRAFT_N_MAX, _DRAFT_N_MIN, _DRAFT_P_MIN
        draft.cpuparams.n_threads = params.cpuparams.n_threads
        draft.cpuparams_batch.n_threads = params.cpuparams_batch.n_threads
        params.speculative.types = [kinds.COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE] + (
            [kinds.COMMON_SPECULATIVE_TYPE_NGRAM_MOD] if mode.endswith("ngram_mod") else [])
    elif mode == "ngram_mod":
        params.speculative.types = [kinds.COMMON_SPECULATIVE_TYPE_NGRAM_MOD]
    else:
        params.speculative.types = [kinds.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE]
        simple = params.speculative.ngram_simple
        simple.size_n, simple.size_m, simple.min_hits = 3, 16, 1


def server_params(model_path: Path, *, n_ctx: int, threads: int, speculative: str = "none", api_key: str,
                  n_parallel: int = 1, host: str = "127.0.0.1", port: int = 0, alias: str | None = None) -> Any:
    """llama.cpp server parameters for one model: loopback listener behind ``api_key``, fail-loud overflow."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(model_path)
    params.n_ctx = n_ctx
    params.n_parallel = n_parallel
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.api_keys = [api_key]
    params.hostnames = [host]
    if port:
        params.port = port
    if alias:
        params.model_alias = {alias}
    params.ctx_shift = False  # overflow must fail loudly, not silently drop the prompt's start
    params.cache_ram_mib = _PROMPT_CACHE_MIB
    params.ui = False
    params.endpoint_slots = False
    params.verbosity = 0
    _speculate(params, speculative)
    return params


def _load_server(model_path: Path, *, n_ctx: int, threads: int, speculative: str = "none") -> Any:
    """Start an xllamacpp server for one model; the API key is not kept anywhere in Python."""
    try:
        import xllamacpp
    except ImportError as exc:  # pragma: no cover - xllamacpp is a core dependency
        raise LMError("the embedded model needs xllamacpp: pip install xllamacpp") from exc
    params = server_params(model_path, n_ctx=n_ctx, threads=threads, speculative=speculative,
                           api_key=secrets.token_urlsafe(32))
    try:
        return xllamacpp.Server(params)
    except Exception as exc:
        raise LMError(f"could not load the embedded model {model_path}: {exc}") from exc


def _reused_tokens(response: dict[str, Any]) -> int:
    """Prompt tokens llama.cpp took from its KV cache: ``usage.prompt_tokens_details.cached_tokens``, else
    ``timings.cache_n`` (older servers); 0 when neither is reported."""
    details = (response.get("usage") or {}).get("prompt_tokens_details") or {}
    value = details.get("cached_tokens")
    if value is None:
        value = (response.get("timings") or {}).get("cache_n")
    return int(value) if isinstance(value, (int, float)) else 0


class EmbeddedLlama:
    """A GGUF model run in-process; thread-safe (calls are serialized).

    Prefer :func:`get_embedded`, which returns the shared instance instead of loading again.
    """

    def __init__(
        self,
        tier: str = "qwen-1.5b",
        *,
        n_ctx: int = 8192,
        threads: int | None = None,
        cache_dir: Path | None = None,
        speculative: str = "none",
    ) -> None:
        self.tier = tier
        self.n_ctx = n_ctx
        self.speculative = speculative
        self.threads = threads or os.cpu_count() or 1
        self.model_id = embedded_model_id(tier)
        self.model_path = ensure_model(tier, cache_dir=cache_dir)
        self._call_lock = threading.Lock()
        #: Per call, in call order: (tokens drafted, drafted tokens the model accepted); (0, 0) without
        #: speculation. What ``bench-lm`` reads the acceptance rate per op kind from.
        self.draft_log: list[tuple[int, int]] = []
        #: Per call, in call order, llama.cpp's own timings: (prompt tokens computed, their seconds, tokens
        #: generated, their seconds). Where ``bench-lm`` splits an op kind's time into prefill and decoding.
        self.timing_log: list[tuple[int, float, int, float]] = []
        started = time.perf_counter()
        self._server = _load_server(self.model_path, n_ctx=n_ctx, threads=self.threads, speculative=speculative)
        self.load_s = time.perf_counter() - started

    def __repr__(self) -> str:
        return (f"EmbeddedLlama(model_id={self.model_id!r}, n_ctx={self.n_ctx}, threads={self.threads}, "
                f"speculative={self.speculative!r})")

    def chat(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        json_schema: dict[str, Any] | None = None,
        stop: list[str] | None = None,
    ) -> LMResult:
        """One chat completion; JSON-schema constrained (grammar) when ``json_schema`` is given."""
        request: dict[str, Any] = {
            "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
            "max_tokens": max_tokens,
            "temperature": temperature,
            "cache_prompt": True,
        }
        if stop:
            request["stop"] = list(stop)
        if json_schema is not None:
            request["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": json_schema},
            }
        with self._call_lock:
            server = self._server
            if server is None:
                raise LMError(f"{self.model_id} was closed; get a fresh one with get_embedded()")
            started = time.perf_counter()
            try:
                response = server.handle_chat_completions(request)
            except Exception as exc:  # xllamacpp raises ValueError on malformed requests
                raise LMError(f"{self.model_id}: the request was rejected: {exc}") from exc
            latency = time.perf_counter() - started
            timings = (response.get("timings") or {}) if isinstance(response, dict) else {}
            self.draft_log.append((int(timings.get("draft_n", 0)), int(timings.get("draft_n_accepted", 0))))
            self.timing_log.append((int(timings.get("prompt_n", 0)), float(timings.get("prompt_ms", 0.0)) / 1000,
                                    int(timings.get("predicted_n", 0)), float(timings.get("predicted_ms", 0.0)) / 1000))
        return self._to_result(response, latency)

    def _to_result(self, response: Any, latency: float) -> LMResult:
        if not isinstance(response, dict) or "error" in response or not response.get("choices"):
            error = response.get("error", response) if isinstance(response, dict) else response
            message = error.get("message", error) if isinstance(error, dict) else error
            raise LMError(f"{self.model_id}: {message}")
        choice = response["choices"][0]
        usage = response.get("usage") or {}
        return LMResult(
            text=(choice.get("message") or {}).get("content") or "",
            model=self.model_id,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            latency_s=latency,
            finish_reason=choice.get("finish_reason") or "stop",
            reused_prompt_tokens=_reused_tokens(response),
        )

    def close(self) -> None:
        """Release the model (and its listener). Later calls raise LMError."""
        with self._call_lock:
            self._server = None
        with _registry_lock:
            if _registry.get((self.tier, self.n_ctx, self.speculative)) is self:
                del _registry[(self.tier, self.n_ctx, self.speculative)]


def get_embedded(
    tier: str = "qwen-1.5b",
    *,
    n_ctx: int = 8192,
    threads: int | None = None,
    cache_dir: Path | None = None,
    speculative: str = "none",
) -> EmbeddedLlama:
    """The process-wide instance for (tier, n_ctx, speculative), loaded on first use.

    ``threads`` only matters for the call that loads it; later callers share whatever was loaded.
    """
    key = (tier, n_ctx, speculative)
    with _registry_lock:
        instance = _registry.get(key)
        if instance is None:
            instance = EmbeddedLlama(tier, n_ctx=n_ctx, threads=threads, cache_dir=cache_dir, speculative=speculative)
            _registry[key] = instance
        return instance


class LazyEmbedded:
    """An :class:`LMClient` for an embedded tier that loads the shared model on its first call.

    Building a run's roles must not cost seconds and gigabytes when a step (or a test) never
    calls the model; ``model_id`` is known without loading, from the pinned hash.
    """

    def __init__(self, tier: str = "qwen-1.5b", *, n_ctx: int = 8192, threads: int | None = None,
                 speculative: str = "none") -> None:
        self.tier, self.n_ctx, self.threads, self.speculative = tier, n_ctx, threads, speculative
        self.model_id = embedded_model_id(tier)

    def __repr__(self) -> str:
        return f"LazyEmbedded(model_id={self.model_id!r}, n_ctx={self.n_ctx})"

    def chat(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        json_schema: dict[str, Any] | None = None,
        stop: list[str] | None = None,
    ) -> LMResult:
        model = get_embedded(self.tier, n_ctx=self.n_ctx, threads=self.threads, speculative=self.speculative)
        return model.chat(messages, max_tokens=max_tokens, temperature=temperature, json_schema=json_schema, stop=stop)
