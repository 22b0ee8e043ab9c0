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
