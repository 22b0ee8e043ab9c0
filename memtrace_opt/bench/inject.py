"""Fault injection: attribution cases with exact ground truth.

Take a question the system answered correctly, inject one fault at a chosen op through replay
overrides, replay, and keep the case if the answer now fails. The injected op is the earliest
decisive faulty op by construction (everything before it is as recorded; the recorded run was right).

- ExtractionError: the evidence fact dropped from the output of the first extraction op on its path
  (else the first memory-forming op that read the evidence message: a buffer, a context update).
- UpdateError: a unit version that held the fact, made by an update of a version that also held it,
  replaced by a version without the fact.
- DeletionError: the same kind of update emptied (a tombstone cannot be injected through outputs:
  the driver decides deletions), recorded as ``injection="emptied-by-update"``.
- RetrievalError: the fact's records dropped from this question's final retrieval output.
- ResponseError: the answer replaced by an abstention.

A type the graph offers no op for (no update of a holding unit, say) is skipped with a reason, and
so is a question whose gold answer the dataset audit flags as wrong: a fault injected there would
also be an AnnotationError, so it has no single ground truth.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from memtrace_opt.attribution.content import ContentJudge, Fact, TokenJudge, make_fact
from memtrace_opt.attribution.failures import FailureCase, build_case, case_qa
from memtrace_opt.attribution.priors import prior_for
from memtrace_opt.attribution.text import METADATA_KEYS, content_tokens
from memtrace_opt.attribution.tracing import judged_wrongly
from memtrace_opt.attribution.view import unit_chain
from memtrace_opt.attribution.walk import forward_walk
from memtrace_opt.graph import MemoryGraph, MissingOutcomeError, Overrides, replay
from memtrace_opt.graph.model import EXTRACTION, MEMORY_UNIT, UPDATE
from memtrace_opt.graph.replay import Rerun
from memtrace_opt.lm.base import LMClient
from memtrace_opt.lm.budget import CallBudgetExceeded

__all__ = ["INJECTABLE", "OVER_BUDGET", "InjectedCase", "Injection", "drop_fact", "inject_case", "plan_injections"]

INJECTABLE: tuple[str, ...] = ("ExtractionError", "UpdateError", "DeletionError", "RetrievalError", "ResponseError")
WRONG_ANSWER = "Not mentioned"
OVER_BUDGET = "replay over the LM-call budget"  # the skip reason when a capped replay runs out of calls
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


@dataclass(frozen=True)
class Injection:
    """One planned fault: its type, the op it is injected at (the ground truth) and the override."""

    error_type: str
    op_id: str
    overrides: Overrides
    note: str
    kind: str = "drop"


@dataclass
class InjectedCase:
    """A failing case made by an injection: the replayed graph, the case read off it, the ground truth."""

    system: str
    error_type: str
    op_id: str
    case: FailureCase
    graph: MemoryGraph
    note: str
    kind: str = "drop"
    source: str = "injected"
    meta: dict[str, Any] = field(default_factory=dict)


def drop_fact(value: Any, fact: Fact, judge: ContentJudge) -> Any:
    """``value`` without what carries ``fact``: list items, sentences of a text, fields of a record."""
    if isinstance(value, list):
        return [x for x in value if not judge.holds(fact, x).holds]
    if isinstance(value, dict):
        return {k: v if k in METADATA_KEYS else drop_fact(v, fact, judge) for k, v in value.items()}
    if isinstance(value, str):
        kept = [s for s in _SENTENCE.split(value) if s and not judge.holds(fact, s).holds]
        return " ".join(kept)
    return value


def empty_like(value: Any) -> Any:
    """An empty value of the same shape (a record keeps its metadata)."""
    if isinstance(value, list):
        return []
    if isinstance(value, dict):
        return {k: v if k in METADATA_KEYS else empty_like(v) for k, v in value.items()}
    return "" if isinstance(value, str) else value


def plan_injections(graph: MemoryGraph, case: FailureCase, *, judge: ContentJudge | None = None,
                    types: Sequence[str] = INJECTABLE) -> tuple[list[Injection], dict[str, str]]:
    """The injections possible for correctly answered ``case``, and why the other types were skipped."""
    judge = judge or TokenJudge()
    if "audit_wrong_gold" in case.flags:  # the failure would be an AnnotationError too: no single ground truth
        return [], {t: "gold flagged wrong by the dataset audit" for t in types}
    facts = _facts(graph, case)
    planners = {"ExtractionError": _plan_extraction, "UpdateError": _plan_update, "DeletionError": _plan_deletion,
                "RetrievalError": _plan_retrieval, "ResponseError": _plan_response}
    planned, skipped = [], {}
    for error_type in types:
        if not facts and error_type != "ResponseError":
            skipped[error_type] = "no annotated evidence message in the graph"
            continue
        result = planners[error_type](graph, case, facts, judge)
        if isinstance(result, Injection):
            planned.append(result)
        else:
            skipped[error_type] = result
    return planned, skipped


def _facts(graph: MemoryGraph, case: FailureCase) -> list[Fact]:
    """Evidence facts, answer-bearing ones (holding gold tokens) first."""
    facts = [make_fact(v, graph.value(v), case.question, case.gold) for v in case.evidence_vars(graph)]
    return sorted(facts, key=lambda f: not f.gold_tokens)


def _holds(judge: ContentJudge, fact: Fact, value: Any) -> bool:
    return bool(judge.holds(fact, value).holds)


def _drop_override(graph: MemoryGraph, op_id: str, vid: str, fact: Fact, judge: ContentJudge) -> Overrides | None:
    op = graph.ops[op_id]
    role = next(r for r, v in op.outputs.items() if v == vid)
    new = drop_fact(graph.value(vid), fact, judge)
    if _holds(judge, fact, new):
        return None
    return Overrides(op_outputs={op_id: {role: new}})


def _plan_extraction(graph: MemoryGraph, case: FailureCase, facts: list[Fact], judge: ContentJudge) -> Injection | str:
    prior = prior_for(case.system or graph.meta.get("system"))
    for fact in facts:
        walk = forward_walk(graph, fact, fact.id, judge=judge, qa_id=case.qa_id, prior=prior)
        ops = sorted((graph.ops[o] for o in walk.visited), key=lambda o: o.time)
        path = [o for o in ops if o.category == EXTRACTION] or [
            o for o in ops if fact.id in o.input_ids() and o.category in prior.forming]
        for op in path:
            for vid in op.output_ids():
                if _holds(judge, fact, graph.value(vid)) and (over := _drop_override(graph, op.id, vid, fact, judge)):
                    return Injection("ExtractionError", op.id, over, f"dropped {fact.id} from {vid}")
    return "no extraction or memory-forming op carries the evidence"


def _unit_updates(graph: MemoryGraph, case: FailureCase, fact: Fact, judge: ContentJudge) -> list[tuple[str, str]]:
    """(op id, var id) of updates that turned a holding unit version into another holding version."""
    rec = graph.sessions.get(f"answer:{case.qa_id}")
    qtime = rec.time if rec else 10**12
    out = []
    for name in dict.fromkeys(v.name for v in graph.variables.values() if v.category == MEMORY_UNIT):
        chain = [v for v in unit_chain(graph, name) if v.time < qtime]
        for prev, cur in zip(chain, chain[1:]):
            op_id = graph.producer.get(cur.id)
            if op_id and not cur.deleted and _holds(judge, fact, prev.value) and _holds(judge, fact, cur.value):
                if graph.ops[op_id].category == UPDATE:
                    out.append((op_id, cur.id))
    return out


def _plan_update(graph: MemoryGraph, case: FailureCase, facts: list[Fact], judge: ContentJudge) -> Injection | str:
    for fact in facts:
        for op_id, vid in _unit_updates(graph, case, fact, judge):
            if over := _drop_override(graph, op_id, vid, fact, judge):
                return Injection("UpdateError", op_id, over, f"update {op_id} made {vid} without {fact.id}")
    return "no update of a unit that already held the evidence"


def _plan_deletion(graph: MemoryGraph, case: FailureCase, facts: list[Fact], judge: ContentJudge) -> Injection | str:
    for fact in facts:
        for op_id, vid in _unit_updates(graph, case, fact, judge):
            role = next(r for r, v in graph.ops[op_id].outputs.items() if v == vid)
            over = Overrides(op_outputs={op_id: {role: empty_like(graph.value(vid))}})
            return Injection("DeletionError", op_id, over, f"update {op_id} emptied {vid}", "emptied-by-update")
    return "no update of a unit that held the evidence (deletions cannot be injected through op outputs)"


def _plan_retrieval(graph: MemoryGraph, case: FailureCase, facts: list[Fact], judge: ContentJudge) -> Injection | str:
    retrieved = case.retrieved_var
    op_id = graph.producer.get(retrieved or "")
    if op_id is None or retrieved is None:
        return "no retrieved context"
    for fact in facts:
        if _holds(judge, fact, graph.value(retrieved)):
            over = _drop_override(graph, op_id, retrieved, fact, judge)
            if over is not None:
                return Injection("RetrievalError", op_id, over, f"dropped {fact.id} from {retrieved}")
    return "the retrieved context does not hold the evidence"


def _plan_response(graph: MemoryGraph, case: FailureCase, facts: list[Fact], judge: ContentJudge) -> Injection | str:
    if case.qa_op is None or case.answer_var is None:
        return "no answer op"
    if not content_tokens(case.gold) or content_tokens(case.gold) <= content_tokens(WRONG_ANSWER):
        return "the gold answer is itself an abstention"
    role = next(r for r, v in graph.ops[case.qa_op].outputs.items() if v == case.answer_var)
    return Injection("ResponseError", case.qa_op, Overrides(op_outputs={case.qa_op: {role: WRONG_ANSWER}}),
                     f"answer replaced by {WRONG_ANSWER!r}", "corrupted-answer")


def inject_case(graph: MemoryGraph, case: FailureCase, injection: Injection, rerun: Rerun,
                lms: Mapping[str, LMClient], *, qa: Any = None) -> InjectedCase | str:
    """Replay ``graph`` with ``injection``; the injected case if the answer now fails, else why not."""
    try:
        result = replay(graph, rerun, from_op=injection.op_id, overrides=injection.overrides, lms=lms)
    except CallBudgetExceeded:
        return OVER_BUDGET
    except Exception as err:  # a system that cannot replay this fault: recorded as a skip reason
        return f"replay failed: {type(err).__name__}: {err}"
    try:
        new_case = build_case(result.graph, case.qa_id, qa or case_qa(case))
    except MissingOutcomeError:  # recorded as a skip reason, counted by the bench like any other
        return "the replayed graph has no judgement for the question"
    if not new_case.failed:
        return f"still answered correctly ({new_case.prediction!r})"
    if injection.error_type != "JudgeError" and (why := judged_wrongly(new_case)):
        # the fault left the answer right and the judge rejected it: the failure is the judge's, so a
        # label naming the injected op would be false (a trim that left "Dance it out." for "by dancing")
        return f"still answered correctly by a stricter judgement ({why})"
    system = case.system or str(graph.meta.get("system") or "")
    return InjectedCase(system, injection.error_type, injection.op_id, new_case, result.graph, injection.note,
                        injection.kind, meta={"replay_lm_calls": result.stats.lm_calls})

