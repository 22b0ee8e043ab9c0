"""Any served model (OpenAI, Ollama, vLLM, a llama.cpp server...) through LiteLLM, behind ``LMClient``.

The API key is read from the environment variable named in the config at each call and passed
straight to LiteLLM: it is never an attribute of the client, so it cannot leak through ``repr``,
``vars()``, pickling, cache keys, run records or logs. Error messages are scrubbed of it too.

Retries are ours, not LiteLLM's, so they are the same for every provider: a 429, a 5xx, a timeout or
a refused connection is retried ``num_retries`` times with exponential backoff and full jitter,
waiting at least what a ``Retry-After`` header asks; anything else (a wrong key, a bad request) fails
at once. The final error is one line naming the host, the status and the model.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any, Callable
from urllib.parse import urlparse

from memtrace_opt.errors import LMError
from memtrace_opt.lm.base import LMResult

__all__ = ["LiteLLMClient", "retry_delay", "retryable"]

#: HTTP statuses worth another try: rate limited, or the server (or a proxy) failing for now.
RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


def _status(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    if code is None:
        code = getattr(getattr(exc, "response", None), "status_code", None)
    return int(code) if isinstance(code, int) else None


def retryable(exc: BaseException) -> bool:
    """Whether a failed call may succeed if repeated: a retryable status, a timeout or a connection error."""
    status = _status(exc)
    if status is not None:
        return status in RETRY_STATUSES
    name = type(exc).__name__.lower()
    return any(k in name for k in ("timeout", "connection", "serviceunavailable", "ratelimit", "internalserver"))


def _retry_after(exc: BaseException) -> float | None:
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None or not hasattr(headers, "get"):
        return None
    value = headers.get("retry-after") or headers.get("Retry-After")  # httpx headers ignore case; dicts do not
    try:
        return max(0.0, float(value)) if value is not None else None
    except (TypeError, ValueError):
        return None


def retry_delay(attempt: int, exc: BaseException, *, base_s: float = 1.0, cap_s: float = 60.0,
                rng: Callable[[], float] = random.random) -> float:
    """Seconds to wait before retry ``attempt`` (1-based): full jitter over ``base·2^(attempt-1)``, capped,
    and never less than the server's ``Retry-After``."""
    backoff: float = rng() * min(cap_s, base_s * 2 ** (attempt - 1))  # int ** int is typed Any
    asked = _retry_after(exc)
    return max(backoff, asked) if asked is not None else backoff


def _litellm() -> Any:
    """Import LiteLLM lazily, with the bundled cost map (else its first call does a network lookup) and
    without its "Give Feedback / Get Help" banner, which it prints on stdout at every failed call (stdout
    is for a command's result; our retries and the one-line error say what happened)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


class LiteLLMClient:
    """A remote chat model; ``model`` is a LiteLLM model string such as ``openai/gpt-4o-mini``."""

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key_env: str | None = None,
        num_retries: int = 4,
        timeout_s: float = 600.0,
        backoff_s: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if "/" not in model:
            raise LMError(
                f"litellm model {model!r} has no provider prefix: expected e.g. 'openai/gpt-4o-mini' "
                "or 'ollama_chat/qwen2.5'"
            )
        self.model = model
        self.api_base = api_base
        self.api_key_env = api_key_env
        self.num_retries = num_retries
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s
        self._sleep = sleep
        self.model_id = f"litellm/{model}@{api_base}" if api_base else f"litellm/{model}"

    def __repr__(self) -> str:
        return f"LiteLLMClient(model={self.model!r}, api_base={self.api_base!r}, api_key_env={self.api_key_env!r})"

    def _api_key(self) -> str | None:
        if self.api_key_env is None:
            return None  # LiteLLM falls back to the provider's own variable (OPENAI_API_KEY, ...)
        key = os.environ.get(self.api_key_env)
        if not key:
            raise LMError(
                f"{self.model_id}: the environment variable {self.api_key_env} (named by api_key_env) "
                "is not set; export it with the API key"
            )
        return key

    def chat(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        json_schema: dict[str, Any] | None = None,
        stop: list[str] | None = None,
    ) -> LMResult:
        """One chat completion; ``json_schema`` is sent as an OpenAI-style ``response_format``."""
        key = self._api_key()
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "num_retries": 0,  # retried here, the same way for every provider
            "timeout": self.timeout_s,
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if key is not None:
            kwargs["api_key"] = key
        if stop:
            kwargs["stop"] = list(stop)
        if json_schema is not None:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": json_schema},
            }
        litellm = _litellm()
        started = time.perf_counter()
        attempt = 0
        while True:
            try:
                response = litellm.completion(**kwargs)
                break
            except Exception as exc:
                attempt += 1
                if attempt > self.num_retries or not retryable(exc):
                    raise self._failure(exc, key, attempt) from None
                self._sleep(retry_delay(attempt, exc, base_s=self.backoff_s))
        return self._to_result(response, time.perf_counter() - started)

    def _failure(self, exc: BaseException, key: str | None, attempts: int) -> LMError:
        """One line: host, status, model, what was said, how many tries (the key scrubbed).

        Raised ``from None`` by the caller: the original exception may carry the key in its args or request.
        """
        message = " ".join(f"{type(exc).__name__}: {exc}".split())[:400]
        if key:
            message = message.replace(key, "***")
        host = urlparse(self.api_base).netloc if self.api_base else self.model.split("/", 1)[0]
        # LiteLLM reports a refused connection as a 500 of its own: say what really happened
        status = "no response" if "connection error" in message.lower() else f"status {_status(exc) or 'none'}"
        return LMError(f"{self.model_id}: the call to {host} failed ({status}, {attempts} attempt(s)): {message}")

    def _to_result(self, response: Any, latency: float) -> LMResult:
        choice = response.choices[0]
        usage = getattr(response, "usage", None)
        return LMResult(
            text=choice.message.content or "",
            model=self.model_id,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            latency_s=latency,
            finish_reason=choice.finish_reason or "stop",
        )
