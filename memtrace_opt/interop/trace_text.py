"""A run's memory graphs as text for a person: what ``memtrace-opt trace show`` prints.

Without a question, one line per question with its answer and judgement; with one, the question's
slice session by session: each op with its category, prompt component and status, the variables it
read and wrote (messages, memory units with their versions, the retrieved context, the answer, the
judgement) and a short preview of each value, under a header with the evidence turns (and whether
the answer op read them), the dataset audit's flags and the run's blame. Plain lines, so the same
view serves a terminal, a log and a test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memtrace_opt import rundir as rd
from memtrace_opt.attribution.failures import build_case
from memtrace_opt.attribution.text import value_text
from memtrace_opt.errors import GraphError, MemtraceError
from memtrace_opt.graph.model import MemoryGraph, Operation
from memtrace_opt.graph.outcome import MissingOutcomeError
from memtrace_opt.graph.queries import question_slice, short_value
from memtrace_opt.interop.run_graphs import RunGraphs
from memtrace_opt.run.assemble import load_conversations
from memtrace_opt.rundir.schemas import read_blame

__all__ = ["op_heading", "question_ids", "render_questions", "render_slice", "show"]

_WIDTH = 90


def question_ids(g: MemoryGraph) -> list[str]:
    """The ids of the questions answered in ``g`` (from its ``answer:<qa id>`` variables), in order."""
    return [name.removeprefix("answer:") for name in g.latest if name.startswith("answer:")]


def _value(g: MemoryGraph, name: str, width: int = _WIDTH) -> str | None:
    return short_value(g.value(g.latest_id(name)), width) if name in g.latest else None


def render_questions(conversation: str, g: MemoryGraph) -> list[str]:
    """One line per question: id, answer and judgement previews."""
    lines = [f"{conversation}: {len(g.ops)} ops, {sum(o.status != 'ok' for o in g.ops.values())} failed, "
             f"{len(question_ids(g))} questions"]
    for qa in question_ids(g):
        verdict = _value(g, f"judgement:{qa}", 40)
        lines.append(f"  {qa}  answer={_value(g, f'answer:{qa}', 50)}" + (f"  judgement={verdict}" if verdict else ""))
    return lines


def render_slice(g: MemoryGraph, qa_id: str, conversation: str = "", *, blame: dict[str, Any] | None = None,
                 width: int = _WIDTH, qa: Any = None) -> list[str]:
    """The question's slice as text: a header (question, gold, answer, judgement, evidence and whether the
    answer op read it, audit flags, the run's blame when given), then ops by session."""
    s = question_slice(g, qa_id)
    lines = [f"question {qa_id}" + (f" ({conversation})" if conversation else "")]
    for label, name in (("question", "question"), ("gold", "gold"), ("answer", "answer"), ("judgement", "judgement")):
        shown = _value(s, f"{name}:{qa_id}", width)
        if shown is not None:
            lines.append(f"  {label:<9} {shown}")
    lines += _evidence_lines(g, qa_id, qa)
    if blame is not None:
        lines.append(f"  blame     {blame.get('error_type')} at {blame.get('op_id') or '(no op)'}: {blame.get('reason')}")
    failed = [o.id for o in s.ops.values() if o.status != "ok"]
    lines.append(f"  slice: {len(s.variables)} variables, {len(s.ops)} ops"
                 + (f", {len(failed)} FAILED: {', '.join(failed)}" if failed else ""))
    by_session: dict[str | None, list[Operation]] = {}
    for op in sorted(s.ops.values(), key=lambda o: o.time):
        by_session.setdefault(op.session, []).append(op)
    for session, ops in by_session.items():
        rec = s.sessions.get(session) if session else None
        extra = "".join(f", {k}={v}" for k, v in (rec.meta.items() if rec else ()) if k != "qa_id")
        lines.append("")
        lines.append(f"{session or '(no session)'}" + (f"  [{rec.kind}{extra}]" if rec else ""))
        for op in ops:
            lines += _render_op(s, op, width)
    return lines


