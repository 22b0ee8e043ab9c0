"""The failed questions of a run: what attribution works on.

A question failed when its judged outcome (:func:`memtrace_opt.graph.outcome.read_judged_outcome`, the
reader results and the optimizer use too) says score 0. Each :class:`FailureCase` carries what every
attribution method needs: question, gold, prediction, the annotated evidence turn ids and the dataset's
flags (``audit_wrong_gold`` makes a case an AnnotationError without tracing), and the ids of the
question's answer, retrieved context, answer op, judge op and slice.

Question metadata is looked up in this order: the ``qas`` argument (dataset QA objects or dicts),
``graph.meta["qa"][qa_id]``, the ``gold:<qa id>`` variable (a string or a dict), the answer session's
meta. So a graph alone is enough when the run recorded its questions' metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from memtrace_opt.attribution.view import question_slice
from memtrace_opt.errors import MissingOutcomeError
from memtrace_opt.graph.model import MemoryGraph
from memtrace_opt.graph.outcome import read_judged_outcome

__all__ = ["FailureCase", "build_case", "case_qa", "collect_cases", "collect_failures", "qa_index"]


@dataclass(frozen=True)
class FailureCase:
    """One judged question of one conversation graph (a failure when ``score == 0``)."""

    qa_id: str
    question: str
    gold: str
    prediction: str
    score: int | None
    evidence: tuple[str, ...] = ()
    flags: frozenset[str] = frozenset()
    corrected_answer: str | None = None
    conversation: str | None = None
    system: str | None = None
    answer_var: str | None = None
    retrieved_var: str | None = None
    qa_op: str | None = None
    judge_op: str | None = None
    slice_ops: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def case_id(self) -> str:
        """Unique across conversations: ``<conversation>/<qa id>`` (qa ids that already start so are kept)."""
        if not self.conversation or self.qa_id.startswith(f"{self.conversation}/"):
            return self.qa_id
        return f"{self.conversation}/{self.qa_id}"

    @property
    def failed(self) -> bool:
        return self.score == 0

    def evidence_vars(self, graph: MemoryGraph) -> list[str]:
        """The message variables of the annotated evidence turns present in ``graph``."""
        out = []
        for turn in self.evidence:
            name = f"message:{turn}"
            if name in graph.latest:
                out.append(graph.latest_id(name))
        return out


def qa_index(qas: Mapping[str, Any] | Iterable[Any] | None) -> dict[str, Any]:
    """QA objects or dicts keyed by id."""
    if qas is None:
        return {}
    if isinstance(qas, Mapping):
        return dict(qas)
    return {_get(q, "id"): q for q in qas}


def collect_cases(graph: MemoryGraph, qas: Mapping[str, Any] | Iterable[Any] | None = None) -> list[FailureCase]:
    """Every judged question of ``graph`` (failed or not), in answering order.

    An answer session with no judged outcome (a graph traced without judging) is no case: nothing
    says it failed, and attribution works on failures. That is the one outcome this skips.
    """
    index = qa_index(qas)
    cases = []
    for rec in graph.sessions.values():
        if rec.kind != "answer":
            continue
        qa_id = str(rec.meta.get("qa_id") or rec.id.removeprefix("answer:"))
        try:
            cases.append(build_case(graph, qa_id, index.get(qa_id), rec.meta))
        except MissingOutcomeError:
            continue
    return cases


def collect_failures(graph: MemoryGraph, qas: Mapping[str, Any] | Iterable[Any] | None = None) -> list[FailureCase]:
    """The failed questions (judge score 0) of ``graph``."""
    return [c for c in collect_cases(graph, qas) if c.failed]


def case_qa(case: FailureCase) -> dict[str, Any]:
    """The question record ``case`` was built from, to build the same question's case off a replayed graph."""
    return {"question": case.question, "answer": case.gold, "evidence": list(case.evidence),
            "flags": sorted(case.flags), "corrected_answer": case.corrected_answer}


def build_case(graph: MemoryGraph, qa_id: str, qa: Any = None, session_meta: Mapping[str, Any] | None = None
               ) -> FailureCase:
    """The case of question ``qa_id``; MissingOutcomeError when the graph holds no judged outcome for it."""
    outcome = read_judged_outcome(graph, qa_id)
    meta = _merged_meta(graph, qa_id, qa, session_meta or {})
    retrieved = f"retrieved:{qa_id}"
    return FailureCase(
        qa_id=qa_id,
        question=str(meta.get("question") or _question(graph, qa_id)),
        gold=str(meta.get("answer", meta.get("gold", ""))),
        prediction=outcome.prediction,
        score=outcome.score,
        # the audit's corrected citation, where it has one: the annotated turns may not hold the answer
        evidence=tuple(meta.get("corrected_evidence") or meta.get("evidence") or ()),
        flags=frozenset(meta.get("flags") or ()),
        corrected_answer=meta.get("corrected_answer"),
        conversation=graph.meta.get("conversation") or graph.meta.get("conversation_id"),
        system=graph.meta.get("system"),
        answer_var=outcome.answer_var,
        retrieved_var=graph.latest_id(retrieved) if retrieved in graph.latest else None,
        qa_op=graph.producer.get(outcome.answer_var),
        judge_op=graph.producer.get(outcome.judgement_var),
        slice_ops=tuple(op.id for op in question_slice(graph, qa_id)),
        meta={k: meta[k] for k in ("category",) if k in meta},
    )


def _merged_meta(graph: MemoryGraph, qa_id: str, qa: Any, session_meta: Mapping[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {k: v for k, v in session_meta.items() if v is not None}
    gold_name = f"gold:{qa_id}"
    if gold_name in graph.latest:
        gold = graph.value(graph.latest_id(gold_name))
        merged.update(gold if isinstance(gold, dict) else {"answer": gold})
    merged.update((graph.meta.get("qa") or {}).get(qa_id) or {})
    if qa is not None:
        for key in ("question", "answer", "evidence", "corrected_evidence", "flags", "corrected_answer", "category"):
            val = _get(qa, key)
            if val is not None:
                merged[key] = val
    return merged


def _question(graph: MemoryGraph, qa_id: str) -> str:
    name = f"question:{qa_id}"
    return str(graph.value(graph.latest_id(name))) if name in graph.latest else ""


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)
