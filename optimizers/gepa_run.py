"""One GEPA optimization of some prompt components, through the memory-system adapter.

A thin call of ``gepa.optimize`` with the pieces this project swaps in: the adapter (replaying
graphs), a component selector (the blame seam), the robust reflection proposer, a metric-call budget
and extra stoppers (the loop's LLM-call budget). GEPA's log goes to a file under ``run_dir``, not to
stdout. GEPA is *not* given ``run_dir``: it would pickle its state there and unpickle whatever file
it finds on resume, and a run dir is data people share and download. A killed round is rerun from
its start instead; with the same seed and the LM disk cache it makes the same decisions at no LM cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from memtrace_opt.optimizers.adapter import MemoryPromptAdapter
from memtrace_opt.optimizers.cases import QACase
from memtrace_opt.optimizers.proposer import ComponentProposer

__all__ = ["GepaOutcome", "run_gepa"]


@dataclass
class GepaOutcome:
    """The best candidate GEPA found and what finding it cost."""

    best_candidate: dict[str, str]
    best_score: float
    seed_score: float
    candidates: int
    metric_calls: int
    val_scores: dict[str, float] = field(default_factory=dict)
    proposals: list[dict[str, Any]] = field(default_factory=list)
    #: Every candidate the validation set scored, seed excluded, in the order GEPA found them:
    #: ``{"candidate": {component: text}, "val_score": accuracy}`` (what a held-out audit of selection reads).
    validated: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "best_candidate": self.best_candidate, "best_score": self.best_score, "seed_score": self.seed_score,
            "candidates": self.candidates, "metric_calls": self.metric_calls, "val_scores": self.val_scores,
            "proposals": self.proposals, "validated": self.validated,
        }


class _FileLogger:
    """GEPA's LoggerProtocol, appending to one file (GEPA's own Logger tees sys.stdout)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def log(self, message: str) -> None:
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(f"{message}\n")


def run_gepa(
    adapter: MemoryPromptAdapter,
    *,
    seed_candidate: dict[str, str],
    trainset: Sequence[QACase],
    valset: Sequence[QACase],
    selector: Callable[..., list[str]],
    proposer: ComponentProposer,
    max_metric_calls: int,
    minibatch_size: int = 4,
    stoppers: Sequence[Callable[[Any], bool]] = (),
    run_dir: Path | None = None,
    seed: int = 0,
    accept_ties: bool = False,
) -> GepaOutcome:
    """Optimize ``seed_candidate``'s components on ``trainset``, selecting on ``valset``.

    Stops at ``max_metric_calls`` rollouts, when a candidate is perfect on ``valset``, or when any
    of ``stoppers`` says so. GEPA logs and skips a proposer that raises; here the reflection LM's
    error (a broken model, not a bad reply) stops the run and is re-raised.
    """
    import gepa
    from gepa.utils.stop_condition import ScoreThresholdStopper

    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
    already = len(proposer.log)
    result = gepa.optimize(
        seed_candidate=dict(seed_candidate),
        trainset=list(trainset),
        valset=list(valset),
        adapter=adapter,
        custom_candidate_proposer=proposer,
        module_selector=selector,
        reflection_minibatch_size=min(minibatch_size, len(trainset)),
        max_metric_calls=max_metric_calls,
        stop_callbacks=[ScoreThresholdStopper(1.0), lambda _state: proposer.error is not None, *stoppers],
        logger=_FileLogger(run_dir / "gepa_log.txt" if run_dir else None),
        run_dir=None,  # GEPA would pickle its state there and unpickle it on resume: never load code from a run dir
        track_best_outputs=False,
        display_progress_bar=False,
        seed=seed,
        raise_on_exception=True,
        acceptance_criterion="improvement_or_equal" if accept_ties else "strict_improvement",
    )
    if proposer.error is not None:
        raise proposer.error
    best = result.best_idx
    val_ids = list(valset)
    return GepaOutcome(
        best_candidate=dict(result.candidates[best]),
        best_score=float(result.val_aggregate_scores[best]),
        seed_score=float(result.val_aggregate_scores[0]),
        candidates=len(result.candidates),
        metric_calls=int(result.total_metric_calls or 0),
        val_scores={val_ids[i].qa_id: float(s) for i, s in result.val_subscores[best].items()},
        proposals=[p.to_dict() for p in proposer.log[already:]],
        validated=[{"candidate": dict(c), "val_score": float(result.val_aggregate_scores[i])}
                   for i, c in enumerate(result.candidates) if i > 0],
    )
