"""What the loop has spent: rollouts, LM calls and tokens — and when to stop spending.

LM calls are counted by observing every call made while the loop runs
(:func:`memtrace_opt.lm.observe.observe_calls`; every factory-built client publishes its calls),
so system, judge, attribution and reflection calls are all counted without touching call sites.
Cached calls count toward the budget like computed ones (a resumed run must make the same
decisions as an uninterrupted one) and are reported apart.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict, dataclass
from typing import Any, Iterator, Mapping

from memtrace_opt.lm.base import LMResult
from memtrace_opt.lm.observe import observe_calls

__all__ = ["LLMBudgetStopper", "Spend", "SpendMeter", "spend_line"]


@dataclass
class Spend:
    """Totals of a run (or of one round): JSON-ready, addable."""

    rollouts: int = 0
    llm_calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["wall_s"] = round(self.wall_s, 3)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Spend:
        return cls(**{k: d.get(k, 0) for k in cls.__dataclass_fields__})

    def __add__(self, other: Spend) -> Spend:
        return Spend(*(getattr(self, f) + getattr(other, f) for f in self.__dataclass_fields__))

    def __sub__(self, other: Spend) -> Spend:
        return Spend(*(getattr(self, f) - getattr(other, f) for f in self.__dataclass_fields__))


class SpendMeter:
    """Live totals: a base carried over from the checkpoint plus what this process observed."""

    def __init__(self, base: Spend | None = None) -> None:
        self.base = base or Spend()
        self._live = Spend()
        self._sources: list[Any] = []
        self._started = time.perf_counter()

    def count_rollouts(self, source: Any) -> None:
        """Read rollouts from ``source.rollouts`` (the adapters' counters), summed over sources."""
        self._sources.append(source)

    def _on_call(self, result: LMResult) -> None:
        self._live.llm_calls += 1
        self._live.cached_calls += int(result.cached)
        if not result.cached:
            self._live.prompt_tokens += result.prompt_tokens
            self._live.completion_tokens += result.completion_tokens

    @contextlib.contextmanager
    def observe(self) -> Iterator[SpendMeter]:
        """Count every LM call made inside the block."""
        with observe_calls(self._on_call):
            yield self

    def total(self) -> Spend:
        live = Spend(**{**self._live.to_dict(), "rollouts": sum(int(s.rollouts) for s in self._sources),
                        "wall_s": time.perf_counter() - self._started})
        return self.base + live


class LLMBudgetStopper:
    """A GEPA stop condition: true once the run's LM calls reach ``limit``."""

    def __init__(self, meter: SpendMeter, limit: int | None) -> None:
        self.meter = meter
        self.limit = limit

    def __call__(self, gepa_state: Any = None) -> bool:
        return self.limit is not None and self.meter.total().llm_calls >= self.limit


def spend_line(final: Mapping[str, Any]) -> str:
    """What a finished run spent, in one line: the optimization's rollouts against the budget that bounds them,
    apart from the held-out evaluation, which costs every method the same and no budget limits.

    Why apart: the budget is checked before each pass, not inside one, so a validation pass begun within a
    round's share runs to its end and the winner's pruning passes follow it; a total that also mixed in the
    held-out pass looked like a budget broken by half (the quickstart's 192 against 128). Runs written
    before the split have only the total, and the line says so.
    """
    total = Spend.from_dict(final.get("spend") or {})
    calls = f"{total.llm_calls} LM calls ({total.cached_calls} cached), {total.wall_s:.0f} s"
    if "optimization_spend" not in final:
        return f"spent: {total.rollouts} rollouts in all, {calls}"
    optimization = Spend.from_dict(final["optimization_spend"])
    heldout = total.rollouts - optimization.rollouts
    budget = (final.get("budget") or {}).get("rollouts")
    against = ""
    if budget:
        over = optimization.rollouts - int(budget)
        against = f" of a {budget}-rollout budget" + (
            f" (+{over} past it: a validation pass begun within a round's share runs to its end, and pruning follows)"
            if over > 0 else "")
    return f"spent: {optimization.rollouts} optimization rollouts{against} · {heldout} held-out evaluation " \
           f"rollouts · {calls}"
