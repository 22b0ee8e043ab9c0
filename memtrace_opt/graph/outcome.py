"""How one question was judged, read off a traced graph: the one reader scoring, optimization and attribution share.

A run records per question ``answer:<qa id>`` (the prediction), ``gold:<qa id>`` (what the judge
compared it with) and ``judgement:<qa id>`` (``{"score", "label", "reason"}``, the output of the
``eval.judge`` op, :mod:`memtrace_opt.systems.judge_op`). Results, the optimizer's rollouts and
attribution's failure list all ask "how was question X judged"; reading it in one place keeps them
from disagreeing about a score or about what a missing judgement means. (:func:`outcome_from` makes
the same record from the variables themselves, for a run whose tracer records no graph.)

Policy for a missing outcome: :func:`read_judged_outcome` raises :class:`MissingOutcomeError` (one
line naming the question, the graph and what is missing) when the answer or the judgement variable
is absent or the judgement holds no readable score. A run records both for every question it is
asked, so a missing one is a defect unless the caller knows otherwise; a caller that legitimately
meets one (a verification or injection replay that lost the question) catches the error and records
it where it is counted. Nothing scores a missing outcome 0 silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memtrace_opt.errors import MissingOutcomeError
from memtrace_opt.graph.model import MemoryGraph, Variable

__all__ = ["JudgedOutcome", "MissingOutcomeError", "graph_label", "judgement_score", "outcome_from", "read_judged_outcome"]


@dataclass(frozen=True)
class JudgedOutcome:
    """How one question of one graph was judged, and which variables say so."""

    qa_id: str
    prediction: str
    score: int  # the judge's 0/1
    label: str
    reason: str
    gold: str | None  # the gold answer the judge saw; None when the graph recorded no ``gold:<qa id>``
    answer_var: str
    judgement_var: str

    @property
    def correct(self) -> bool:
        return self.score == 1


def judgement_score(value: Any) -> int | None:
    """The 0/1 score of a judgement value (a dict with ``score`` or ``label``, or a bare number); None if unreadable."""
    if isinstance(value, Mapping):
        if value.get("score") is not None:
            return int(float(value["score"]) >= 0.5)
        label = str(value.get("label", "")).upper()
        return {"CORRECT": 1, "WRONG": 0}.get(label)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return int(value >= 0.5)
    return None


def graph_label(graph: MemoryGraph) -> str:
    """How an error names a graph: its conversation and run, as far as its meta records them."""
    conversation = graph.meta.get("conversation_id") or graph.meta.get("conversation")
    parts = [f"conversation {conversation!r}"] if conversation else []
    if graph.meta.get("run_id"):
        parts.append(f"run {graph.meta['run_id']!r}")
    return "graph of " + ", ".join(parts) if parts else "graph (no conversation in its meta)"


def read_judged_outcome(graph: MemoryGraph, qa_id: str, *, require_gold: bool = False) -> JudgedOutcome:
    """The judged outcome of ``qa_id`` in ``graph`` (latest versions); MissingOutcomeError when there is none.

    ``require_gold``: a missing gold answer is an error too (results report the gold the judge saw).
    """
    answer, judgement, gold = (_latest(graph, f"{kind}:{qa_id}") for kind in ("answer", "judgement", "gold"))
    if answer is None or judgement is None:
        missing = f"answer:{qa_id}" if answer is None else f"judgement:{qa_id}"
        raise MissingOutcomeError(graph_label(graph), qa_id, f"no {missing!r} variable")
    outcome = outcome_from(qa_id, answer, judgement, None if gold is None else gold.value, source=graph_label(graph))
    if require_gold and outcome.gold is None:
        raise MissingOutcomeError(graph_label(graph), qa_id, f"no gold answer ('gold:{qa_id}')")
    return outcome


def outcome_from(qa_id: str, answer: Variable, judgement: Variable, gold: Any, *, source: str) -> JudgedOutcome:
    """The outcome of the answer and judgement variables themselves, for a run whose tracer records no graph.

    ``gold`` is the gold value (a string, or a dict with ``answer`` as hand-built graphs keep); ``source``
    names the run in the MissingOutcomeError raised when the judgement holds no readable score.
    """
    verdict = judgement.value
    score = judgement_score(verdict)
    if score is None:
        raise MissingOutcomeError(source, qa_id, f"{judgement.id!r} holds no readable score: {str(verdict)[:80]!r}")
    if isinstance(gold, Mapping):
        gold = gold.get("answer")
    details: Mapping[str, Any] = verdict if isinstance(verdict, Mapping) else {}
    return JudgedOutcome(qa_id=qa_id, prediction="" if answer.value is None else str(answer.value), score=score,
                         label=str(details.get("label") or ""), reason=str(details.get("reason") or ""),
                         gold=None if gold is None else str(gold), answer_var=answer.id, judgement_var=judgement.id)


def _latest(graph: MemoryGraph, name: str) -> Variable | None:
    return graph.variables[graph.latest_id(name)] if name in graph.latest else None
