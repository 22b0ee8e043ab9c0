"""Tracing finds the injected fault (type and op) of every fault type; content tests; evidence; failures."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from memtrace_opt.attribution.content import CascadeJudge, LLMContentJudge, TokenJudge, make_fact
from memtrace_opt.attribution.evidence import evidence_recall_at_k, pseudo_evidence, rrf
from memtrace_opt.attribution.failures import collect_cases, collect_failures
from memtrace_opt.bench.inject import inject_case, plan_injections
from memtrace_opt.attribution.tracing import TracingAttributor
from memtrace_opt.lm.base import LMResult
from tests.test_attribution_system import QAS, ScriptLM, record_tt, rerun_tt


def lms():
    return {"task": ScriptLM(), "judge": ScriptLM()}


@pytest.fixture(scope="module")
def recorded():
    return record_tt()[0]


def injected_cases(graph):
    """Every injection the tt run allows, replayed: (injection, injected case)."""
    out = []
    for case in collect_cases(graph):
        if case.failed:
            continue
        plans, _ = plan_injections(graph, case)
        for inj in plans:
            result = inject_case(graph, case, inj, rerun_tt(), lms())
            assert not isinstance(result, str), (inj, result)
            out.append((inj, result))
    return out


@pytest.fixture(scope="module")
def injected(recorded):
    return injected_cases(recorded)


def test_every_fault_type_is_injectable_on_the_tt_system(injected):
    types = {inj.error_type for inj, _ in injected}
    assert types == {"ExtractionError", "UpdateError", "DeletionError", "RetrievalError", "ResponseError"}
    assert all(ic.case.failed for _, ic in injected)


@pytest.mark.parametrize("error_type", ["ExtractionError", "UpdateError", "DeletionError", "RetrievalError",
                                        "ResponseError"])
def test_tracing_attributes_each_injected_fault_to_its_op_and_type(injected, error_type):
    tracing = TracingAttributor(evidence="annotated", embed=None)
    cases = [ic for inj, ic in injected if inj.error_type == error_type]
    assert cases
    for ic in cases:
        blame = tracing.attribute(ic.graph, ic.case)
        assert (blame.error_type, blame.op_id) == (ic.error_type, ic.op_id), blame.reason
        assert blame.cost.llm_calls == 0 and blame.method == "tracing"


def test_injected_update_blames_the_write_and_its_prompt_is_none(injected):
    ic = next(ic for inj, ic in injected if inj.error_type == "UpdateError")
    blame = TracingAttributor(embed=None).attribute(ic.graph, ic.case)
    assert blame.op_id.startswith("ingest:s2/tt.write") and blame.prompt_component is None


def test_real_deletion_is_blamed_on_the_decision_that_ordered_it(recorded):
    [case] = collect_failures(recorded)
    blame = TracingAttributor(embed=None).attribute(recorded, case)
    assert blame.error_type == "DeletionError"
    assert blame.op_id == "ingest:s3/tt.decide#1" and blame.prompt_component == "update"
    assert "tt.delete#0" in blame.reason


def test_audit_flagged_gold_is_an_annotation_error_only_when_it_is_what_failed_the_answer(recorded):
    [case] = collect_failures(recorded)
    tracer = TracingAttributor(embed=None)
    traced = tracer.attribute(recorded, case)
    # the answer matches the audit's corrected gold: the wrong gold failed it
    right = replace(case, flags=frozenset({"audit_wrong_gold"}), corrected_answer="ceramics", prediction="Ceramics.")
    blame = tracer.attribute(recorded, right)
    assert blame.error_type == "AnnotationError" and blame.op_id is None and "ceramics" in blame.reason
    # no corrected answer to check against: the annotation stays the verdict
    unknown = replace(case, flags=frozenset({"audit_wrong_gold"}), corrected_answer=None)
    assert tracer.attribute(recorded, unknown).error_type == "AnnotationError"
    # wrong against both golds (here an abstention): a pipeline cause, traced like the unflagged case
    wrong = replace(case, flags=frozenset({"audit_wrong_gold"}), corrected_answer=case.gold, prediction="Not mentioned")
    blame = tracer.attribute(recorded, wrong)
    assert blame.error_type == traced.error_type != "AnnotationError" and blame.op_id == traced.op_id


def test_pseudo_evidence_finds_the_evidence_message_and_traces_from_it(recorded):
    [case] = collect_failures(recorded)
    ranked = pseudo_evidence(recorded, case.question, case.gold, embed=None)
    assert ranked[0] == "message:D3:1@1"
    blame = TracingAttributor(evidence="pseudo", embed=None).attribute(recorded, replace(case, evidence=()))
    assert blame.error_type == "DeletionError" and blame.evidence == ("message:D3:1@1",)


def test_pseudo_evidence_fuses_a_dense_ranking(recorded):
    calls = []

    def embed(texts):  # "class" texts point one way, the rest another
        calls.append(len(texts))
        rows = [[1.0, 0.0] if "class" in t else [0.0, 1.0] for t in texts]
        return np.asarray(rows, dtype=np.float32)

    ranked = pseudo_evidence(recorded, "Which class did Priya join?", "pottery", embed=embed, top=3)
    assert calls == [1 + 7]  # the query and the 7 messages, in one call
    assert ranked[:2] == ["message:D3:1@1", "message:D3:2@1"] and len(ranked) == 3


def test_rrf_and_recall_at_k():
    assert rrf([[2, 0, 1], [0, 2]], k=60) == [0, 2, 1]  # 0 and 2 tie; ties go to the lower index
    assert rrf([[1], [1, 0]]) == [1, 0]
    assert evidence_recall_at_k(["message:D1:1@1", "message:D2:4@1"], ["D2:4", "D3:1"], 2) == 0.5
    assert evidence_recall_at_k(["message:D1:1@1"], ["D2:4"], 1) == 0.0
    assert evidence_recall_at_k([], [], 8) == 1.0


def test_collect_failures_reads_question_metadata_from_the_gold_variable(recorded):
    cases = collect_cases(recorded)
    assert [c.qa_id for c in cases] == [q["id"] for q in QAS]
    q4 = cases[-1]
    assert q4.failed and q4.evidence == ("D3:1",) and q4.gold == "pottery" and q4.case_id == "c1/q4"
    assert q4.retrieved_var == "retrieved:q4@1" and q4.qa_op == "answer:q4/qa.answer#0"
    assert q4.judge_op == "answer:q4/tt.judge#0" and "answer:q4/tt.retrieve#0" in q4.slice_ops
    assert collect_failures(recorded, [{"id": "q4", "question": "?", "answer": "x", "evidence": ["D1:1"]}])[0].evidence == ("D1:1",)


# -- content judges -------------------------------------------------------------------------------
FACT = make_fact("message:D1:1@1", {"speaker": "Priya", "text": "Big news: I adopted a cat called Biscuit."},
                 "What is the name of Priya's cat?", "Biscuit")


@pytest.mark.parametrize("text, holds", [
    ("Priya has a cat named Biscuit", True),
    (["Tom lives in Leeds", "Priya's cat is Biscuit"], True),
    ("Biscuit says hello, by the way.", False),  # the gold word without the evidence's key word
    ("Tom lives in Leeds", False),
    ("", False),
])
def test_token_judge_needs_the_gold_and_a_key_word(text, holds):
    assert TokenJudge().holds(FACT, text).holds is holds


def test_token_judge_without_gold_words_uses_evidence_key_tokens():
    fact = make_fact("m", {"speaker": "Priya", "text": "I adopted a cat last Saturday."},
                     "When did Priya adopt the cat?", "2 March 2024")
    assert not fact.gold_tokens
    assert TokenJudge().holds(fact, "Priya adopted a cat last Saturday").holds is True
    assert TokenJudge().holds(fact, "Tom plays guitar").holds is False


class CountingJudgeLM:
    model_id = "scripted/content"

    def __init__(self, reply='{"reason": "same fact", "holds": true}'):
        self.reply, self.calls = reply, 0

    def chat(self, messages, **kw):
        self.calls += 1
        assert kw["json_schema"]["required"] == ["reason", "holds"]
        return LMResult(self.reply, self.model_id, 50, 8)


def test_cascade_asks_the_lm_only_in_the_grey_zone():
    lm = CountingJudgeLM()
    judge = CascadeJudge(TokenJudge(), LLMContentJudge(lm))
    assert judge.holds(FACT, "Priya has a cat named Biscuit").holds is True and lm.calls == 0
    grey = "Biscuit, Priya's pet"  # gold word, no key word: score 0.3, inconclusive
    assert TokenJudge(decide=False).holds(FACT, grey).holds is None
    assert judge.holds(FACT, grey).holds is True and lm.calls == 1
    judge.holds(FACT, grey)
    assert lm.calls == 1  # cached


def test_unparsable_llm_content_verdict_falls_back_to_tokens():
    judge = CascadeJudge(TokenJudge(), LLMContentJudge(CountingJudgeLM("I think so")))
    assert judge.holds(FACT, "Biscuit, Priya's pet").holds is False


def test_without_any_evidence_the_decision_comes_from_the_gold_answer(recorded, injected):
    [case] = collect_failures(recorded)
    blame = TracingAttributor(evidence="annotated", embed=None).attribute(recorded, replace(case, evidence=()))
    assert blame.error_type == "ExtractionError" and blame.op_id is None and "unknown" in blame.reason
    ic = next(ic for inj, ic in injected if inj.error_type == "RetrievalError")
    blame = TracingAttributor(evidence="annotated", embed=None).attribute(ic.graph, replace(ic.case, evidence=()))
    assert (blame.error_type, blame.op_id) == ("RetrievalError", ic.op_id)


def test_a_made_up_answer_to_an_unanswerable_question_is_the_answer_ops_fault(recorded):
    case = next(c for c in collect_cases(recorded))
    unanswerable = replace(case, gold="Not mentioned in the conversation", prediction="Paris",
                           flags=case.flags | {"unanswerable"}, evidence=())
    blame = TracingAttributor(evidence="annotated", embed=None).attribute(recorded, unanswerable)
    assert blame.error_type == "ResponseError"
    assert blame.op_id == unanswerable.qa_op and blame.prompt_component == "question_answering"
    assert "abstain" in blame.reason


def test_a_fact_split_across_items_no_longer_holds_it():
    fact = make_fact("message:D1:1@1", {"speaker": "Priya", "text": "I adopted a cat. She's a grey tabby called Biscuit."},
                     "What is the name of Priya's cat?", "Biscuit", speakers=("Priya", "Tom"))
    judge = TokenJudge()
    assert judge.holds(fact, ["Adopted a cat called Biscuit"]).holds is True
    assert judge.holds(fact, ["Adopted a cat last Saturday", "Grey tabby called Biscuit"]).holds is False


def test_update_events_that_store_nothing_carry_nothing():
    from memtrace_opt.attribution.text import value_items

    events = [{"id": "0", "text": "Stopped Spanish class", "event": "DELETE"},
              {"id": "1", "text": "Likes tea", "event": "NONE"}, {"id": "2", "text": "Moved to Rome", "event": "ADD"}]
    assert value_items(events) == ["Moved to Rome"]


def test_no_fault_is_injected_into_a_question_whose_gold_the_audit_flags(recorded):
    """Its failure would be an AnnotationError as well as the injected type: no single ground truth."""
    case = next(c for c in collect_cases(recorded) if not c.failed)
    assert plan_injections(recorded, case)[0]
    plans, skipped = plan_injections(recorded, replace(case, flags=frozenset({"audit_wrong_gold"})))
    assert plans == [] and set(skipped.values()) == {"gold flagged wrong by the dataset audit"}


@pytest.mark.parametrize("prediction", ["Biscuit", "It is called Biscuit.", "7 May 2023"])
def test_a_right_answer_judged_wrong_is_a_judge_error_that_names_no_prompt(recorded, prediction):
    [case] = collect_failures(recorded)
    gold = "7 May 2023" if "May" in prediction else "Biscuit"
    misjudged = replace(case, gold=gold, prediction=prediction)
    blame = TracingAttributor(embed=None).attribute(recorded, misjudged)
    assert blame.error_type == "JudgeError" and blame.op_id == case.judge_op
    assert blame.prompt_component is None and "stricter second judgement" in blame.reason


def test_a_wrong_answer_is_not_a_judge_error(recorded):
    [case] = collect_failures(recorded)
    blame = TracingAttributor(embed=None).attribute(recorded, replace(case, gold="7 May 2023", prediction="8 May 2023"))
    assert blame.error_type != "JudgeError"


def test_another_speakers_similar_line_does_not_carry_the_fact():
    fact = make_fact("message:D1:1", {"speaker": "Caroline", "text": "I went to a support group yesterday."},
                     "When did Caroline go to the support group?", "7 May 2023", speakers=("Caroline", "Melanie"))
    judge = TokenJudge()
    assert judge.holds(fact, [{"text": "Caroline: I went to a support group yesterday."}]).holds
    assert not judge.holds(fact, [{"text": "Melanie: I went to a support group yesterday too."}]).holds
    chunk = "Melanie: I went to a support group yesterday too.\nCaroline: I went to a support group yesterday."
    assert judge.holds(fact, chunk).holds  # a chunk keeps its own speaker's line
    assert not judge.holds(fact, "Melanie: I went to a support group yesterday too.\nCaroline: Nice!").holds


def test_a_run_records_its_speakers_for_tracing():
    from memtrace_opt.systems.runner import run_conversation
    from tests.scripted_lm import ScriptedLM, judge_lm, make_conversation

    conv = make_conversation([[("Ann", "My cat is Biscuit."), ("Bob", "Nice.")]],
                             [{"question": "Ann's cat?", "answer": "Biscuit", "evidence": ["D1:1"]}])
    run = run_conversation("long_context", conv, lms={"task": ScriptedLM([], default="Biscuit"), "judge": judge_lm()})
    assert run.graph.meta["speakers"] == ["Ann", "Bob"]


def test_a_trim_that_drops_one_of_two_evidence_facts_is_an_update_error_of_the_trim():
    """The later fact was already in the unit: the trim replaced nothing, it only lost the earlier fact."""
    from memtrace_opt.attribution.failures import collect_failures as failures_of
    from memtrace_opt.systems.runner import run_conversation
    from tests.scripted_lm import ScriptedLM, judge_lm, make_conversation

    filler = [("Bob", f"Random chatter number {i} about the weather and traffic today.") for i in range(12)]
    conv = make_conversation(
        [[("Ann", "My cat Biscuit was born in Porto."), ("Ann", "Biscuit now lives with me in Leeds.")] + filler,
         [("Bob", "Nice.")]],
        [{"question": "Where was Ann's cat Biscuit born, and where does it live now?", "answer": "Porto, Leeds",
          "evidence": ["D1:1", "D1:2"]}])
    run = run_conversation("long_context", conv, settings={"context_tokens": 260},  # 270 in all: only Porto goes
                           lms={"task": ScriptedLM([], default="Leeds"), "judge": judge_lm()})
    context = run.graph.value(run.graph.latest_id("retrieved:c1/q0"))
    kept = " ".join(r["text"] for r in context)
    assert "Porto" not in kept and "Leeds" in kept  # the trim dropped exactly one evidence fact
    [case] = failures_of(run.graph, conv.qa)
    blame = TracingAttributor(evidence="annotated", embed=None).attribute(run.graph, case)
    assert blame.error_type == "UpdateError" and run.graph.ops[blame.op_id].name == "long_context.trim"


def test_an_item_that_keeps_the_words_but_changes_the_meaning_no_longer_holds_the_fact():
    fact = make_fact("message:D3:2", {"speaker": "Ann", "text": "I started pottery classes this month at the studio.",
                                      "date": "2:10 pm on 5 June, 2023"},
                     "When did Ann start pottery classes?", "June 2023", speakers=("Ann", "Bob"))
    judge = TokenJudge()
    assert judge.holds(fact, "Ann started pottery classes in June 2023 at the studio.").holds  # resolved, same year
    assert not judge.holds(fact, "Ann started pottery classes back in 2015 at the studio.").holds
    negated = make_fact("message:D1:1", {"speaker": "Ann", "text": "I adopted a grey tabby cat called Biscuit."},
                        "Did Ann adopt a cat?", "Yes", speakers=("Ann", "Bob"))
    assert judge.holds(negated, "Ann adopted a grey tabby cat called Biscuit.").holds
    assert not judge.holds(negated, "Ann never adopted a grey tabby cat called Biscuit.").holds


def test_the_audits_corrected_citation_is_the_evidence_traced(recorded):
    [case] = collect_failures(recorded)
    [cited] = collect_failures(recorded, {case.qa_id: {"evidence": ["D9:9"]}})
    assert cited.evidence == ("D9:9",)
    [fixed] = collect_failures(recorded, {case.qa_id: {"evidence": ["D9:9"], "corrected_evidence": list(case.evidence)}})
    assert fixed.evidence == case.evidence  # the audit's citation replaces the wrong one


def test_records_that_name_their_turn_carry_a_fact_only_from_that_turn():
    from memtrace_opt.attribution.content import TokenJudge, make_fact

    message = {"turn_id": "D1:8", "speaker": "Deb", "text": "My mother gave me this pendant."}
    fact = make_fact("message:D1:8@1", message, "What gift did Deb get from her mother?", "pendant",
                     speakers=("Deb", "Jo"))
    later = {"turn_id": "D4:40", "text": "Deb: My friend's mother wore a pendant like it.", "date": "d4"}
    kept = {"turn_id": "D1:8", "text": "Deb: My mother gave me this pendant.", "date": "d1"}
    judge = TokenJudge()
    trimmed = judge.holds(fact, [later])
    assert trimmed.holds is False and "D1:8" in trimmed.reason  # the shared word is not the evidence
    assert judge.holds(fact, [later, kept]).holds is True
    # records without provenance: content alone decides, as before
    assert judge.holds(fact, [{"text": later["text"]}]).holds is True
    # a document of several turns carries each of them
    assert judge.holds(fact, [{"turn_ids": ["D1:7", "D1:8"], "text": kept["text"]}]).holds is True
