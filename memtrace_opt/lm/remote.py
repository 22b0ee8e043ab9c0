"""Any served model (OpenAI, Ollama, vLLM, a llama.cpp server...) through LiteLLM, behind ``LMClient``.

The API key is read from the environment variable named in the config at each call and passed
straight to LiteLLM: it is never an attribute of the client, so it cannot leak through ``repr``,
``vars()``, pickling, cache keys, run records or logs. Error messages are scrubbed of it too.
"""

from __future__ import annotations

import os
import time
from typing import Any

from memtrace_opt.errors import LMError
from memtrace_opt.lm.base import LMResult

__all__ = ["LiteLLMClient"]


def _litellm() -> Any:
    """Import LiteLLM lazily, with the bundled cost map (else its first call does a network lookup)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return litellm


class LiteLLMClient:
    """A remote chat model; ``model`` is a LiteLLM model string such as ``openai/gpt-4o-mini``."""

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key_env: str | None = None,
        num_retries: int = 2,
        timeout_s: float = 600.0,
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
            "num_retries": self.num_retries,
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
        try:
            response = litellm.completion(**kwargs)
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"
            if key:
                message = message.replace(key, "***")
            # ``from None``: the original exception may carry the key in its args or request object.
            raise LMError(f"{self.model_id}: the call failed: {message}") from None
        return self._to_result(response, time.perf_counter() - started)

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
