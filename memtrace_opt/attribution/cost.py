"""Accounting of what one attribution cost: LM calls, tokens, seconds, replays.

The benchmark compares methods on cost as well as accuracy, so every attribution method talks to
its LM through a :class:`MeteredLM` and measures a case with :class:`CostMeter`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from memtrace_opt.attribution.blame import AttributionCost
from memtrace_opt.lm.base import LMClient, LMResult

__all__ = ["CostMeter", "MeteredLM"]


class MeteredLM:
    """An :class:`LMClient` that counts the calls and tokens going through it."""

    def __init__(self, lm: LMClient) -> None:
        self.lm = lm
        self.model_id = lm.model_id
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def __repr__(self) -> str:
        return f"MeteredLM({self.lm!r}, calls={self.calls})"

    def chat(self, messages: list[dict[str, str]], **kw: Any) -> LMResult:
        result = self.lm.chat(messages, **kw)
        self.calls += 1
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        return result

    def totals(self) -> tuple[int, int, int]:
        return self.calls, self.prompt_tokens, self.completion_tokens


@dataclass
class CostMeter:
    """Measures one case: LM usage of the given meters since ``start``, wall time, and replays."""

    meters: list[MeteredLM] = field(default_factory=list)
    replays: int = 0
    replay_calls: int = 0
    replay_prompt_tokens: int = 0
    replay_completion_tokens: int = 0
    _start: tuple[int, int, int] = (0, 0, 0)
    _t0: float = 0.0

    def start(self) -> "CostMeter":
        self._start = self._sum()
        self._t0 = time.perf_counter()
        return self

    def add_replay(self, calls: int, prompt_tokens: int, completion_tokens: int) -> None:
        self.replays += 1
        self.replay_calls += calls
        self.replay_prompt_tokens += prompt_tokens
        self.replay_completion_tokens += completion_tokens

    def cost(self) -> AttributionCost:
        now = self._sum()
        return AttributionCost(
            llm_calls=now[0] - self._start[0] + self.replay_calls,
            prompt_tokens=now[1] - self._start[1] + self.replay_prompt_tokens,
            completion_tokens=now[2] - self._start[2] + self.replay_completion_tokens,
            seconds=round(time.perf_counter() - self._t0, 4),
            replays=self.replays,
        )

    def _sum(self) -> tuple[int, int, int]:
        totals = [m.totals() for m in self.meters]
        return tuple(sum(t[i] for t in totals) for i in range(3))  # type: ignore[return-value]
