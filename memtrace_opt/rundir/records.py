"""Typed records of a run directory's JSON files: what each file holds, as types a reader can rely on.

The TypedDicts are the files' shapes as written (a reader indexes them as it indexes the JSON);
their schema readers (:mod:`.schemas`) check the fields that carry a type here and convert older
versions, so a value typed ``FinalReport`` has the ``final.json`` fields it claims. Nested values
the code only passes through (settings, spend, grouped blame) stay ``JSONValue``.

:class:`BlameReport` is ``blame.json`` as a value: the signals parsed into
:class:`~memtrace_opt.attribution.blame.BlameSignal`, what ``attribute`` returns and the CLI renders.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NotRequired, TypedDict

from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.rundir.jsonio import JSONObject, JSONValue

__all__ = ["BlameFile", "BlameReport", "CheckpointFile", "EvalSummary", "FinalCase", "FinalReport", "RoundScores",
           "ScoreBlock"]


class ScoreBlock(TypedDict):
    """Accuracy with its 95% bootstrap CI, mean F1 and BLEU-1 of ``n`` scored questions."""

    n: int
    accuracy: float
    accuracy_ci: list[float]
    f1: float
    bleu1: float


class EvalSummary(ScoreBlock, total=False):
    """``summary.json``: an evaluation's scores (overall and per category), what it cost, where ops failed.

    An ``eval`` run writes every field but ``prompts``; the loop's held-out run writes the scores and
    ``prompts: "best"``.
    """

    unscored: int
    judge_failures: int
    per_category: dict[str, ScoreBlock]
    run_id: str
    system: str
    dataset: str | None
    judge: str
    conversations: list[str]
    lm_usage: JSONObject
    failed_ops: dict[str, int]
    failed_ops_total: int
    wall_s: float
    prompts: str


class BlameFile(TypedDict):
    """``blame.json`` and ``rounds/round_<k>/blame.json`` (``memtrace-blame/2``): a run's fields, or a round's."""

    format: str
    signals: list[JSONObject]
    aggregate: JSONObject
    verification_failed: int
    method: NotRequired[str]
    counterfactual: NotRequired[bool]
    evidence: NotRequired[str]
    notes: NotRequired[list[str]]
    failures: NotRequired[int]
    components: NotRequired[list[str]]
    not_attributed: NotRequired[list[str]]


class FinalCase(TypedDict, total=False):
    """One held-out question of ``final.json``: the seed's and the best prompts' answer and score."""

    qa_id: str
    conversation: str
    category: str
    question: str
    gold: str
    seed_prediction: str
    seed_score: float
    best_prediction: str
    best_score: float


class FinalReport(TypedDict, total=False):
    """``final.json`` (``memtrace-final/1``): seed vs best prompts on the held-out questions, and the spend."""

    format: str
    method: str
    system: str
    settings: JSONObject
    rounds: int
    best_round: int
    stop_reason: str | None
    baseline_val: float | None
    best_val: float
    heldout_conversations: list[str]
    budget: JSONObject
    n: int
    changed_components: list[str]
    seed_accuracy: float
    best_accuracy: float
    cases: list[FinalCase]
    spend: JSONObject
    optimization_spend: JSONObject
    audit: list[JSONObject]
    audit_spend: JSONObject


class CheckpointFile(TypedDict):
    """``checkpoint.json`` (``memtrace-loop/1``): the loop's state, :class:`~memtrace_opt.loop.checkpoint.LoopState`
    as written; the fields its reader checks are typed."""

    format: str
    plan: JSONObject
    system: str
    seed_candidate: dict[str, str]
    best_candidate: dict[str, str]
    settings: NotRequired[JSONObject]
    spend: NotRequired[JSONObject]
    rounds: NotRequired[list[JSONObject]]
    status: NotRequired[str]


class RoundScores(TypedDict):
    """``rounds/round_<k>/scores.json`` (``memtrace-round-scores/1``): ``{question id: score}`` per split."""

    format: str
    validation: dict[str, float]
    train: NotRequired[dict[str, float]]


@dataclass(frozen=True)
class BlameReport:
    """A run's blame: one signal per failed question, grouped by prompt component, and how it was made.

    ``aggregate`` is :func:`memtrace_opt.attribution.aggregate.aggregate`'s grouping; ``notes`` say what
    the run lacked (no config, a conversation not in the dataset); ``verification_failed`` counts the
    counterfactual checks whose replay failed (their blame is tracing's, unverified).
    """

    method: str
    counterfactual: bool
    evidence: str
    signals: tuple[BlameSignal, ...]
    aggregate: JSONObject
    verification_failed: int = 0
    notes: tuple[str, ...] = ()

    def to_json(self) -> JSONObject:
        """The ``blame.json`` fields, without the stamp :func:`memtrace_opt.rundir.files.blame_payload` adds."""
        signals: list[JSONValue] = [s.to_dict() for s in self.signals]
        return {"method": self.method, "counterfactual": self.counterfactual, "evidence": self.evidence,
                "notes": list(self.notes), "verification_failed": self.verification_failed, "signals": signals,
                "aggregate": self.aggregate}

    @classmethod
    def from_json(cls, payload: BlameFile) -> BlameReport:
        """A checked ``memtrace-blame/2`` payload as a report (a round's file has no method: ``""``)."""
        return cls(method=payload.get("method", ""), counterfactual=payload.get("counterfactual", False),
                   evidence=payload.get("evidence", ""),
                   signals=tuple(BlameSignal.from_dict(s) for s in payload["signals"]),
                   aggregate=payload["aggregate"], verification_failed=payload["verification_failed"],
                   notes=tuple(payload.get("notes", ())))

    def counts(self) -> dict[str, int]:
        """Failures per error type (``unattributed`` for a failed attribution), by type name."""
        out: dict[str, int] = {}
        for signal in self.signals:
            kind = signal.error_type or "unattributed"
            out[kind] = out.get(kind, 0) + 1
        return dict(sorted(out.items()))

    def counts_line(self) -> str:
        """``"8 AnnotationError, 61 ResponseError"``: how many failures each error type got ("no failures")."""
        return ", ".join(f"{n} {kind}" for kind, n in self.counts().items()) or "no failures"
