"""Demo sets chosen to cover the round's failures (optimizers/demo_coverage.py) and their use by the proposer."""

from __future__ import annotations

from memtrace_opt.optimizers.delta_proposer import DeltaProposer
from memtrace_opt.optimizers.demo_coverage import (
    answer_shape, case_similarity, question_form, select_covering_demos,
)
from memtrace_opt.optimizers.demos import Demo
from memtrace_opt.graph.prompt_parts import split_prompt

SEED = "Answer the question from the memories."


def demo(case: str, question: str, output: str, kind: str = "repair") -> Demo:
    return Demo("question_answering", kind, case, "qa.answer",
                (("context", f"- [9 June 2023] something about {case}"), ("question", question)), output)


POOL = [
    demo("q-name", "What country is her grandma from?", "Sweden", "bootstrap"),
    demo("q-week", "When did she give a speech?", "The week before 9 June 2023"),
    demo("q-day", "When did she go to the group?", "7 May 2023"),
    demo("q-yes", "Would she still paint?", "Likely no"),
    demo("q-list", "What does she paint?", "sunsets, horses", "bootstrap"),
]
#: Failures of a round: most are "when" questions whose gold is relative to a session date.
FAILURES = [
    ("When did Mel run a race?", "The sunday before 25 May 2023"),
    ("When did they meet friends?", "The week before 9 June 2023"),
    ("When did she go camping?", "The week before 27 June 2023"),
    ("When did he sign up?", "2 July 2023"),
    ("What is his dog called?", "Rex"),
]


def test_answer_shape_and_question_form_read_the_form_not_the_topic():
    assert answer_shape("The week before 27 June 2023") == answer_shape("the week before 9 June 2023")
    assert answer_shape("2 July 2023") == ("NUM", "MONTH", "YEAR")
    assert answer_shape("Likely no") == ("YESNO", "YESNO")
    assert question_form("When did Mel run a race?") == ("when", "did")
    same_form = case_similarity("When did A go?", "The week before 1 May 2023", "When did B eat?",
                                "The week before 3 June 2022")
    other = case_similarity("When did A go?", "The week before 1 May 2023", "What is his dog called?", "Rex")
    assert same_form == 1.0 and other < 0.2


def test_the_covering_set_starts_with_the_most_common_failure_form():
    chosen = select_covering_demos(POOL, FAILURES, budget_tokens=10_000, max_demos=2)
    assert [d.case_id for d in chosen][0] == "q-week"
    # the second pick covers what the first left: the plain name or the absolute date, not the yes/no
    assert chosen[1].case_id in ("q-name", "q-day") and len(chosen) == 2


def test_covering_respects_budget_and_count_and_stops_when_nothing_is_gained():
    small = select_covering_demos(POOL, FAILURES, budget_tokens=POOL[1].tokens, max_demos=4)
    assert [d.case_id for d in small] == ["q-week"]
    # a single target is covered exactly by its twin: nothing else adds anything
    one = select_covering_demos(POOL, [("When did she give a talk?", "The week before 2 May 2023")],
                                budget_tokens=10_000, max_demos=4)
    assert [d.case_id for d in one] == ["q-week"]
    assert select_covering_demos(POOL, [], budget_tokens=10_000, max_demos=4) == []


def test_the_proposer_covers_the_failures_first_then_draws_at_random():
    record = {"Inputs": {"question": "q"}, "Generated Outputs": "x", "Feedback": "wrong"}
    proposer = DeltaProposer({"question_answering": POOL}, None, budget_tokens=10_000, max_demos=2,
                             kinds=("demos",), failure_cases={"question_answering": FAILURES},
                             demo_selection="coverage")
    first = proposer({"question_answering": SEED}, {"question_answering": [record]}, ["question_answering"])
    examples = split_prompt(first["question_answering"]).examples
    assert "The week before 9 June 2023" in examples[0]
    assert "covering the round's failures" in proposer.log[0].reason
    second = proposer({"question_answering": first["question_answering"]}, {"question_answering": [record]},
                      ["question_answering"])
    assert "covering" not in proposer.log[1].reason and second["question_answering"] != SEED


def test_random_selection_the_default_never_covers():
    proposer = DeltaProposer({"question_answering": POOL}, None, budget_tokens=10_000, max_demos=2,
                             kinds=("demos",), failure_cases={"question_answering": FAILURES})
    record = {"Inputs": {"question": "q"}, "Generated Outputs": "x", "Feedback": "wrong"}
    proposer({"question_answering": SEED}, {"question_answering": [record]}, ["question_answering"])
    assert "covering" not in proposer.log[0].reason


def test_a_repair_demo_shows_the_evidence_turn_not_a_line_sharing_the_golds_words():
    """The blamed answer's demo must show the turn its gold rests on: here another line shares every word
    of the gold ("last week"), which the word-overlap excerpt would pick instead."""
    from memtrace_opt.attribution.blame import BlameSignal
    from memtrace_opt.optimizers.cases import CaseTrace, QACase
    from memtrace_opt.optimizers.demos import mine_repair_demos
    from memtrace_opt.systems.runner import run_conversation
    from tests.scripted_lm import ScriptedLM, judge_lm, make_conversation

    sessions = [[("Ann", "I gave a talk at the school event last week."),
                 ("Bob", "We met up with friends last week, the week before the talk.")]]
    qas = [{"question": "When did Ann give a talk at the school?", "answer": "The week before the talk",
            "evidence": ["D1:1"]}]
    conv = make_conversation(sessions, qas)
    task = ScriptedLM([(r"Question:", lambda messages, match: "Not mentioned")])
    result = run_conversation("long_context", conv, lms={"task": task, "judge": judge_lm()})
    graph, qa = result.graph, conv.qa[0]
    answer_op = graph.producer[graph.latest_id(f"answer:{qa.id}")]
    blame = BlameSignal(qa.id, qa.question, qa.answer, "Not mentioned", "ResponseError", answer_op,
                        "question_answering", "scripted", evidence=("message:D1:1@1",))
    trace = CaseTrace(QACase(conv.id, qa.id), qa.question, qa.answer, "Not mentioned", 0.0, "WRONG", graph, blame)
    demo = mine_repair_demos([trace])["question_answering"][0]
    context = dict(demo.inputs)["context"]
    assert "school event" in context and "met up with friends" not in context
    assert demo.output == "The week before the talk"


def test_the_plan_reads_demo_selection_and_refuses_an_unknown_one():
    import pytest

    from memtrace_opt.errors import ConfigError
    from memtrace_opt.loop import LoopPlan

    assert LoopPlan(method="attributed").demo_selection == "random"
    assert LoopPlan(method="attributed", demo_selection="coverage").fingerprint()["demo_selection"] == "coverage"
    assert "demo_selection" not in LoopPlan(method="attributed").fingerprint()  # old checkpoints still resume
    with pytest.raises(ConfigError, match="optimizer.demo_selection"):
        LoopPlan(method="attributed", demo_selection="best")