def _evidence_lines(g: MemoryGraph, qa_id: str, qa: Any = None) -> list[str]:
    """The annotated evidence turns, each marked by whether its text reached the answer op verbatim, and the
    dataset audit's flags: the first thing to check when deciding why an answer failed."""
    try:
        case = build_case(g, qa_id, qa)
    except MissingOutcomeError:
        return []
    read = " ".join(value_text(g.value(v)) for v in (g.ops[case.qa_op].input_ids() if case.qa_op in g.ops else ()))
    marks = []
    for turn in case.evidence:
        name = f"message:{turn}"
        message = g.value(g.latest_id(name)) if name in g.latest else None
        text = message.get("text") if isinstance(message, dict) else message
        status = "not in this graph" if text is None else (
            "read by the answer op" if str(text).strip() and str(text).strip() in read else "NOT in the answer op's input")
        marks.append(f"{turn} ({status})")
    lines = [f"  evidence  {', '.join(marks)}"] if marks else ["  evidence  (none annotated)"]
    audit = sorted(f for f in case.flags if f.startswith("audit_"))
    if audit:
        lines.append(f"  audit     {', '.join(audit)}" + (f"; corrected answer: {case.corrected_answer}"
                                                          if case.corrected_answer else ""))
    return lines


def op_heading(op: Operation) -> str:
    """An op's line in every text view: id, category, prompt component, and whether a replay reused it."""
    prompt = f" · prompt {op.prompt.component}" if op.prompt else ""
    reused = " · reused" if op.reused else ""
    return f"  ● {op.id}  [{op.category}{prompt}{reused}]"


def _render_op(g: MemoryGraph, op: Operation, width: int = _WIDTH) -> list[str]:
    lines = [op_heading(op)]
    if op.status != "ok":
        lines.append(f"    ✗ FAILED: {op.error or op.status}")
        if op.raw:
            lines.append(f"      raw reply: {short_value(op.raw, width)}")
    shown_inputs: set[str] = set()
    for role, ids in sorted(op.inputs.items(), key=lambda item: item[0] == "_previous"):
        for vid in ids:
            if role == "_previous" and vid in shown_inputs:
                continue  # the version an update replaces, already listed under its own role
            shown_inputs.add(vid)
            lines.append(f"    ← {role:<10} {vid:<28} {short_value(g.value(vid), width - 30)}")
    for role, vid in op.outputs.items():
        var = g.variables[vid]
        shown = "(deleted)" if var.deleted else short_value(var.value, width - 30)
        lines.append(f"    → {role:<10} {vid:<28} {shown}")
    return lines


def show(run_dir: str, question: str | None, conversation: str | None, *, full: bool = False,
         with_blame: bool = True) -> list[str]:
    """What ``trace show`` prints, as lines (raises :class:`GraphError` on a missing run or question)."""
    run = RunGraphs(run_dir)
    if question is None:
        return [line for conv, g in run.graphs(conversation) for line in render_questions(conv, g)]
    for conv, g in run.graphs(conversation):
        if f"answer:{question}" in g.latest:
            return render_slice(g, question, conv, blame=_run_blame(run_dir, question) if with_blame else None,
                                width=10**6 if full else _WIDTH, qa=_dataset_qa(run_dir, conv, question))
    where = f"conversation {conversation!r}" if conversation else f"any conversation of {run_dir}"
    raise GraphError(f"question {question!r} is not answered in {where}")


def _dataset_qa(run_dir: str, conversation: str, question: str) -> Any:
    """The question as the run's dataset has it (evidence turns, audit flags), or None when the run has no
    config.yaml or its dataset cannot be read here (the slice is still shown, without evidence)."""
    if not (Path(run_dir) / rd.CONFIG_FILE).exists():
        return None
    try:
        conv = load_conversations(rd.read_config(run_dir)).get(conversation)
    except MemtraceError:
        return None  # e.g. the dataset path of another machine
    return next((q for q in conv.qa if q.id == question), None) if conv is not None else None


def _run_blame(run_dir: str, question: str) -> dict[str, Any] | None:
    """The question's signal in RUN_DIR/blame.json (written by ``attribute``/``optimize``), if there is one."""
    path = Path(run_dir) / "blame.json"
    if not path.exists():
        return None
    return next((s for s in read_blame(path)["signals"] if s.get("case_id") == question), None)
