"""Counterfactual replay: each blamed fault's fix rescues the answer; ResponseError has no fix; injected
faults are re-applied so a fix is judged on the faulty run, not on a silently repaired one."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from memtrace_opt.attribution.counterfactual import (
    CounterfactualAttributor,
    add_record,
    build_fix,
    inject_text,
    merge_overrides,
    verify,
)
from memtrace_opt.attribution.failures import collect_cases, collect_failures
from memtrace_opt.bench.inject import inject_case, plan_injections
from memtrace_opt.attribution.content import TokenJudge
from memtrace_opt.attribution.tracing import Candidate, TracingAttributor
from memtrace_opt.graph import Overrides
from tests.test_attribution_system import ScriptLM, record_tt, rerun_tt


def lms():
    return {"task": ScriptLM(), "judge": ScriptLM()}


@pytest.fixture(scope="module")
def recorded():
    return record_tt()[0]


@pytest.fixture(scope="module")
def injected(recorded):
    """One injected case per type (question q1 allows all five)."""
    case = next(c for c in collect_cases(recorded) if c.qa_id == "q1")
    plans, _ = plan_injections(recorded, case)
    return {inj.error_type: (inj, inject_case(recorded, case, inj, rerun_tt(), lms())) for inj in plans}


def attributor(base=Overrides()):
    return CounterfactualAttributor(TracingAttributor(embed=None), rerun_tt(), lms(), base=base)


@pytest.mark.parametrize("error_type", ["ExtractionError", "UpdateError", "DeletionError", "RetrievalError"])
def test_fix_of_the_blamed_op_rescues_the_injected_case(injected, error_type):
    inj, ic = injected[error_type]
    blame = attributor(inj.overrides).attribute(ic.graph, ic.case)
    assert (blame.error_type, blame.op_id) == (error_type, inj.op_id)
    assert blame.counterfactual_rescued is True and blame.confidence == 0.95
    assert blame.cost.replays == 1 and blame.cost.llm_calls >= 1  # the re-asked answer and its re-judging
    assert "score 1" in blame.reason


def test_response_error_has_no_counterfactual_fix_but_the_arbiter_confirms_it(injected):
    inj, ic = injected["ResponseError"]
    blame = attributor(inj.overrides).attribute(ic.graph, ic.case)
    assert blame.error_type == "ResponseError" and blame.counterfactual_rescued is None
    assert "no counterfactual fix" in blame.reason
    # the one replay is the arbiter's: the raw evidence in the context does not rescue a wrong answer op
    assert blame.cost.replays == 1 and "stays wrong with the raw evidence" in blame.reason


GREY_QA = [{"id": "g1", "question": "Where does Tom live?", "answer": "Leeds canal", "evidence": ["D1:2"]}]
#: Extraction keeps half of the evidence ("canal", not "Leeds"): a grey-zone partial match downstream.
PARTIAL = Overrides(op_outputs={"ingest:s1/tt.extract#1": {
    "facts": [{"text": "Tom: I live near the canal.", "topic": "Tom:home"}]}})


def test_the_arbiter_sends_a_grey_zone_response_error_upstream_to_the_op_that_lost_the_evidence():
    from memtrace_opt.graph import MemoryGraph, Tracer
    from tests.test_attribution_system import PROMPTS, SPEAKERS, ScriptLM, run_tt

    tracer = Tracer(MemoryGraph({"prompts": PROMPTS, "system": "mem0", "conversation": "c1",
                                 "speakers": list(SPEAKERS)}),
                    lms={"task": ScriptLM(), "judge": ScriptLM()}, prompts=PROMPTS, overrides=PARTIAL)
    run_tt(tracer, qas=GREY_QA)
    graph = tracer.graph
    [case] = collect_failures(graph)
    # the default tracing counts the grey zone as not held and finds the loss itself ...
    strict = TracingAttributor(embed=None).attribute(graph, case)
    assert (strict.error_type, strict.op_id) == ("ExtractionError", "ingest:s1/tt.extract#1")
    # ... a lenient one (grey zone decided at its midpoint) blames the answer: the arbiter corrects it
    lenient = TracingAttributor(judge=TokenJudge(), embed=None)
    assert lenient.attribute(graph, case).error_type == "ResponseError"
    cf = CounterfactualAttributor(lenient, rerun_tt(qas=GREY_QA), lms(), base=PARTIAL)
    blame = cf.attribute(graph, case)
    assert (blame.error_type, blame.op_id) == ("ExtractionError", "ingest:s1/tt.extract#1")
    assert blame.counterfactual_rescued is True and "did not hold it" in blame.reason
    off = CounterfactualAttributor(lenient, rerun_tt(qas=GREY_QA), lms(), base=PARTIAL,
                                   arbitrate=False).attribute(graph, case)
    assert off.error_type == "ResponseError"


def test_real_deletion_is_rescued_by_keeping_the_unit(recorded):
    [case] = collect_failures(recorded)
    blame = attributor().attribute(recorded, case)
    assert blame.error_type == "DeletionError" and blame.counterfactual_rescued is True


def test_without_the_base_overrides_a_never_memoized_fault_would_vanish(injected):
    """tt.write is not memoized: replaying the injected graph without re-applying the injection repairs it."""
    inj, ic = injected["UpdateError"]
    noop = Candidate("ExtractionError", "ingest:s1/tt.extract#0", 0, "", None,
                     {"kind": "inject", "text": "Priya: I like tea."})  # irrelevant to q1, but upstream of the fault
    repaired = verify(ic.graph, ic.case, noop, rerun_tt(), lms())
    faithful = verify(ic.graph, ic.case, noop, rerun_tt(), lms(), base=inj.overrides)
    assert repaired.rescued is True and faithful.rescued is False


@dataclass
class WithDecoy:
    """Tracing with a decoy candidate put first: an early op whose fix cannot rescue the answer."""

    inner: TracingAttributor
    decoy: Candidate
    meters: list = field(default_factory=list)

    def trace(self, graph, case):
        result = self.inner.trace(graph, case)
        return replace(result, candidates=[self.decoy, *result.candidates])


def test_earliest_rescuing_candidate_is_chosen(recorded):
    [case] = collect_failures(recorded)
    decoy = Candidate("ExtractionError", "ingest:s1/tt.extract#0", 1, "early but wrong", None,
                      {"kind": "inject", "text": "Tom: unrelated"})
    cf = CounterfactualAttributor(WithDecoy(TracingAttributor(embed=None), decoy), rerun_tt(), lms())
    blame = cf.attribute(recorded, case)
    assert blame.error_type == "DeletionError" and blame.counterfactual_rescued is True
    assert blame.cost.replays == 2 and "early but wrong" not in blame.reason.split(" [")[0]


def test_fix_shapes_follow_the_recorded_values():
    assert inject_text(["a"], "b") == ["a", "b"]
    assert inject_text([], "b", template={"text": "x", "topic": "t"}) == [{"text": "b", "topic": "t"}]
    assert inject_text("one", "two") == "one\ntwo"
    assert inject_text({"facts": ["a"], "date": "d"}, "b") == {"facts": ["a", "b"], "date": "d"}
    assert add_record([{"text": "x", "date": "d1"}], {"text": "y", "date": "d2"}) == [
        {"text": "y", "date": "d2"}, {"text": "x", "date": "d1"}]
    assert add_record("context", "unit") == "context\nunit"
    merged = merge_overrides(Overrides(op_outputs={"a": {"x": 1, "y": 2}}), Overrides(op_outputs={"a": {"y": 3}}))
    assert merged.op_outputs == {"a": {"x": 1, "y": 3}}


def test_response_candidate_builds_no_fix(recorded):
    [case] = collect_failures(recorded)
    cand = Candidate("ResponseError", case.qa_op, 0, "", None, {"kind": "none"})
    assert build_fix(recorded, case, cand) is None


def test_a_replay_that_cannot_find_an_op_is_raised_not_recorded_as_unverified(injected, monkeypatch):
    """A set-up defect (an op module never imported) must not turn into ``rescued: None`` on every case."""
    from memtrace_opt.errors import UnknownOperationError
    from memtrace_opt.graph import ops

    inj, ic = injected["ExtractionError"]
    monkeypatch.setattr(ops, "REGISTRY", {})
    with pytest.raises(UnknownOperationError):
        attributor(inj.overrides).attribute(ic.graph, ic.case)


def test_a_record_shaped_after_another_takes_the_evidence_messages_provenance():
    source = {"speaker": "Tom", "text": "I live in Leeds.", "date": "1 May 2024", "turn_id": "D1:2"}
    spoken = [{"speaker": "Priya", "text": "I adopted a cat.", "date": "8 May 2024", "turn_id": "D2:1"}]
    (_, new) = inject_text(spoken, "Tom: I live in Leeds.", source=source)
    assert new == {"speaker": "Tom", "text": "I live in Leeds.", "date": "1 May 2024", "turn_id": "D1:2"}
    docs = [{"unit": "u3", "text": "Priya: I adopted a cat.", "turn_ids": ["D2:1"], "date": "8 May 2024"}]
    (new_doc, _) = add_record(docs, "Tom: I live in Leeds.", source)
    assert new_doc == {"unit": "u3", "text": "Tom: I live in Leeds.", "turn_ids": ["D1:2"], "date": "1 May 2024"}
    # without a source the template's fields stay (the old behaviour, for restored units that carry their own)
    assert inject_text(spoken, "x")[1]["turn_id"] == "D2:1"


def test_the_arbiters_evidence_record_shows_the_message_once_with_its_own_date(recorded):
    from memtrace_opt.attribution.counterfactual import evidence_fix

    case = next(c for c in collect_cases(recorded) if c.qa_id == "q1")
    overrides, start = evidence_fix(recorded, case, ["message:D1:2@1"])
    (context,) = overrides.op_outputs[start].values()
    assert context[0]["date"] == "1 May 2024"
    assert context[0]["text"] == "Tom: home: I live in Leeds near the canal."  # no "[date]" inside the text too
