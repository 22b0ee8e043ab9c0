"""The word-level JudgeError test (memtrace_opt/attribution/answer_match.py), and its place in tracing."""

from __future__ import annotations

import pytest

from memtrace_opt.attribution.answer_match import carries_gold

# Correct answers the F1 bar of the stricter judgement rejected (hard suite on LoCoMo, paraphrased here).
CARRY = [
    ("How long has Nate had his turtles?", "three years", "3 years"),
    ("What sparked John's interest in improving schools?",
     "Seeing how poor schools affected his neighborhood while growing up",
     "John's interest in improving schools was sparked by seeing how poor schools affected his neighborhood."),
    ("What did Joanna achieve in January?", "finished her screenplay and printed it",
     "Joanna finished her first full screenplay and printed it last Friday."),
]
# Answers that must stay system errors: partial, negated, another date, another thing.
REJECT = [
    ("What genre is her screenplay?", "drama and romance", "Drama"),
    ("What martial arts has John done?", "Kickboxing, Taekwondo", "Kickboxing"),
    ("Does Ann like the city?", "She likes the city", "She does not like the city"),
    ("When did Ann move?", "7 May 2023", "Ann moved on 8 May 2023"),
    ("What is Ann's cat called?", "Biscuit", "Pepper"),
    ("What is Ann's cat called?", "Biscuit", ""),
]


@pytest.mark.parametrize("question,gold,prediction", CARRY)
def test_an_answer_that_carries_every_answer_word_of_the_gold_is_accepted(question, gold, prediction):
    assert carries_gold(question, gold, prediction)


@pytest.mark.parametrize("question,gold,prediction", REJECT)
def test_partial_negated_misdated_or_other_answers_are_not(question, gold, prediction):
    assert carries_gold(question, gold, prediction) is None


def test_tracing_calls_a_restated_correct_answer_a_judge_error_and_a_partial_one_not():
    from dataclasses import replace

    from memtrace_opt.attribution.failures import collect_cases
    from memtrace_opt.attribution.tracing import judged_wrongly
    from memtrace_opt.systems.runner import run_conversation
    from tests.scripted_lm import ScriptedLM, judge_lm, make_conversation

    conv = make_conversation([[("Nate", "I have had my two turtles for three years now.")]],
                             [{"question": "How long has Nate had his turtles?", "answer": "three years",
                               "evidence": ["D1:1"]}])
    task = ScriptedLM([(r"Question:", lambda messages, match: "3 years")])
    graph = run_conversation("long_context", conv, lms={"task": task, "judge": judge_lm()}).graph
    [case] = collect_cases(graph)
    wrong = replace(case, score=0)
    assert judged_wrongly(wrong) and "answer-bearing" in judged_wrongly(wrong)
    assert judged_wrongly(replace(wrong, gold="three years and two months", prediction="3 years")) is None


PART = [
    ("What martial arts has John done?", "Kickboxing, Taekwondo", "Kickboxing"),
    ("What genre is Joanna's first screenplay?", "drama and romance", "Drama"),
]
NOT_PART = [
    ("What genres does Ann like?", "action and sci-fi", "Action and horror"),  # adds what the gold lacks
    ("What genres does Ann like?", "action and sci-fi", "Action and sci-fi"),  # the whole gold: carries_gold's
    ("What is Ann's cat called?", "Biscuit", "Biscuit"),  # one item: nothing to be a part of
    ("What sports does Ann play?", "tennis and golf", "She does not play tennis"),
]


@pytest.mark.parametrize("question,gold,prediction", PART)
def test_an_answer_naming_some_items_of_a_listing_gold_and_nothing_else_is_a_part(question, gold, prediction):
    from memtrace_opt.attribution.answer_match import names_part_of_gold

    assert names_part_of_gold(question, gold, prediction)


@pytest.mark.parametrize("question,gold,prediction", NOT_PART)
def test_additions_the_whole_gold_single_items_and_negations_are_not_parts(question, gold, prediction):
    from memtrace_opt.attribution.answer_match import names_part_of_gold

    assert names_part_of_gold(question, gold, prediction) is None


def test_a_linking_verb_is_no_answer_word():
    assert carries_gold("What does Gina say about the dancers in the photo?", "They look graceful",
                        "Gina says the dancers are graceful.")
    assert carries_gold("What does Gina say about the dancers?", "They look graceful", "They look tired") is None


def _partial_run(turns: list[tuple[str, str]]):
    from memtrace_opt.attribution.failures import collect_cases
    from memtrace_opt.systems.runner import run_conversation
    from tests.scripted_lm import ScriptedLM, judge_lm, make_conversation

    conv = make_conversation([turns], [{"question": "What martial arts has John done?",
                                        "answer": "Kickboxing, Taekwondo", "evidence": ["D1:1", "D1:2"]}])
    task = ScriptedLM([(r"Question:", lambda messages, match: "Kickboxing")])
    graph = run_conversation("long_context", conv, lms={"task": task, "judge": judge_lm()}).graph
    [case] = collect_cases(graph, conv.qa)
    assert len(case.evidence) == 2
    return graph, case, conv


def test_a_partial_answer_the_context_fully_supported_is_the_judges_error():
    from memtrace_opt.attribution.tracing import TracingAttributor

    graph, case, _ = _partial_run([("John", "I did kickboxing for years."), ("John", "Then I took up taekwondo.")])
    assert case.failed
    blame = TracingAttributor(evidence="annotated", embed=None).attribute(graph, case)
    assert blame.error_type == "JudgeError" and blame.op_id == case.judge_op
    assert "correct part of the gold" in blame.reason


def test_a_partial_answer_whose_other_item_was_lost_upstream_stays_blamed_upstream():
    """The same answer, but the taekwondo turn never reached the context: that loss explains the
    partial answer, so it is blamed on the op that lost it, not on the judge."""
    from memtrace_opt.attribution.tracing import TracingAttributor
    from memtrace_opt.graph import Overrides, replay
    from memtrace_opt.systems.runner import rerun_for
    from tests.scripted_lm import ScriptedLM, judge_lm

    graph, case, conv = _partial_run([("John", "I did kickboxing for years."), ("John", "Then I took up taekwondo.")])
    update = next(o for o in graph.ops.values() if o.inputs.get("message") == ("message:D1:2@1",))
    [(role, var)] = update.outputs.items()
    kept = [r for r in graph.variables[var].value if r.get("turn_id") != "D1:2"]
    task = ScriptedLM([(r"Question:", lambda messages, match: "Kickboxing")])
    faulty = replay(graph, rerun_for(graph, conv), from_op=update.id,
                    overrides=Overrides(op_outputs={update.id: {role: kept}}),
                    lms={"task": task, "judge": judge_lm()}).graph
    from memtrace_opt.attribution.failures import collect_cases

    [lost] = collect_cases(faulty, conv.qa)
    blame = TracingAttributor(evidence="annotated", embed=None).attribute(faulty, lost)
    assert blame.error_type != "JudgeError" and blame.op_id == update.id
