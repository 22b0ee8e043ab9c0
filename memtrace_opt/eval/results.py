"""Per-question results and their summary: the records reports and comparisons are built from.

One flat record per question keeps runs comparable question by question (``paired_bootstrap``
needs the ids) and lets a report be re-rendered from the saved JSON without re-running anything.
A run directory's ``results.json`` is written and read by :mod:`memtrace_opt.rundir`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from memtrace_opt.data.model import QA
from memtrace_opt.eval.judge import Judge
from memtrace_opt.eval.metrics import bleu1, bootstrap_ci, token_f1

__all__ = ["QAResult", "score_qa", "summarize"]


@dataclass(frozen=True)
class QAResult:
    """One answered question with every score the protocol reports."""

    qa_id: str
    conversation: str
    category: str
    question: str
    gold: str
    prediction: str
    judge_score: int
    f1: float
    bleu1: float
    flags: tuple[str, ...] = ()
    judge_label: str = ""
    judge_reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["flags"] = list(self.flags)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QAResult:
        """Inverse of :meth:`to_dict`; unknown or missing keys raise (a stale file should not load silently)."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown keys {unknown}")
        return cls(**{**data, "flags": tuple(data.get("flags", ()))})


def score_qa(
    qa: QA, conversation: str, prediction: str, judge: Judge, *, use_audit: bool = False
) -> QAResult:
    """Judge one prediction and compute F1/BLEU-1 against the gold (or the audit's correction)."""
    gold = qa.gold(use_audit=use_audit)
    verdict = judge.judge(qa.question, gold, prediction)
    return QAResult(
        qa_id=qa.id,
        conversation=conversation,
        category=qa.category,
        question=qa.question,
        gold=gold,
        prediction=prediction,
        judge_score=verdict.score,
        f1=token_f1(prediction, gold),
        bleu1=bleu1(prediction, gold),
        flags=tuple(sorted(qa.flags)),
        judge_label=verdict.label,
        judge_reason=verdict.reason,
    )


def summarize(results: Iterable[QAResult], *, n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Overall and per-category accuracy (with 95% bootstrap CI), mean F1 and BLEU-1, counts.

    Results flagged ``unscored`` are counted but left out of every mean, as mem0 leaves out
    LoCoMo category 5.
    """
    all_results = list(results)
    scored = [r for r in all_results if "unscored" not in r.flags]
    groups: dict[str, list[QAResult]] = defaultdict(list)
    for r in scored:
        groups[r.category].append(r)
    return {
        **_block(scored, n_boot, seed),
        "unscored": len(all_results) - len(scored),
        "judge_failures": sum(r.judge_label == "FAILED" for r in scored),
        "per_category": {c: _block(rs, n_boot, seed) for c, rs in groups.items()},
    }


def _block(rs: Sequence[QAResult], n_boot: int, seed: int) -> dict[str, Any]:
    mean, low, high = bootstrap_ci([r.judge_score for r in rs], n=n_boot, seed=seed)
    n = len(rs)
    return {
        "n": n,
        "accuracy": mean,
        "accuracy_ci": [low, high],
        "f1": sum(r.f1 for r in rs) / n if n else 0.0,
        "bleu1": sum(r.bleu1 for r in rs) / n if n else 0.0,
    }
