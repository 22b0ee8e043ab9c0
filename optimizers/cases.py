"""The optimizer's data: a question to evaluate, and what evaluating it under a candidate left behind.

A :class:`QACase` is GEPA's ``DataInst`` (plain, hashable, picklable: GEPA checkpoints it). A
:class:`CaseTrace` is GEPA's ``Trajectory``: the graph the answer came from and, when attribution
ran, the blame for a wrong answer — the material the reflective dataset is made of.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.data.model import Conversation
from memtrace_opt.graph import MemoryGraph

__all__ = ["CaseTrace", "QACase", "cases_of"]


@dataclass(frozen=True, order=True)
class QACase:
    """One question of one conversation."""

    conversation_id: str
    qa_id: str


@dataclass
class CaseTrace:
    """One evaluated case: its answer, judge verdict, the graph it lives in, and its blame (if failed)."""

    case: QACase
    question: str
    gold: str
    prediction: str
    score: float
    verdict: str
    graph: MemoryGraph
    blame: BlameSignal | None = None

    @property
    def failed(self) -> bool:
        return self.score <= 0

    def output(self) -> dict[str, Any]:
        """The JSON-ready rollout output GEPA keeps (no graph: GEPA pickles its outputs)."""
        return {"qa_id": self.case.qa_id, "prediction": self.prediction, "score": self.score,
                "verdict": self.verdict}


def cases_of(conversations: Sequence[Conversation]) -> list[QACase]:
    """The scored questions of ``conversations`` as cases, in dataset order."""
    return [QACase(conv.id, qa.id) for conv in conversations for qa in conv.scored_qa()]
