"""The one LM interface every part of memtrace-opt talks to.

Systems, the judge, attribution and the optimizer's reflection step all call
``LMClient.chat``; the embedded llama.cpp model and any remote endpoint implement it.
Keeping the surface this small is what lets tests swap in a scripted LM and lets the
tracer record every call (model, tokens, latency, cache hit) on the operation that made it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class LMResult:
    """One completed chat call, with the accounting the graph and usage totals need."""

    text: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached: bool = False
    finish_reason: str = "stop"
    #: Prompt tokens the server reused from its KV cache (a shared prefix) instead of processing.
    reused_prompt_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_s": round(self.latency_s, 4),
            "cached": self.cached,
            "finish_reason": self.finish_reason,
            "reused_prompt_tokens": self.reused_prompt_tokens,
        }


@runtime_checkable
class LMClient(Protocol):
    """A chat model. ``model_id`` is its full identity (name + weights hash or endpoint) for cache keys."""

    model_id: str

    def chat(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        json_schema: dict[str, Any] | None = None,
        stop: list[str] | None = None,
    ) -> LMResult: ...


@dataclass
class LMRoles:
    """The three roles a run uses; each may be a different model."""

    task: LMClient
    judge: LMClient
    reflection: LMClient
    extra: dict[str, LMClient] = field(default_factory=dict)
