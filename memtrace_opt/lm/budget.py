"""A hard cap on the LM calls of one bounded piece of work (one replay, say).

A fault injected early in a Mem0 run changes what every later memory search returns, so its replay
re-decides every later memory update: with a CPU model that is twenty minutes for one benchmark
case. A per-replay cap turns such a case into a recorded skip instead. Every call counts, cache
hits included, so a re-run of the same work makes the same decisions.
"""

from __future__ import annotations

from typing import Any, Mapping

from memtrace_opt.lm.base import LMClient, LMResult

__all__ = ["CallBudgetExceeded", "with_call_budget"]


class CallBudgetExceeded(RuntimeError):
    """More LM calls were asked for than the budget allows."""


class _Counter:
    def __init__(self, limit: int) -> None:
        self.limit, self.used = limit, 0

    def take(self) -> None:
        if self.used >= self.limit:
            raise CallBudgetExceeded(f"over the budget of {self.limit} LM calls")
        self.used += 1


class _BudgetedLM:
    """Forwards ``chat`` to ``lm`` while the shared counter allows it."""

    def __init__(self, lm: LMClient, counter: _Counter) -> None:
        self.lm, self.counter, self.model_id = lm, counter, lm.model_id

    def chat(self, messages: list[dict[str, str]], **kw: Any) -> LMResult:
        self.counter.take()
        return self.lm.chat(messages, **kw)


def with_call_budget(lms: Mapping[str, LMClient], limit: int | None) -> Mapping[str, LMClient]:
    """``lms`` with one shared budget of ``limit`` calls over all roles (unchanged when ``limit`` is None)."""
    if limit is None:
        return lms
    counter = _Counter(limit)
    return {role: _BudgetedLM(lm, counter) for role, lm in lms.items()}
