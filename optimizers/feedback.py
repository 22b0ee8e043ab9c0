"""Reflective records: what each prompt component is shown about the failures it should fix.

This is the seam through which blame reaches GEPA. Three policies, one per method:

- ``attributed``: a component sees only the failures attribution blamed on an operation that used
  it, with that operation's own inputs and outputs, the error type and the reason — an extraction
  prompt sees the message it failed to extract from, not the final answer.
- ``unattributed`` (the reference's ablation): every failure is labelled ResponseError and sent to
  every component, shown as question, retrieved memories and answer.
- ``answer_feedback``: answer-level feedback only (right or wrong, and the gold), for every case.

Each record is ``{"Inputs", "Generated Outputs", "Feedback"}``, the shape GEPA's reflection renders.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Literal, Mapping

from memtrace_opt.attribution.blame import UNATTRIBUTED_METHOD, BlameSignal
from memtrace_opt.graph import MemoryGraph
from memtrace_opt.optimizers.cases import CaseTrace

__all__ = ["FeedbackMode", "FEEDBACK_MODES", "ERROR_HINTS", "reflective_records", "render_value",
           "unattributed_signal"]

FeedbackMode = Literal["attributed", "unattributed", "answer_feedback"]
FEEDBACK_MODES: tuple[str, ...] = ("attributed", "unattributed", "answer_feedback")

ERROR_HINTS: Mapping[str, str] = {
    "ExtractionError": "the information needed for the answer never entered any memory unit at this step",
    "UpdateError": "a memory unit held the information and this update removed or degraded it",
    "DeletionError": "a memory unit holding the information was deleted at this step",
    "RetrievalError": "the memory held the information but the retrieved context lacked it",
    "ResponseError": "the retrieved context held the information but the answer was still wrong",
}


def render_value(value: Any, max_chars: int = 1200, focus: str = "") -> str:
    """A variable's value as short readable text: messages and memory records as dated lines.

    A record list longer than ``max_chars`` keeps the records sharing words with ``focus`` (the
    question and gold answer) first, so a long context shown to the reflection LM still holds the
    lines that mattered.
    """
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, Mapping) and "text" in v for v in value):
        return _record_lines([_record_line(v) for v in value], max_chars, focus)
    if isinstance(value, str):
        text = value
    elif isinstance(value, Mapping) and "text" in value:
        text = _record_line(value)
    elif value is None or (isinstance(value, (list, tuple)) and not value):
        text = "(none)"
    else:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= max_chars else text[: max_chars - 15] + " ...[truncated]"


def _record_lines(lines: list[str], max_chars: int, focus: str) -> str:
    text = "\n".join(lines)
    if len(text) <= max_chars:
        return text
    words = {w for w in re.findall(r"\w+", focus.lower()) if len(w) > 2}
    ranked = sorted(range(len(lines)), key=lambda i: -len(words & set(re.findall(r"\w+", lines[i].lower()))))
    budget = max_chars - 40
    lines = list(lines)
    if len(lines[ranked[0]]) + 1 > budget:  # the closest line alone is too long: cut it, never drop it
        lines[ranked[0]] = lines[ranked[0]][: budget - 16] + " ...[truncated]"
    kept: list[int] = []
    used = 0
    for i in ranked:
        if used + len(lines[i]) + 1 > budget:
            continue  # a shorter, less related line may still fit
        kept.append(i)
        used += len(lines[i]) + 1
    shown = "\n".join(lines[i] for i in sorted(kept))
    return f"{shown}\n({len(kept)} of {len(lines)} records shown: those closest to the question)"


def _record_line(rec: Mapping[str, Any]) -> str:
    date = f"[{rec['date']}] " if rec.get("date") else ""
    who = f"{rec['speaker']}: " if rec.get("speaker") else ""
    return f"{date}{who}{rec.get('text', '')}"


def reflective_records(
    mode: str, traces: Iterable[CaseTrace], component: str
) -> list[dict[str, Any]]:
    """The records ``component`` is shown under feedback ``mode``."""
    if mode == "attributed":
        blamed = [t for t in traces if t.failed and t.blame and t.blame.error_type]
        return [_attributed(t) if t.blame.prompt_component == component else _chained(t, component)
                for t in blamed if t.blame is not None
                and component in (t.blame.prompt_component, *t.blame.chained_components)]
    if mode == "unattributed":
        return [_unattributed(t) for t in traces if t.failed]
    if mode == "answer_feedback":
        return [_answer_level(t) for t in traces]
    raise ValueError(f"unknown feedback mode {mode!r}; expected one of {FEEDBACK_MODES}")


def _outcome_text(t: CaseTrace) -> str:
    return f"Question: {t.question}\nCorrect answer: {t.gold}\nThe system answered: {t.prediction or '(nothing)'}"


def _op_record(t: CaseTrace, op_id: str | None, error_type: str, lead: str, why: str) -> dict[str, Any]:
    """One failure as seen from op ``op_id``: its inputs and outputs, and feedback opening with ``lead``."""
    inputs, outputs = _op_io(t.graph, op_id, focus=f"{t.question} {t.gold}")
    hint = ERROR_HINTS.get(error_type, "")
    feedback = f"{lead} Error type: {error_type}{f' ({hint})' if hint else ''}.\nWhy: {why}\n{_outcome_text(t)}"
    return {"Inputs": inputs or {"question": t.question}, "Generated Outputs": outputs or t.prediction,
            "Feedback": feedback}


def _attributed(t: CaseTrace) -> dict[str, Any]:
    blame = t.blame
    assert blame is not None and blame.error_type is not None
    return _op_record(t, blame.op_id, blame.error_type, "This step caused a wrong final answer.", blame.reason)


def _chained(t: CaseTrace, component: str) -> dict[str, Any]:
    """The record of a compound failure for a later link's component: its op, and what it did wrong once
    the earlier fault was corrected."""
    blame = t.blame
    assert blame is not None
    link = next(link for link in blame.chain if link.prompt_component == component)
    lead = (f"This step was also at fault. An earlier step lost the evidence ({blame.error_type}: {blame.reason}); "
            f"with that corrected, this step still gave a wrong final answer.")
    return _op_record(t, link.op_id, link.error_type, lead, link.reason)


def _unattributed(t: CaseTrace) -> dict[str, Any]:
    context = _latest(t.graph, f"retrieved:{t.case.qa_id}")
    return {
        "Inputs": {"question": t.question,
                   "retrieved memories": render_value(context, focus=f"{t.question} {t.gold}")},
        "Generated Outputs": t.prediction or "(nothing)",
        "Feedback": f"ResponseError: the final answer was judged wrong.\n{_outcome_text(t)}",
    }


def _answer_level(t: CaseTrace) -> dict[str, Any]:
    verdict = "The answer is correct." if not t.failed else f"The answer is wrong. The correct answer is: {t.gold}"
    return {"Inputs": {"question": t.question}, "Generated Outputs": t.prediction or "(nothing)", "Feedback": verdict}


def _op_io(graph: MemoryGraph, op_id: str | None, focus: str = "") -> tuple[dict[str, str], dict[str, str]]:
    """The blamed op's input and output values by role, as text ({} when the op is not in ``graph``)."""
    op = graph.ops.get(op_id or "")
    if op is None:
        return {}, {}
    inputs = {}
    for role, ids in op.inputs.items():
        if role == "_previous" and len(ids) > 3:
            ids = ids[-3:]
        values = [graph.variables[v].value for v in ids]
        inputs[role] = render_value(values[0] if len(values) == 1 else values, focus=focus)
    outputs = {role: render_value(graph.variables[vid].value, focus=focus) for role, vid in op.outputs.items()}
    if op.status == "failed":
        outputs["error"] = f"the step failed: {op.error}; raw reply: {render_value(op.raw, 400)}"
    return inputs, outputs


def _latest(graph: MemoryGraph, name: str) -> Any:
    version = graph.latest.get(name)
    return None if version is None else graph.variables[f"{name}@{version}"].value


def unattributed_signal(t: CaseTrace) -> BlameSignal:
    """The ablation's label for a failure: ResponseError at the answer op, meant for every prompt."""
    name = f"answer:{t.case.qa_id}"
    qa_op = t.graph.producer.get(t.graph.latest_id(name)) if name in t.graph.latest else None
    return BlameSignal(
        case_id=t.case.qa_id, question=t.question, gold=t.gold, prediction=t.prediction,
        error_type="ResponseError", op_id=qa_op, prompt_component=None,
        reason="unattributed ablation: every failure is labelled ResponseError and sent to all prompts",
        method=UNATTRIBUTED_METHOD, confidence=0.0,
    )
