"""Prune a round's winning candidate: undo each learned delta that validation does not pay for.

GEPA keeps a child when it does at least as well as its parent, so a winning candidate can carry a
delta that rode along with the one that helped: a rule accepted on a tied 6-question minibatch, on
top of which a later step dropped the line that really caused the failures. Such a passenger costs
nothing on validation but changes answers it never targeted elsewhere. After a round improves,
each delta of the winner relative to the round's starting prompts is undone in turn (an added rule
removed; the example block, then the instruction, restored) and the validation set decides:
an undo that scores at least as well is kept. Among prompts validation cannot tell apart, the one
with fewer learned changes wins — the simplicity bias of minimum-description-length selection.
Only validation questions are used; the cost is one validation pass per delta, counted as rollouts.

>>> from memtrace_opt.graph.prompt_parts import compose_prompt
>>> parent = {"qa": compose_prompt("Answer.\\n- Say: Not mentioned.")}
>>> child = {"qa": compose_prompt("Answer.", ["If asked when, give a date."])}
>>> [(u.kind, u.detail) for u in undos(parent, child)]
[('rule', 'If asked when, give a date.'), ('instruction', 'Answer.\\n- Say: Not mentioned.')]
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from memtrace_opt.graph.prompt_parts import PromptParts, split_prompt

__all__ = ["PruneResult", "Undo", "prune", "undos"]

#: Scores a candidate on the validation set: (mean accuracy, per-question scores).
Evaluate = Callable[[dict[str, str]], tuple[float, dict[str, float]]]
#: Told of each undo as it happens: (its 1-based number, how many there are, the undo, its log entry or
#: None before its validation pass). One pass can take an hour on Mem0, so a run says what it is doing.
OnStep = Callable[[int, int, "Undo", "dict[str, Any] | None"], None]


@dataclass(frozen=True)
class Undo:
    """One learned delta of a component, undone: remove an added rule, or restore a part of the parent."""

    component: str
    kind: str  # "rule" | "examples" | "instruction"
    detail: str

    def apply(self, candidate: Mapping[str, str], parent: Mapping[str, str]) -> dict[str, str]:
        """The candidate with this delta undone (other components and deltas untouched)."""
        parts = split_prompt(candidate[self.component])
        before = split_prompt(parent[self.component])
        if self.kind == "rule":
            parts = replace(parts, rules=tuple(r for r in parts.rules if r != self.detail))
        elif self.kind == "examples":
            parts = replace(parts, examples=before.examples)
        else:
            parts = replace(parts, instruction=before.instruction)
        return {**candidate, self.component: parts.render()}


def _component_undos(component: str, before: PromptParts, after: PromptParts) -> list[Undo]:
    found = [Undo(component, "rule", r) for r in after.rules if r not in before.rules]
    if after.examples != before.examples:
        found.append(Undo(component, "examples", f"{len(after.examples)} example(s)"))
    if after.instruction != before.instruction:
        found.append(Undo(component, "instruction", before.instruction))
    return found


def undos(parent: Mapping[str, str], child: Mapping[str, str]) -> list[Undo]:
    """Every learned delta of ``child`` relative to ``parent``, in component order: rules, examples, instruction."""
    found: list[Undo] = []
    for component in child:
        if component in parent and child[component] != parent[component]:
            found += _component_undos(component, split_prompt(parent[component]), split_prompt(child[component]))
    return found


@dataclass
class PruneResult:
    """The pruned candidate, its validation scores, and one log entry per undo tried."""

    candidate: dict[str, str]
    score: float
    scores: dict[str, float]
    log: list[dict[str, Any]]


def prune(parent: Mapping[str, str], child: Mapping[str, str], score: float, scores: Mapping[str, float],
          evaluate: Evaluate, on_step: OnStep | None = None) -> PruneResult:
    """Undo each delta of ``child`` in turn; keep an undo when validation scores at least ``score``.

    Greedy and one pass: an undo is tried on the candidate left by the undos kept before it.
    ``on_step`` hears of each undo before and after its validation pass.
    """
    best, best_score, best_scores = dict(child), score, dict(scores)
    log: list[dict[str, Any]] = []
    todo = undos(parent, child)
    for number, undo in enumerate(todo, 1):
        trial = undo.apply(best, parent)
        if trial == best:
            continue
        if on_step:
            on_step(number, len(todo), undo, None)
        trial_score, trial_scores = evaluate(trial)
        kept = trial_score >= best_score - 1e-9
        log.append({"component": undo.component, "undo": undo.kind, "detail": undo.detail,
                    "val_score": trial_score, "before": best_score, "kept": kept})
        if on_step:
            on_step(number, len(todo), undo, log[-1])
        if kept:
            best, best_score, best_scores = trial, trial_score, trial_scores
    return PruneResult(best, best_score, best_scores, log)
