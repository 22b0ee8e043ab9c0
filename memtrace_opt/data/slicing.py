"""Counting and slicing datasets: pure functions over the frozen data model.

A CPU run cannot afford a whole LoCoMo conversation, so runs work on slices ("the first 3
sessions of conv-26 and only the questions answerable from them"). Slicing returns a new
:class:`Dataset`; the loaded one is never edited.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from memtrace_opt.data.model import CATEGORIES, QA, Conversation, Dataset
from memtrace_opt.errors import DatasetError

__all__ = ["dataset_stats", "select"]


def dataset_stats(ds: Dataset) -> dict[str, Any]:
    """Counts of conversations, sessions, turns, questions (all, scored, per category, per flag).

    Categories appear in the canonical order (LoCoMo ids 1-5, then LongMemEval types), so the
    output of two runs diffs cleanly.
    """
    qas = [qa for _, qa in ds.all_qa()]
    per_cat = Counter(qa.category for qa in qas)
    order = [c for c in CATEGORIES if c in per_cat] + sorted(set(per_cat) - set(CATEGORIES))
    flags = Counter(f for qa in qas for f in qa.flags)
    return {
        "dataset": ds.name,
        "conversations": len(ds.conversations),
        "sessions": sum(len(c.sessions) for c in ds.conversations),
        "turns": sum(len(s.turns) for c in ds.conversations for s in c.sessions),
        "qa": len(qas),
        "qa_scored": sum(qa.scored for qa in qas),
        "qa_per_category": {c: per_cat[c] for c in order},
        "flags": dict(sorted(flags.items())),
        "warnings": len(ds.warnings),
    }


def select(
    ds: Dataset,
    conversations: Sequence[str] | None = None,
    max_sessions: int | None = None,
    max_questions: int | None = None,
    min_evidence_session: int | None = None,
) -> Dataset:
    """A slice of ``ds``.

    ``conversations``: ids to keep, in the order given (unknown ids raise DatasetError).
    ``max_sessions``: keep each conversation's first N sessions and only the questions whose
    evidence lies entirely in them; a question without evidence survives truncation only when it
    is flagged ``unanswerable`` (dropping later sessions cannot make it answerable).
    ``max_questions``: keep questions in order until N *scored* ones are kept, per conversation
    (unscored ones before that point ride along; they are never evaluated by default).
    ``min_evidence_session``: keep only the questions with evidence in session N or later (1-based) —
    the questions a slice cut at N-1 sessions never asked, e.g. a fresh held-out set for prompts
    chosen on the shorter slice. Applied before ``max_questions``.
    """
    for name, value in (("max_sessions", max_sessions), ("max_questions", max_questions),
                        ("min_evidence_session", min_evidence_session)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    chosen = _choose(ds, conversations)
    sliced = tuple(_slice(c, max_sessions, max_questions, min_evidence_session) for c in chosen)
    dropped = {c.id for c in ds.conversations} - {c.id for c in chosen}
    warnings = [w for w in ds.warnings if not any(w.startswith(f"{cid}/") for cid in dropped)]
    return replace(ds, conversations=sliced, warnings=warnings)


def _choose(ds: Dataset, ids: Sequence[str] | None) -> list[Conversation]:
    if ids is None:
        return list(ds.conversations)
    known = {c.id: c for c in ds.conversations}
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise DatasetError(ds.source, None, f"unknown conversation ids {unknown}; known: {list(known)}")
    return [known[i] for i in dict.fromkeys(ids)]


def _slice(conv: Conversation, max_sessions: int | None, max_questions: int | None,
           min_evidence_session: int | None = None) -> Conversation:
    sessions = conv.sessions
    qa: tuple[QA, ...] = conv.qa
    if max_sessions is not None and max_sessions < len(sessions):
        sessions = sessions[:max_sessions]
        kept = {t.id for s in sessions for t in s.turns}
        qa = tuple(q for q in qa if _answerable_within(q, kept))
    if min_evidence_session is not None:
        earlier = {t.id for s in conv.sessions[:min_evidence_session - 1] for t in s.turns}
        qa = tuple(q for q in qa if q.evidence and not all(e in earlier for e in q.evidence))
    if max_questions is not None:
        capped: list[QA] = []
        scored = 0
        for q in qa:
            if scored >= max_questions:
                break
            capped.append(q)
            scored += q.scored
        qa = tuple(capped)
    return replace(conv, sessions=sessions, qa=qa)


def _answerable_within(qa: QA, kept: set[str]) -> bool:
    if not qa.evidence:
        return "unanswerable" in qa.flags and "adversarial" not in qa.flags
    return all(e in kept for e in qa.evidence)
