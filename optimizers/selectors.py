"""Which components GEPA may rewrite at a reflective step: the second half of the blame seam.

GEPA calls ``selector(state, trajectories, subsample_scores, candidate_idx, candidate)`` and
rewrites only the names it returns; every other component stays byte-identical.

- :class:`BlamedSelector` (attributed): only components blamed this round, narrowed to those blamed
  for a failure in the current minibatch when there are any (a compound failure's chain counts: both
  halves of it are rewritten in the same step).
- :class:`AllSelector` (unattributed ablation): every target component, every step.
- :class:`RoundRobinSelector` (answer_feedback baseline): one target component per step, in turn.
"""

from __future__ import annotations

from typing import Any, Sequence

from memtrace_opt.optimizers.cases import CaseTrace

__all__ = ["AllSelector", "BlamedSelector", "RoundRobinSelector", "selector_for"]


class BlamedSelector:
    """The components attribution blamed this round (``components``), never any other."""

    def __init__(self, components: Sequence[str]) -> None:
        self.components = tuple(dict.fromkeys(components))

    def __call__(self, state: Any, trajectories: Sequence[Any], subsample_scores: Sequence[float],
                 candidate_idx: int, candidate: dict[str, str]) -> list[str]:
        allowed = [c for c in self.components if c in candidate]
        blamed_now = {c for t in trajectories
                      if isinstance(t, CaseTrace) and t.failed and t.blame is not None and t.blame.error_type
                      for c in (t.blame.prompt_component, *t.blame.chained_components)}
        narrowed = [c for c in allowed if c in blamed_now]
        return narrowed or allowed


class AllSelector:
    """Every target component at every step (the unattributed ablation)."""

    def __init__(self, components: Sequence[str]) -> None:
        self.components = tuple(dict.fromkeys(components))

    def __call__(self, state: Any, trajectories: Sequence[Any], subsample_scores: Sequence[float],
                 candidate_idx: int, candidate: dict[str, str]) -> list[str]:
        return [c for c in self.components if c in candidate]


class RoundRobinSelector:
    """One target component per step, cycling in order (answer-level feedback baseline)."""

    def __init__(self, components: Sequence[str]) -> None:
        self.components = tuple(dict.fromkeys(components))
        self._next = 0

    def __call__(self, state: Any, trajectories: Sequence[Any], subsample_scores: Sequence[float],
                 candidate_idx: int, candidate: dict[str, str]) -> list[str]:
        present = [c for c in self.components if c in candidate]
        if not present:
            return []
        name = present[self._next % len(present)]
        self._next += 1
        return [name]


def selector_for(method: str, components: Sequence[str]) -> BlamedSelector | AllSelector | RoundRobinSelector:
    """The selector of an optimizer method (``attributed``, ``unattributed``, ``answer_feedback``)."""
    if method == "attributed":
        return BlamedSelector(components)
    if method == "unattributed":
        return AllSelector(components)
    if method == "answer_feedback":
        return RoundRobinSelector(components)
    raise ValueError(f"no GEPA component selector for method {method!r}")
