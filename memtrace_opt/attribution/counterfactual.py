"""Counterfactual verification: fix the blamed op's output, replay, and see whether the answer is rescued.

Each candidate carries the fix its error type calls for, applied as a replay override in the shape
the op recorded: the evidence fact added to an extraction's output (a list gets one more item, a
text one more line); the pre-update unit value restored; a deleted unit kept (a tombstone cannot
carry a value, so the pre-deletion value is put back where this question's retrieval reads the
store); the evidence-bearing unit added to the retrieved context. A ResponseError has no
meaningful fix short of handing the model the gold answer: it is recorded as not applicable.

Replay re-runs only what the override changes, including the judge, so "rescued" means the re-judged
score is 1. Among candidates (earliest first), the earliest whose fix rescues is chosen.

**Compound failures.** When the earliest fault's fix replays cleanly and the answer stays wrong, the
replayed graph is traced again: the first fault it names downstream (the answer op misreading the
evidence it now has, a retrieval that still misses the restored unit) is a link of the blame's
``chain``, and its own fix is applied on top and replayed, up to ``max_chain`` links. The blamed op
stays the earliest decisive one; the chain says which other ops' prompts the failure speaks to, so
the optimizer can fix both halves of a compound fault rather than neither.

**The grey-zone arbiter.** Tracing blames the answer op when the content test finds the evidence in
the retrieved context — but a context holding half of the evidence's words may not carry its meaning.
Before a ResponseError stands, the raw evidence messages are put into the context and the answer is
replayed. If that rescues it, the context did not really hold the evidence: tracing runs again with a
strict content test (the grey zone counts as *not* held) and its earliest upstream memory fault
becomes the first candidate to verify. If the answer stays wrong, the ResponseError is confirmed.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, cast

from memtrace_opt.attribution.blame import MEMORY_ERROR_TYPES, BlameSignal, ChainedFault
from memtrace_opt.attribution.content import ContentJudge, TokenJudge, message_source
from memtrace_opt.attribution.cost import CostMeter
from memtrace_opt.attribution.failures import FailureCase, build_case, case_qa
from memtrace_opt.attribution.tracing import Candidate, TracingAttributor, blame_from, dedup_candidates
from memtrace_opt.attribution.view import answer_ops
from memtrace_opt.errors import MissingOutcomeError, UnknownOperationError
from memtrace_opt.graph import MemoryGraph, Overrides, read_judged_outcome, replay
from memtrace_opt.graph.model import MEMORY_UNIT, RETRIEVED
from memtrace_opt.graph.replay import Rerun
from memtrace_opt.lm.base import LMClient
from memtrace_opt.lm.budget import with_call_budget

__all__ = ["CounterfactualAttributor", "Verdict", "add_record", "build_fix", "evidence_fix", "inject_text",
           "merge_overrides", "strict_judge", "verify"]


@dataclass(frozen=True)
class Verdict:
    """What replaying one candidate's fix did."""

    candidate: Candidate
    applicable: bool
    rescued: bool | None
    new_answer: str | None = None
    note: str = ""
    lm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: The replay itself raised: no verdict. Counted and reported by the attributor, never silent.
    failed: bool = False
    #: The replayed graph (None when nothing was replayed): where a compound failure's next fault is traced.
    graph: MemoryGraph | None = field(default=None, repr=False, compare=False)


def inject_text(value: Any, text: str, *, template: Any = None, source: Mapping[str, str] | None = None) -> Any:
    """``value`` with ``text`` added in its own shape: one more list item, one more line, a longer text field.

    An empty list gives no shape to copy; ``template`` (an item of the same op's output elsewhere in
    the run) does. A record made from another record must not keep that record's provenance: with
    ``source`` (the evidence message's speaker, text, date and turn, :func:`message_source`) the new
    record takes those fields from the message, not from the record it was shaped after.
    """
    if isinstance(value, list):
        model = value[0] if value else template
        if isinstance(model, dict):
            return [*value, _record_like(model, text, source)]
        return [*value, text]
    if isinstance(value, dict):
        for key in ("facts", "memories", "records", "items"):
            if isinstance(value.get(key), list):
                return {**value, key: inject_text(value[key], text, source=source)}
        return _record_like(value, f"{_dict_text(value)}\n{text}".strip())
    if isinstance(value, str) or value is None:
        return f"{value or ''}\n{text}".strip()
    return value


