"""A worked example is never shown to a run of the conversation it was cut from.

A demo carries its question's gold answer; scored on its own conversation, a demo set wins on
answers it was handed (the quickstart's demo set raised validation 50 -> 67% on the very questions
it came from, and the held-out score fell 50 -> 17%, a demo's answer copied verbatim).
"""

from __future__ import annotations

from memtrace_opt.graph import replay
from memtrace_opt.graph.ops import prompt_sha
from memtrace_opt.loop.demo_pools import load_pools, save_pools
from memtrace_opt.rundir import round_dir
from memtrace_opt.optimizers.demos import Demo
from memtrace_opt.graph.prompt_parts import compose_prompt, split_prompt, withhold_examples
from memtrace_opt.systems.base import QA_PROMPT
from memtrace_opt.systems.long_context import LongContextSystem as LongContext
from memtrace_opt.systems.runner import rerun_for, run_conversation
from tests.scripted_lm import ScriptedLM, judge_lm, make_conversation

OWN = Demo("question_answering", "repair", "c1/q0", "qa.answer", (("question", "Where does Ann work?"),),
           "Paper Lantern", "c1")
OTHER = Demo("question_answering", "bootstrap", "c9/q3", "qa.answer", (("question", "Where does Bo live?"),),
             "Porto", "c9")


def _prompt_with(*demos: Demo) -> str:
    seed = LongContext.prompts()[QA_PROMPT]
    return compose_prompt(seed, ["If asked where, name the place."], [d.render() for d in demos])


def test_a_rendered_demo_names_its_conversation_and_only_that_conversation_loses_it():
    text = _prompt_with(OWN, OTHER)
    assert OWN.render().startswith("Example from another conversation (c1):\nInput:")
    seen = split_prompt(withhold_examples(text, "c1"))
    assert seen.examples == (OTHER.render(),)
    assert seen.rules == ("If asked where, name the place.",)
    assert withhold_examples(text, "c2") == text
    assert withhold_examples(text, None) == text


def test_an_example_without_a_source_line_is_kept_and_a_prompt_without_examples_is_unchanged():
    legacy = compose_prompt("Answer.", [], ["Input: q\nCorrect output: a"])
    assert withhold_examples(legacy, "c1") == legacy
    assert withhold_examples("Answer.", "c1") == "Answer."


def test_a_run_sends_its_own_conversations_demo_to_no_lm_call_and_a_replay_reuses_it():
    conv = make_conversation([[("Ann", "I work at Paper Lantern."), ("Bo", "Nice.")]],
                             [{"question": "Where does Ann work?", "answer": "Paper Lantern", "evidence": ["D1:1"]}])
    task = ScriptedLM([(r"Question:", "Paper Lantern")])
    prompts = {QA_PROMPT: _prompt_with(OWN, OTHER)}
    run = run_conversation("long_context", conv, lms={"task": task, "judge": judge_lm()}, prompts=prompts)
    sent = task.calls[-1].prompt
    assert "Where does Bo live?" in sent and "Correct output: Paper Lantern" not in sent
    assert "(c1)" not in sent
    answer_op = run.graph.ops[run.graph.producer[run.graph.latest_id(f"answer:{conv.qa[0].id}")]]
    assert answer_op.prompt is not None
    assert answer_op.prompt.sha == prompt_sha(withhold_examples(prompts[QA_PROMPT], "c1"))
    # the recorded meta keeps the candidate as given: the store and replays key on it
    assert run.graph.meta["prompts"][QA_PROMPT] == prompts[QA_PROMPT]
    before = task.n_calls
    replayed = replay(run.graph, rerun_for(run.graph, conv), lms={"task": task, "judge": judge_lm()})
    assert task.n_calls == before and not replayed.changed_answers and not replayed.executed_ops


def test_demo_pools_keep_the_source_conversation_through_a_save_and_load(tmp_path):
    path = round_dir(tmp_path, 1)
    path.mkdir(parents=True)
    save_pools(path / "demos.json", {"question_answering": [OWN, OTHER]})
    loaded = load_pools(tmp_path, 1)["question_answering"]
    assert [d.conversation for d in loaded] == ["c1", "c9"]
    assert loaded[0].render() == OWN.render()


def test_only_demos_a_candidate_could_be_scored_with_enter_the_pools():
    from memtrace_opt.loop.demo_pools import testable_pools

    legacy = Demo("question_answering", "repair", "q", "qa.answer", (("question", "q"),), "a")
    pools = {"question_answering": [OWN, OTHER, legacy]}
    # one conversation trains and selects (the quickstart): its own demos can never be seen
    kept, left = testable_pools(pools, {"c1"}, {"c1"}, accept_ties=True)
    assert [d.case_id for d in kept["question_answering"]] == ["c9/q3", "q"] and left == 1
    # strict acceptance: the minibatch (c1) must see the set, whatever validation would
    kept, left = testable_pools(pools, {"c1"}, {"c2"}, accept_ties=False)
    assert left == 1
    # ties go on to validation on c2, which does see c1's demos
    kept, left = testable_pools(pools, {"c1"}, {"c2"}, accept_ties=True)
    assert left == 0 and len(kept["question_answering"]) == 3
    assert testable_pools({"question_answering": [OWN]}, {"c1"}, set(), accept_ties=True) == ({}, 1)
