"""Tiny scripted LM clients for LM-layer tests (no model is ever loaded)."""

from __future__ import annotations

import threading
import time
from typing import Any

from memtrace_opt.errors import LMError
from memtrace_opt.lm.base import LMResult


class CountingLM:
    """Answers ``echo:<last message>`` and counts calls; optionally slow or failing."""

    def __init__(self, model_id: str = "fake/counting", *, delay_s: float = 0.0, fail: bool = False) -> None:
        self.model_id = model_id
        self.delay_s = delay_s
        self.fail = fail
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def chat(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        json_schema: dict[str, Any] | None = None,
        stop: list[str] | None = None,
    ) -> LMResult:
        with self._lock:
            self.calls.append(
                {"messages": messages, "max_tokens": max_tokens, "temperature": temperature,
                 "json_schema": json_schema, "stop": stop}
            )
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.fail:
            raise LMError(f"{self.model_id}: scripted failure")
        text = f"echo:{messages[-1]['content']}"
        return LMResult(text=text, model=self.model_id, prompt_tokens=7, completion_tokens=len(text.split()),
                        latency_s=0.25)


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]