def add_record(context: Any, unit_value: Any, source: Mapping[str, str] | None = None) -> Any:
    """``context`` (a list of records, or a text) with the unit ``unit_value`` added first (``source``: as in
    :func:`inject_text`)."""
    text = unit_value.get("text", "") if isinstance(unit_value, dict) else str(unit_value)
    if isinstance(context, list):
        if context and isinstance(context[0], dict):
            rec = _record_like(context[0], text, source)
            if isinstance(unit_value, dict):
                rec.update({k: v for k, v in unit_value.items() if k in context[0]})
            return [rec, *context]
        if not context and isinstance(unit_value, dict):
            return [dict(unit_value)]
        return [text, *context]
    return inject_text(context, text)


def _record_like(template: dict[str, Any], text: str, source: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A copy of ``template`` saying ``text``; with ``source``, its speaker, date and turn are the message's
    (a record that names its speaker apart gets the message's own text, not the speaker-prefixed line)."""
    rec = copy.deepcopy(template)
    key = next((k for k in ("text", "memory", "content", "fact") if k in rec), "text")
    src = source or {}
    if "speaker" in rec and src.get("speaker") and src.get("text"):
        rec["speaker"], rec[key] = src["speaker"], src["text"]
    else:
        rec[key] = text
    if src.get("turn_id"):
        if "turn_id" in rec:
            rec["turn_id"] = src["turn_id"]
        if "turn_ids" in rec:
            rec["turn_ids"] = [src["turn_id"]]
    for date_key in ("date", "date_time"):
        if date_key in rec and src.get("date"):
            rec[date_key] = src["date"]
    return rec


def _dict_text(value: dict[str, Any]) -> str:
    keys = ("text", "memory", "content", "fact")
    return next((cast(str, value[k]) for k in keys if isinstance(value.get(k), str)), "")


def build_fix(graph: MemoryGraph, case: FailureCase, cand: Candidate) -> tuple[Overrides, str] | None:
    """The replay overrides applying ``cand``'s fix and the op they start from; None when not applicable."""
    kind, op_id = cand.fix.get("kind"), cand.op_id
    if kind == "inject" and op_id is not None and op_id in graph.ops:
        role, vid = _content_output(graph, op_id)
        if role is None or vid is None:
            return None
        new = inject_text(graph.value(vid), cand.fix["text"], template=_item_template(graph, op_id, role),
                          source=cand.fix.get("source"))
        return Overrides(op_outputs={op_id: {role: new}}), op_id
    if kind == "restore":
        return _restore(graph, case, cand)
    if kind == "add_record" and op_id is not None and op_id in graph.ops:
        role, vid = _content_output(graph, op_id)
        if role is None or vid is None:
            return None
        return Overrides(op_outputs={op_id: {role: add_record(graph.value(vid), cand.fix["value"])}}), op_id
    return None


def evidence_fix(graph: MemoryGraph, case: FailureCase, message_ids: list[str]) -> tuple[Overrides, str] | None:
    """Overrides putting the raw evidence messages (date, speaker, text) first in the answer's retrieved
    context, and the op they start from; None when the run has no retrieved context to extend."""
    target = graph.producer.get(case.retrieved_var or "")
    if target is None:
        return None
    role, vid = _content_output(graph, target)
    if role is None or vid is None:
        return None
    value = graph.value(vid)
    dated = isinstance(value, list) and bool(value) and isinstance(value[0], dict) and "date" in value[0]
    for mid in reversed(message_ids):
        message = graph.value(mid)
        if dated and isinstance(message, dict):  # the record's own date field shows the date, not the line too
            message = {k: v for k, v in message.items() if k not in ("date", "date_time")}
        value = add_record(value, _message_line(message), message_source(mid, graph.value(mid)))
    return Overrides(op_outputs={target: {role: value}}), target


def _message_line(value: Any) -> str:
    if not isinstance(value, dict):
        return str(value)
    date = value.get("date") or value.get("date_time")
    line = f"{value.get('speaker', '')}: {value.get('text', '')}".strip(": ")
    return f"[{date}] {line}" if date else line


def strict_judge(judge: ContentJudge) -> TokenJudge:
    """The token test that holds only where it is sure (its grey zone counts as not held)."""
    base = judge if isinstance(judge, TokenJudge) else TokenJudge()
    return replace(base, miss_below=base.hold_at, decide=True)


def _content_output(graph: MemoryGraph, op_id: str) -> tuple[str | None, str | None]:
    """The output role of ``op_id`` holding content (a list, text or record), preferring retrieved contexts."""
    op = graph.ops[op_id]
    roles = sorted(op.outputs.items(), key=lambda rv: graph.variables[rv[1]].category != RETRIEVED)
    for role, vid in roles:
        if isinstance(graph.value(vid), (list, str, dict)):
            return role, vid
    return None, None


def _item_template(graph: MemoryGraph, op_id: str, role: str) -> Any:
    """An item of a non-empty list that another run of the same op produced under ``role``."""
    name = graph.ops[op_id].name
    for op in graph.ops.values():
        if op.name == name and role in op.outputs:
            value = graph.value(op.outputs[role])
            if isinstance(value, list) and value:
                return value[0]
    return None


def _restore(graph: MemoryGraph, case: FailureCase, cand: Candidate) -> tuple[Overrides, str] | None:
    executor, var = cand.fix.get("executor"), cand.fix["var"]
    op = graph.ops.get(executor or "")
    if op is not None and not graph.variables[var].deleted:
        role = next(r for r, v in op.outputs.items() if v == var)
        return Overrides(op_outputs={op.id: {role: cand.fix["value"]}}), op.id
    for ans_op in answer_ops(graph, case.qa_id):  # keep the deleted unit where this question reads the store
        for role, ids in ans_op.inputs.items():
            if ids and role != "_previous" and all(graph.variables[i].category == MEMORY_UNIT for i in ids):
                values = [graph.value(i) for i in ids] + [cand.fix["value"]]
                return Overrides(op_inputs={ans_op.id: {role: values}}), ans_op.id
    target = graph.producer.get(case.retrieved_var or "")
    if target is None:
        return None
    out_role, vid = _content_output(graph, target)
    if out_role is None or vid is None:  # no content output to put the unit back into: no fix, like the branches above
        return None
    return Overrides(op_outputs={target: {out_role: add_record(graph.value(vid), cand.fix["value"])}}), target


def merge_overrides(base: Overrides, extra: Overrides) -> Overrides:
    """``base`` with ``extra`` on top (per op and role, ``extra`` wins)."""
    def merged(a: Mapping[str, Mapping[str, Any]], b: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
        out = {op: dict(roles) for op, roles in a.items()}
        for op, roles in b.items():
            out.setdefault(op, {}).update(roles)
        return out

    return Overrides(prompts={**base.prompts, **extra.prompts}, op_outputs=merged(base.op_outputs, extra.op_outputs),
                     op_inputs=merged(base.op_inputs, extra.op_inputs))


def verify(graph: MemoryGraph, case: FailureCase, cand: Candidate, rerun: Rerun,
           lms: Mapping[str, LMClient], *, base: Overrides | None = None) -> Verdict:
    """Replay ``graph`` with ``cand``'s fix and re-judge ``case``'s answer.

    ``base`` are overrides the recorded run itself was made with (an injected fault): replay must
    re-apply them, or ops that are never memoized would silently undo the fault.
    """
    fix = build_fix(graph, case, cand)
    if fix is None:
        return Verdict(cand, False, None, note=f"no counterfactual fix for {cand.error_type}")
    return replay_fix(graph, case, cand, fix, rerun, lms, base=base)


def replay_fix(graph: MemoryGraph, case: FailureCase, cand: Candidate, fix: tuple[Overrides, str], rerun: Rerun,
               lms: Mapping[str, LMClient], *, base: Overrides | None = None) -> Verdict:
    """Replay ``graph`` with ``fix`` (overrides, start op) and re-judge ``case``'s answer."""
    overrides, start = fix
    if base is not None and not base.is_empty():
        overrides = merge_overrides(base, overrides)
    try:
        result = replay(graph, rerun, from_op=start, overrides=overrides, lms=lms)
    except UnknownOperationError:
        raise  # a set-up defect (a module not imported) would silently void every verification
    except Exception as err:  # a system that cannot replay this fix: recorded on the verdict, not raised
        return Verdict(cand, True, None, note=f"replay failed: {type(err).__name__}: {err}", failed=True)
    new = result.graph
    executed = [new.ops[o] for o in result.stats.executed if o in new.ops]
    calls = [c for op in executed for c in op.lm_calls]
    cost = (result.stats.lm_calls, sum(c.prompt_tokens for c in calls), sum(c.completion_tokens for c in calls))
    try:
        outcome = read_judged_outcome(new, case.qa_id)
    except MissingOutcomeError as err:  # the replay ran but left the question unjudged: no verdict, counted
        return Verdict(cand, True, None, None, f"replayed from {start}: {err}", *cost, failed=True)
    return Verdict(cand, True, outcome.correct, outcome.prediction,
                   f"replayed from {start}; new answer {outcome.prediction!r}, score {outcome.score}", *cost,
                   graph=new)


@dataclass
class CounterfactualAttributor:
    """Tracing, then counterfactual replay of up to ``max_candidates`` candidates to choose and score them."""

    tracing: TracingAttributor
    rerun: Rerun
    lms: Mapping[str, LMClient]
    max_candidates: int = 3
    name: str = "tracing+cf"
    base: Overrides = field(default_factory=Overrides)
    max_replay_calls: int | None = None  # a fix whose replay needs more LM calls gets no verdict
    #: ``(case id, why)`` of every verification whose replay raised: reported by the caller, never dropped.
    verification_failures: list[tuple[str, str]] = field(default_factory=list)
    #: Replay a ResponseError with the raw evidence in the context before it stands (module docstring).
    arbitrate: bool = True
    #: Links of a compound failure traced past an unrescuing fix (module docstring); 0 turns it off.
    max_chain: int = 2

    def attribute(self, graph: MemoryGraph, case: FailureCase) -> BlameSignal:
        meter = CostMeter(self.tracing.meters).start()
        result = self.tracing.trace(graph, case)
        candidates, arbiter = result.candidates, ""
        if self.arbitrate and candidates[0].error_type == "ResponseError" and result.evidence_source not in (
                "audit", "judge", "abstention") and result.facts:
            candidates, arbiter = self._arbitrate(graph, case, result.facts, candidates, meter)
        verdicts = []
        for cand in candidates[: self.max_candidates]:
            verdict = self._verify(graph, case, cand, build_fix(graph, case, cand), meter)
            verdicts.append(verdict)
            if verdict.rescued:
                break
        chosen, rescued, confidence = _choose(candidates, verdicts)
        chain = self._chain(graph, case, verdicts[0], meter) if rescued is False else ()
        notes = "; ".join([arbiter] * bool(arbiter) + [f"{v.candidate.error_type}@{v.candidate.op_id}: {v.note}"
                                                         for v in verdicts] + [_chain_note(chain)] * bool(chain))
        signal = blame_from(graph, case, chosen, method=self.name, evidence=tuple(result.facts),
                            confidence=confidence, counterfactual_rescued=rescued, cost=meter.cost(), chain=chain)
        return replace(signal, reason=f"{signal.reason} [counterfactual: {notes}]" if notes else signal.reason)

    def _verify(self, graph: MemoryGraph, case: FailureCase, cand: Candidate,
                fix: tuple[Overrides, str] | None, meter: CostMeter, *, base: Overrides | None = None) -> Verdict:
        """One replay under the call budget, counted in the case's cost; a failed replay is recorded.
        ``base``: overrides the graph was made with (default: the attributor's own)."""
        if fix is None:
            return Verdict(cand, False, None, note=f"no counterfactual fix for {cand.error_type}")
        verdict = replay_fix(graph, case, cand, fix, self.rerun, with_call_budget(self.lms, self.max_replay_calls),
                             base=self.base if base is None else base)
        meter.add_replay(verdict.lm_calls, verdict.prompt_tokens, verdict.completion_tokens)
        if verdict.failed:
            self.verification_failures.append((case.case_id, f"{cand.error_type}@{cand.op_id}: {verdict.note}"))
        return verdict

    def _chain(self, recorded: MemoryGraph, case: FailureCase, verdict: Verdict,
               meter: CostMeter) -> tuple[ChainedFault, ...]:
        """The faults still standing after ``verdict``'s fix, each traced on the graph its predecessors' fixes
        replayed, its own fix applied on top (module docstring, *compound failures*)."""
        links: list[ChainedFault] = []
        first = build_fix(recorded, case, verdict.candidate)
        if first is None or verdict.graph is None:
            return ()
        graph: MemoryGraph | None = verdict.graph
        previous, overrides = verdict.candidate, merge_overrides(self.base, first[0])
        while graph is not None and len(links) < self.max_chain:
            try:
                now = build_case(graph, case.qa_id, case_qa(case))
            except MissingOutcomeError:
                break
            found = self.tracing.trace(graph, now).candidates
            nxt = found[0] if found else None
            if (nxt is None or nxt.error_type not in MEMORY_ERROR_TYPES or nxt.op_id is None or nxt.op_id not in graph.ops
                    or (nxt.op_id, nxt.error_type) == (previous.op_id, previous.error_type)):
                break  # the fix did not carry past the fault it fixed, or what is left is no memory fault
            prompt = graph.ops[nxt.op_id].prompt
            component = prompt.component if prompt else None
            fix = build_fix(graph, now, nxt)
            if fix is None:  # a ResponseError: no fix short of handing over the gold answer
                links.append(ChainedFault(nxt.error_type, nxt.op_id, component, nxt.reason))
                break
            step = self._verify(graph, now, nxt, fix, meter, base=overrides)
            links.append(ChainedFault(nxt.error_type, nxt.op_id, component, nxt.reason, step.rescued))
            if step.rescued is not False:
                break
            graph, previous, overrides = step.graph, nxt, merge_overrides(overrides, fix[0])
        return tuple(links)

    def _arbitrate(self, graph: MemoryGraph, case: FailureCase, facts: list[str], candidates: list[Candidate],
                   meter: CostMeter) -> tuple[list[Candidate], str]:
        """The grey-zone arbiter (module docstring): the candidates to verify, and what the replay showed."""
        verdict = self._verify(graph, case, candidates[0], evidence_fix(graph, case, facts), meter)
        if verdict.rescued is not True:
            if verdict.rescued is False:
                return candidates, f"arbiter: the answer stays wrong with the raw evidence in its context ({verdict.note})"
            return candidates, f"arbiter: no verdict ({verdict.note})"
        strict = replace(self.tracing, judge=strict_judge(self.tracing.judge)).trace(graph, case)
        upstream = [c for c in strict.candidates if c.error_type != "ResponseError"]
        if not upstream:
            return candidates, "arbiter: the raw evidence rescued the answer, yet the strict test finds it in the context"
        first = upstream[0]
        return dedup_candidates(upstream + candidates), (
            f"arbiter: the raw evidence in the context rescued the answer, so the context did not hold it; "
            f"strict content test: {first.error_type}@{first.op_id}")


def _chain_note(chain: tuple[ChainedFault, ...]) -> str:
    """The chain in the blame's reason: ``compound: then ResponseError@op (fix rescues: …)``."""
    outcome = {True: "fixing it too rescues the answer", False: "still wrong with it fixed too", None: "no fix"}
    return "compound: " + "; then ".join(f"{link.error_type}@{link.op_id} ({outcome[link.rescued]})"
                                          for link in chain)


def _choose(candidates: list[Candidate], verdicts: list[Verdict]) -> tuple[Candidate, bool | None, float]:
    for v in verdicts:
        if v.rescued:
            return v.candidate, True, 0.95
    first = verdicts[0] if verdicts else None
    if first is None or not first.applicable or first.rescued is None:
        return candidates[0], None, 0.6
    return candidates[0], False, 0.4
