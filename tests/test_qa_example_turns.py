"""The answer op shows mined worked examples as prior chat turns, not as inline text.

Inline, the embedded 1.5B model copied an example's content into another conversation's answer
(the quickstart's "What is the name of Amara's sister?" answered with the sister of an example);
as user/assistant turns, DSPy's few-shot layout, the same examples raised validation accuracy.
"""

from __future__ import annotations

from memtrace_opt.optimizers.demos import Demo
from memtrace_opt.graph.prompt_parts import compose_prompt, parse_example
from memtrace_opt.systems.base import QA_PROMPT
from memtrace_opt.systems.long_context import LongContextSystem as LongContext
from memtrace_opt.systems.qa import example_turns
from memtrace_opt.systems.runner import run_conversation
from tests.scripted_lm import ScriptedLM, judge_lm, make_conversation

MINED = Demo("question_answering", "repair", "c9/q1", "qa.answer",
             (("context", "\n[4 March, 2024] Priya: I adopted a cat last Saturday.\n[5 March, 2024] Tom: Nice."),
              ("question", "When did Priya adopt her cat?")), "2 March 2024", "c9")


def test_a_mined_demo_reads_back_as_its_inputs_output_and_source():
    ex = parse_example(MINED.render())
    assert ex is not None
    assert ex.conversation == "c9" and ex.output == "2 March 2024"
    assert ex.inputs == {"context": "[4 March, 2024] Priya: I adopted a cat last Saturday.\n[5 March, 2024] Tom: Nice.",
                         "question": "When did Priya adopt her cat?"}


def test_text_of_another_shape_is_no_example():
    assert parse_example("Q: where? A: Oslo") is None
    assert parse_example("Input:\nno role here\nCorrect output: x") is None


def test_the_answer_op_sends_examples_as_turns_before_the_question_and_rules_inline():
    conv = make_conversation([[("Ann", "I work at Paper Lantern."), ("Bo", "Nice.")]],
                             [{"question": "Where does Ann work?", "answer": "Paper Lantern", "evidence": ["D1:1"]}])
    task = ScriptedLM([(r"Question: Where does Ann work", "Paper Lantern")])
    seed = LongContext.prompts()[QA_PROMPT]
    handwritten = "Q: where? A: Oslo"
    prompt = compose_prompt(seed, ["If asked where, name the place."], [MINED.render(), handwritten])
    run_conversation("long_context", conv, lms={"task": task, "judge": judge_lm()}, prompts={QA_PROMPT: prompt})
    answer_call = next(c for c in task.calls if "Where does Ann work" in c.prompt)
    roles = [m["role"] for m in answer_call.messages]
    assert roles == ["system", "user", "assistant", "user"]
    shot, reply, last = answer_call.messages[1:]
    assert shot["content"].startswith("Memories:\n- [4 March, 2024] Priya: I adopted a cat last Saturday.\n")
    assert shot["content"].endswith("Question: When did Priya adopt her cat?\nAnswer:")
    assert reply["content"] == "2 March 2024"
    # the real question's message holds the rule and the hand-written example, never the mined one
    assert "If asked where, name the place." in last["content"] and handwritten in last["content"]
    assert "Correct output" not in last["content"] and "Priya" not in last["content"]
    assert answer_call.messages[0]["content"] == seed


def test_a_prompt_without_examples_gives_one_user_message():
    shots, inline = example_turns(())
    assert shots == [] and inline == ()
