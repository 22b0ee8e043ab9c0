"""Accounting of every LM call: what each model and each role (task, judge, reflection) cost.

A run report must say where the tokens and seconds went — e.g. that the optimizer's reflection
calls were cheap next to re-evaluating the memory system. :class:`AccountedLM` is the one wrapper
every call goes through (the factory puts it outermost), so it both records the call in a
:class:`UsageLedger` and hands it to any active :func:`~memtrace_opt.lm.observe.observe_calls`
block. Cached answers are counted apart: they cost no compute, but a report still shows them.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from typing import Any

from memtrace_opt.lm.base import LMClient, LMResult
from memtrace_opt.lm.observe import notify

__all__ = ["UsageTotals", "UsageLedger", "AccountedLM"]


@dataclass
class UsageTotals:
    """Sums over a set of calls. Token and latency fields count only calls actually computed."""

    calls: int = 0
    cached_calls: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cached_completion_tokens: int = 0
    latency_s: float = 0.0

    def add(self, result: LMResult) -> None:
        self.calls += 1
        if result.cached:
            self.cached_calls += 1
            self.cached_prompt_tokens += result.prompt_tokens
            self.cached_completion_tokens += result.completion_tokens
        else:
            self.prompt_tokens += result.prompt_tokens
            self.completion_tokens += result.completion_tokens
            self.latency_s += result.latency_s

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["latency_s"] = round(self.latency_s, 4)
        return out


class UsageLedger:
    """Thread-safe totals per model and per role, plus the overall total."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total = UsageTotals()
        self.by_model: dict[str, UsageTotals] = {}
        self.by_role: dict[str, UsageTotals] = {}

    def record(self, result: LMResult, role: str) -> None:
        """Count one completed call made for ``role``."""
        with self._lock:
            self.total.add(result)
            self.by_model.setdefault(result.model, UsageTotals()).add(result)
            self.by_role.setdefault(role, UsageTotals()).add(result)

    def record_failure(self, model: str, role: str) -> None:
        """Count a call that raised (it has no tokens to report)."""
        with self._lock:
            for totals in (
                self.total,
                self.by_model.setdefault(model, UsageTotals()),
                self.by_role.setdefault(role, UsageTotals()),
            ):
                totals.calls += 1
                totals.failed_calls += 1

    def to_dict(self) -> dict[str, Any]:
        """``{"total": {...}, "by_model": {model: {...}}, "by_role": {role: {...}}}``, JSON-ready."""
        with self._lock:
            return {
                "total": self.total.to_dict(),
                "by_model": {k: v.to_dict() for k, v in sorted(self.by_model.items())},
                "by_role": {k: v.to_dict() for k, v in sorted(self.by_role.items())},
            }


class AccountedLM:
    """An :class:`LMClient` that records each call in a ledger (if any) and notifies observers."""

    def __init__(self, client: LMClient, ledger: UsageLedger | None, role: str) -> None:
        self.client = client
        self.ledger = ledger
        self.role = role
        self.model_id = client.model_id

    def __repr__(self) -> str:
        return f"AccountedLM({self.client!r}, role={self.role!r})"

    def chat(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        json_schema: dict[str, Any] | None = None,
        stop: list[str] | None = None,
    ) -> LMResult:
        """Call the wrapped client, then account for and publish the result."""
        try:
            result = self.client.chat(
                messages, max_tokens=max_tokens, temperature=temperature, json_schema=json_schema, stop=stop
            )
        except Exception:
            if self.ledger is not None:
                self.ledger.record_failure(self.model_id, self.role)
            raise
        if self.ledger is not None:
            self.ledger.record(result, self.role)
        notify(result)
        return result
