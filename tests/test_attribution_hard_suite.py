"""The harder injection suite on the scripted Mem0-like system: planning per class, and attribution of its cases."""

from __future__ import annotations

import pytest

from memtrace_opt.bench.attribution import bench_payload, run_methods
from memtrace_opt.bench.cases import CaseBuilder
from memtrace_opt.attribution.content import TokenJudge, make_fact
from memtrace_opt.attribution.counterfactual import CounterfactualAttributor
from memtrace_opt.attribution.failures import collect_cases
from memtrace_opt.bench.inject import inject_case
from memtrace_opt.bench.inject_hard import HARD_KINDS, plan_hard_injections, rewrite_fact
from memtrace_opt.attribution.tracing import TracingAttributor
from tests.test_attribution_system import ScriptLM, record_tt, rerun_tt

QAS = [{"id": "h1", "question": "Where does Tom live?", "answer": "Leeds near the canal", "evidence": ["D1:2"]}]


def lms():
    return {"task": ScriptLM(), "judge": ScriptLM()}


@pytest.fixture(scope="module")
def recorded():
    graph, _ = record_tt(qas=QAS)
    [case] = collect_cases(graph)
    assert not case.failed  # the clean run answers it
    return graph, case


def test_each_class_is_planned_where_the_graph_allows_it_and_skipped_with_a_reason(recorded):
    graph, case = recorded
    plans, skipped = plan_hard_injections(graph, case)
    kinds = {p.kind: p for p in plans}
    assert {"partial", "other-speaker", "meaning-negation", "judged-wrongly"} <= set(kinds)
    assert kinds["partial"].error_type == "ExtractionError" and "tt.extract" in kinds["partial"].op_id
    assert kinds["judged-wrongly"].error_type == "JudgeError" and kinds["judged-wrongly"].op_id == case.judge_op
    assert skipped["trim"] == "fewer than two evidence facts"
    assert skipped["index-write"] == "no copy of a memory unit that retrieval searches"  # units are read directly
    assert set(kinds) | set(skipped) == set(HARD_KINDS)


def test_a_partial_extraction_is_found_by_the_counterfactual_arbiter(recorded):
    graph, case = recorded
    [partial] = [p for p in plan_hard_injections(graph, case)[0] if p.kind == "partial"]
    injected = inject_case(graph, case, partial, rerun_tt(qas=QAS), lms())
    assert not isinstance(injected, str), injected
    assert "canal" not in injected.case.prediction.lower() and "leeds" in injected.case.prediction.lower()
    cf = CounterfactualAttributor(TracingAttributor(embed=None), rerun_tt(qas=QAS), lms(), base=partial.overrides)
    blame = cf.attribute(injected.graph, injected.case)
    assert (blame.error_type, blame.op_id) == ("ExtractionError", partial.op_id)


def test_a_correct_answer_judged_wrong_is_a_judge_error(recorded):
    graph, case = recorded
    [judged] = [p for p in plan_hard_injections(graph, case)[0] if p.kind == "judged-wrongly"]
    injected = inject_case(graph, case, judged, rerun_tt(qas=QAS), lms())
    assert not isinstance(injected, str), injected
    blame = TracingAttributor(embed=None).attribute(injected.graph, injected.case)
    assert (blame.error_type, blame.op_id) == ("JudgeError", case.judge_op) and blame.prompt_component is None


def test_rewrites_touch_only_the_parts_that_carry_the_fact():
    fact = make_fact("m", {"speaker": "Tom", "text": "I live in Leeds near the canal."}, "Where does Tom live?",
                     "Leeds near the canal")
    value = [{"text": "Tom: I live in Leeds near the canal.", "topic": "Tom:home"}, {"text": "Priya: likes tea"}]
    out = rewrite_fact(value, fact, TokenJudge(), str.upper)
    assert out == [{"text": "TOM: I LIVE IN LEEDS NEAR THE CANAL.", "topic": "Tom:home"}, {"text": "Priya: likes tea"}]


def test_the_hard_suite_is_reported_per_class(recorded):
    graph, _ = recorded
    builder = CaseBuilder(per_type=1, max_real=0, suite="hard")
    builder.add_run(graph, [type("Q", (), {"id": "h1"})()], rerun_tt(qas=QAS), lms(), system="mem0", real=False)
    kinds = {c.kind for c in builder.cases}
    assert {"partial", "judged-wrongly"} <= kinds and all(c.source == "injected" for c in builder.cases)
    # the scripted answerer is not speaker-aware: that case still answers right, a counted skip
    assert any("still answered correctly" in why for why in builder.skipped_summary().get("mem0/other-speaker", {}))
    results = run_methods(builder.cases, {"tracing": TracingAttributor(embed=None)}, lms=lms())
    row = bench_payload(results)["rows"][0]
    assert set(row["by_class"]) == kinds and row["by_class"]["judged-wrongly"]["type_accuracy"] == 1.0
    with pytest.raises(ValueError, match="unknown injection suite"):
        CaseBuilder(per_type=1, suite="harder")


def test_a_meaning_edit_rewrites_what_was_said_never_who_said_it():
    """A negation once landed in the speaker field ("It is not true that john") and left the line as it was."""
    from memtrace_opt.bench.inject_hard import _negation_edit

    line = {"turn_id": "D2:24", "speaker": "John", "text": "We made pizza! We had so much fun making them together."}
    fact = make_fact("message:D2:24@1", line, "What kind of meal did John and his family make together?", "pizza",
                     speakers=("John", "Maria"))
    negated = rewrite_fact([line], fact, TokenJudge(), _negation_edit)[0]
    assert negated["speaker"] == "John" and negated["text"] != line["text"]
    swapped = rewrite_fact([line], fact, TokenJudge(), lambda t: t.replace("John", "Maria"), speaker_field=True)[0]
    assert swapped["speaker"] == "Maria"


def test_a_date_edit_moves_a_relatively_dated_event_and_the_judge_sees_it():
    """LoCoMo's turns date events relatively ("yesterday"), the session supplying the year: the date
    edit replaces that phrase, keeping every other word, and the content test no longer counts it."""
    from memtrace_opt.bench.inject_hard import _date_edit
    msg = {"speaker": "Caroline", "text": "I went to the support group yesterday and it was powerful.",
           "date": "1:56 pm on 8 May, 2023"}
    fact = make_fact("message:D1:3", msg, "When did Caroline go to the support group?", "7 May 2023",
                     speakers=("Caroline", "Melanie"))
    context = [dict(msg), {"speaker": "Melanie", "text": "That's great!", "date": "1:56 pm on 8 May, 2023"}]
    judge = TokenJudge()
    assert judge.holds(fact, context).holds
    edited = rewrite_fact(context, fact, judge, _date_edit)
    assert edited[0]["text"] == "I went to the support group back in 2009 and it was powerful."
    assert edited[0]["date"] == msg["date"] and edited[1] == context[1]
    assert not judge.holds(fact, edited).holds
    assert _date_edit("We met in 2021, two weeks ago.") == "We met in 2018, two weeks ago."
    assert _date_edit("I just love it.") == "I just love it."  # no time named: nothing to move
