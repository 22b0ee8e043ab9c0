"""Building the benchmark's cases from one recorded conversation run.

Correctly answered questions become injected cases (one per error type the graph allows, while
that system × type is under its quota); failed ones become real cases where their ground truth is
unambiguous. Every skip is counted by reason, so the report says how many cases each type lacked
and why (for instance: no update of a unit that already held the evidence — Mem0 with a small
model mostly ADDs).

An injection replays the whole conversation, and a fault in ingestion changes what every later
question reads: with Long-Context on a LoCoMo slice that re-answers 20 questions over a 3k-token
context per injected case. Given ``focus`` (a rerun factory for a subset of the questions), an
injection replays ingestion and only the case's own question: op ids are per-session ordinals, so
every op keeps its id (checked; the full rerun is used when the injected op would not).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from memtrace_opt.attribution.failures import FailureCase, collect_cases
from memtrace_opt.bench.attribution import BenchCase, label_real_failures
from memtrace_opt.bench.inject import INJECTABLE, inject_case, plan_injections
from memtrace_opt.bench.inject_hard import HARD_KINDS, plan_hard_injections
from memtrace_opt.graph import MemoryGraph
from memtrace_opt.graph.replay import Rerun
from memtrace_opt.lm.base import LMClient
from memtrace_opt.lm.budget import with_call_budget

__all__ = ["CaseBuilder"]


@dataclass
class CaseBuilder:
    """Accumulates cases over runs, with a quota per (system, error type) for injected ones.

    ``suite="hard"`` injects the harder classes of :mod:`.inject_hard` instead, with the quota per
    (system, class); ``types`` then names classes (default: all of them).
    """

    per_type: int
    max_real: int = 50
    max_replay_calls: int | None = None  # an injection whose replay needs more LM calls is skipped
    types: Sequence[str] = INJECTABLE
    suite: str = "easy"
    cases: list[BenchCase] = field(default_factory=list)
    skipped: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    _count: Counter[tuple[str, str]] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        if self.suite not in ("easy", "hard"):
            raise ValueError(f"unknown injection suite {self.suite!r}; expected easy or hard")
        if self.suite == "hard" and tuple(self.types) == INJECTABLE:
            self.types = HARD_KINDS

    def add_run(self, graph: MemoryGraph, qas: Sequence[Any], rerun: Rerun, lms: Mapping[str, LMClient], *,
                system: str, real: bool = True, focus: Callable[[Sequence[Any]], Rerun] | None = None) -> None:
        """Inject faults into the run's correct answers; label its failures (when ``real``).

        ``focus(qas)`` makes a rerun answering only ``qas``; injections then replay one question.
        """
        judged = collect_cases(graph, qas)
        for case in judged:
            if not case.failed and case.score is not None:
                self._inject(graph, case, rerun, lms, system, qas, focus)
        if real:
            self._real(graph, judged, rerun, system)

    def _inject(self, graph: MemoryGraph, case: FailureCase, rerun: Rerun, lms: Mapping[str, LMClient], system: str,
                qas: Sequence[Any], focus: Callable[[Sequence[Any]], Rerun] | None) -> None:
        wanted = [t for t in self.types if self._count[(system, t)] < self.per_type]
        if not wanted:
            return
        if self.suite == "hard":
            plans, skipped = plan_hard_injections(graph, case, kinds=wanted)
        else:
            plans, skipped = plan_injections(graph, case, types=wanted)
        for error_type, why in skipped.items():
            self.skipped[f"{system}/{error_type}"][why] += 1
        qa = next((q for q in qas if getattr(q, "id", None) == case.qa_id), None)
        focused = focus([qa]) if focus is not None and qa is not None else None
        for injection in plans:  # each replay gets a fresh call budget
            result, used = (_inject_focused(graph, case, injection, focused, self._budgeted(lms), qa) if focused
                            else (None, rerun))
            if result is None:
                result = inject_case(graph, case, injection, rerun, self._budgeted(lms), qa=qa)
            label = injection.kind if self.suite == "hard" else injection.error_type
            if isinstance(result, str):
                self.skipped[f"{system}/{label}"][_short(result)] += 1
                continue
            result.system = system
            self.cases.append(BenchCase.from_injected(result, injection.overrides, used))
            self._count[(system, label)] += 1

    def _budgeted(self, lms: Mapping[str, LMClient]) -> Mapping[str, LMClient]:
        return with_call_budget(lms, self.max_replay_calls)

    def _real(self, graph: MemoryGraph, judged: list[FailureCase], rerun: Rerun, system: str) -> None:
        room = self.max_real - sum(1 for c in self.cases if c.source != "injected")
        if room <= 0:
            return
        labelled, skipped = label_real_failures(graph, judged, system=system, rerun=rerun)
        self.cases.extend(labelled[:room])
        for why in skipped.values():
            self.skipped[f"{system}/real"][_short(why)] += 1

    def full(self, systems: Sequence[str]) -> bool:
        """Whether every (system, type) quota is met."""
        return all(self._count[(s, t)] >= self.per_type for s in systems for t in self.types)

    def skipped_summary(self) -> dict[str, dict[str, int]]:
        return {k: dict(v) for k, v in sorted(self.skipped.items())}


def _inject_focused(graph: MemoryGraph, case: Any, injection: Any, focused: Rerun, lms: Mapping[str, LMClient],
                    qa: Any) -> tuple[Any, Rerun]:
    """The injection replayed on ingestion + the case's question: ``(result, rerun)``, or ``(None, _)``
    when the replayed graph does not keep the injected op's id (then the full rerun decides)."""
    result = inject_case(graph, case, injection, focused, lms, qa=qa)
    if isinstance(result, str):
        return (None, focused) if result.startswith("replay failed") else (result, focused)
    kept = result.graph.ops.get(injection.op_id)
    if kept is None or kept.name != graph.ops[injection.op_id].name:
        return None, focused
    result.graph.meta["qa_ids"] = [case.qa_id]
    return result, focused


def _short(reason: str) -> str:
    """A skip reason without case-specific text (so reasons group)."""
    return reason.split(" (", 1)[0].split(":", 1)[0] if reason.startswith(("still", "ambiguous", "replay")) else reason
