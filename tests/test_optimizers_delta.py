"""Demo mining, rule proposals and the delta proposer, on the fixture system's real traced graphs."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.loop import LoopContext, LoopData, LoopPlan, load_state, run_loop
from memtrace_opt.loop.demo_pools import load_pools, round_pools
from memtrace_opt.optimizers.adapter import MemoryPromptAdapter
from memtrace_opt.optimizers.cases import cases_of
from memtrace_opt.optimizers.delta_proposer import DeltaProposer
from memtrace_opt.optimizers.demos import (
    Demo, mine_bootstrap_demos, mine_repair_demos, mine_unattributed_demos, select_demos,
)
from memtrace_opt.graph.prompt_parts import EXAMPLES_HEADER, RULES_HEADER, split_prompt
from memtrace_opt.optimizers.rules import (
    extract_rule, generalize_names, generic_condition, is_restated, propose_rules, update_rules,
)
from memtrace_opt.systems.base import QA_PROMPT
from tests.test_loop_fixtures import (
    PROMPTS, QA_MAGIC, SEED_QA, ReflectionLM, TaskLM, accounted, backend, conversations, qa_blamer,
)

TARGETS = ["fact_extraction", "memory_update", QA_PROMPT]


def traces_with(qa_prompt: str):
    """The fixture's optimize conversation run under ``qa_prompt`` (wrong answers unless it has the magic)."""
    convs = conversations()
    adapter = MemoryPromptAdapter(backend(TaskLM(convs)), convs[:1], base_prompts={**PROMPTS, QA_PROMPT: SEED_QA},
                                  mode="answer_feedback")
    return adapter.run(cases_of(convs[:1]), {QA_PROMPT: qa_prompt})


def blame_on(trace, component: str, error_type: str, *, rescued: bool | None = None) -> BlameSignal:
    """Blame ``trace``'s failure on the first op using ``component`` (the answer op for the QA prompt)."""
    graph = trace.graph
    op = next(o for o in sorted(graph.ops.values(), key=lambda o: o.time)
              if o.prompt is not None and o.prompt.component == component)
    evidence = tuple(v for v in graph.variables if v.startswith("message:"))[:1]
    return BlameSignal(trace.case.qa_id, trace.question, trace.gold, trace.prediction, error_type, op.id, component,
                       "scripted blame", evidence=evidence, counterfactual_rescued=rescued)


def test_bootstrapped_demos_cover_every_prompted_op_on_a_correct_answers_lineage():
    traces = traces_with(f"{SEED_QA} Always {QA_MAGIC} before answering.")
    assert all(not t.failed for t in traces)
    pools = mine_bootstrap_demos(traces)
    assert set(pools) == set(TARGETS)
    qa = pools[QA_PROMPT]
    assert len(qa) == len(traces) and {d.kind for d in qa} == {"bootstrap"}
    cat = next(d for d in qa if d.output == "Biscuit")
    assert "What is Ann's cat called?" in cat.render() and "Biscuit" in cat.render()
    # the ingestion demo is the op that handled the evidence: its input holds the gold's message
    assert any("Biscuit" in d.render() for d in pools["fact_extraction"])


def test_a_repair_demo_lands_only_on_the_blamed_component():
    traces = traces_with(SEED_QA)
    assert all(t.failed for t in traces)
    for t in traces:
        t.blame = blame_on(t, QA_PROMPT, "ResponseError")
    pools = mine_repair_demos(traces)
    assert set(pools) == {QA_PROMPT}
    assert sorted(d.output for d in pools[QA_PROMPT]) == sorted(t.gold for t in traces)
    assert "Not mentioned" not in pools[QA_PROMPT][0].output


def test_an_ingestion_repair_demo_needs_a_verified_counterfactual():
    traces = traces_with(SEED_QA)
    for t in traces:
        t.blame = blame_on(t, "fact_extraction", "ExtractionError", rescued=None)
    assert mine_repair_demos(traces) == {}
    for t in traces:
        t.blame = blame_on(t, "fact_extraction", "ExtractionError", rescued=True)
    pools = mine_repair_demos(traces)
    assert set(pools) == {"fact_extraction"} and len(pools["fact_extraction"]) == len(traces)


def test_blame_no_prompt_can_fix_gives_no_demo():
    traces = traces_with(SEED_QA)
    for t in traces:
        t.blame = dataclasses.replace(blame_on(t, QA_PROMPT, "ResponseError"), error_type="AnnotationError")
    assert mine_repair_demos(traces) == {}


def test_the_unattributed_ablation_spreads_the_same_failures_over_every_target():
    traces = traces_with(SEED_QA)
    pools = mine_unattributed_demos(traces, TARGETS)
    assert set(pools) == set(TARGETS)
    assert sum(len(p) for p in pools.values()) == len(traces)  # same number of demos, spread
    assert all(d.component == c for c, p in pools.items() for d in p)


def test_round_pools_per_method():
    traces = traces_with(SEED_QA)
    signals = {t.case.qa_id: blame_on(t, QA_PROMPT, "ResponseError") for t in traces}
    attributed = round_pools("attributed", traces, signals, [QA_PROMPT])
    assert list(attributed) == [QA_PROMPT] and len(attributed[QA_PROMPT]) == 3
    unattributed = round_pools("unattributed", traces, {}, TARGETS)
    assert set(unattributed) == set(TARGETS)


def _demo(i: int, kind: str, words: int = 5) -> Demo:
    return Demo(QA_PROMPT, kind, f"q{i}", "qa.answer", (("question", " ".join(["word"] * words)),), f"a{i}")


def test_demo_selection_respects_the_token_budget_and_mixes_kinds():
    pool = [_demo(i, "repair" if i % 2 else "bootstrap") for i in range(10)]
    chosen = select_demos(pool, budget_tokens=10_000, max_demos=4, rng=random.Random(0))
    assert len(chosen) == 4 and {d.kind for d in chosen} == {"repair", "bootstrap"}
    one = pool[0].tokens
    assert len(select_demos(pool, budget_tokens=2 * one + 1, max_demos=4, rng=random.Random(0))) == 2
    assert select_demos([_demo(0, "repair", words=500)], budget_tokens=50, max_demos=4, rng=random.Random(0)) == []


def test_rules_are_read_in_simba_form_and_restatements_dropped():
    assert extract_rule('Rule: "If the step receives a date question, it should answer with a date."') == \
        "If the step receives a date question, it should answer with a date."
    assert extract_rule("Be careful.") == ""
    known = ["If the step receives a date question, it should answer with a date."]
    assert is_restated("If the step receives a question about dates, it should answer with a date.", known)
    assert not is_restated("If two memories conflict, it should trust the most recent one.", known)
    assert update_rules(["a", "b"], ["c"], cap=2) == ("b", "c")


def test_propose_rules_drops_a_rule_the_prompt_already_states():
    reflection = accounted(ReflectionLM(), "reflection")
    record = {"Inputs": {"question": "q"}, "Generated Outputs": "x", "Feedback": "wrong"}
    fresh = propose_rules(reflection, QA_PROMPT, SEED_QA, [], [record], samples=1)
    assert [p.kept for p in fresh] == [True]
    again = propose_rules(reflection, QA_PROMPT, SEED_QA, [fresh[0].rule], [record], samples=1)
    assert [p.kept for p in again] == [False] and again[0].reason == "restates an existing rule"


def test_a_rule_whose_condition_holds_for_every_input_is_dropped():
    """The 1.5B reflection model's favourite rule conditions on what the step always receives."""
    instruction = "You answer questions about a long conversation between two people.\n- Answer briefly."
    generic = "If the step receives a question about a long conversation, it should use the most recent memory."
    assert generic_condition(generic, instruction)
    assert not generic_condition("If the step receives a question about dates, it should answer with a date.",
                                 instruction)
    assert not generic_condition("If two memories conflict, it should trust the most recent one.", instruction)
    assert not generic_condition("Always answer briefly.", instruction)  # no condition: not this filter's call

    class Generic(ReflectionLM):
        def chat(self, messages, **kw):
            from memtrace_opt.lm.base import LMResult
            return LMResult(text=generic, model=self.model_id)

    record = {"Inputs": {"question": "q"}, "Generated Outputs": "x", "Feedback": "wrong"}
    [dropped] = propose_rules(accounted(Generic(), "reflection"), QA_PROMPT, instruction, [], [record], samples=1)
    assert not dropped.kept and dropped.reason == "its condition holds for every input of the step"


CASE = {"Inputs": {"context": "[4 March, 2024] Tom: I live in Leeds and I am vegetarian.\n[20 April, 2024] Priya: Hi Tom",
                   "question": "Is Tom vegetarian?"},
        "Generated Outputs": "Yes", "Feedback": "wrong: gold 'No, not anymore'"}


def test_a_rule_about_the_cases_speaker_is_generalized_to_a_person():
    from memtrace_opt.optimizers.rules import _render_record

    text = _render_record(CASE)
    rule, names = generalize_names("If the step receives a question about Tom's diet, it should trust Tom's "
                                   "latest memory.", text, "You answer questions.")
    assert rule == "If the step receives a question about a person's diet, it should trust a person's latest memory."
    assert names == []
    # a calendar word, a sentence opener of the record or a word of the instruction is no name of the case
    assert generalize_names("If the step receives a March date, it should use it.", text, "Answer.")[1] == []
    opener = _render_record({**CASE, "Feedback": "wrong. Gold: Not mentioned in the conversation"})
    assert generalize_names('If nothing matches, it should reply "Not mentioned".', opener, "Answer.") == (
        'If nothing matches, it should reply "Not mentioned".', [])


def test_a_rule_naming_a_place_of_the_case_is_dropped():
    class Specific(ReflectionLM):
        def chat(self, messages, **kw):
            from memtrace_opt.lm.base import LMResult
            return LMResult(text="If the step receives a question about Tom in Leeds, it should answer Leeds.",
                            model=self.model_id)

    [dropped] = propose_rules(accounted(Specific(), "reflection"), QA_PROMPT, "You answer questions.", [], [CASE],
                              samples=1)
    assert not dropped.kept and "Leeds" in dropped.reason and "Tom" not in dropped.rule


def test_delta_proposer_alternates_demo_sets_and_rules_and_renders_them_visibly():
    pool = [_demo(i, "repair") for i in range(3)]
    proposer = DeltaProposer({QA_PROMPT: pool}, accounted(ReflectionLM(), "reflection"), budget_tokens=400)
    record = {"Inputs": {"question": "q"}, "Generated Outputs": "x", "Feedback": "wrong"}
    first = proposer({QA_PROMPT: SEED_QA}, {QA_PROMPT: [record]}, [QA_PROMPT])[QA_PROMPT]
    assert EXAMPLES_HEADER in first and split_prompt(first).instruction == SEED_QA
    assert len(split_prompt(first).examples) == 3
    second = proposer({QA_PROMPT: first}, {QA_PROMPT: [record]}, [QA_PROMPT])[QA_PROMPT]
    parts = split_prompt(second)
    assert RULES_HEADER in second and QA_MAGIC in parts.rules[0]
    assert parts.examples == split_prompt(first).examples  # a rule delta keeps the parent's examples
    assert [p.mode for p in proposer.log] == ["demos", "rule"]


def make_ctx(run_dir, method: str, reflection=None, **plan):
    convs = conversations()
    plan = {"rounds": 2, "patience": 0, "max_metric_calls": 120, "minibatch_size": 3, **plan}
    return LoopContext(
        backend=backend(TaskLM(convs)), data=LoopData(tuple(convs[:1]), tuple(convs[1:2]), tuple(convs[2:])),
        plan=LoopPlan(method=method, **plan), run_dir=run_dir,
        reflection_lm=accounted(reflection or ReflectionLM(), "reflection"),
        attributor=qa_blamer() if method == "attributed" else None, base_prompts={QA_PROMPT: SEED_QA},
    )


def test_the_loop_with_delta_proposals_saves_demo_pools_and_fixes_the_blamed_prompt(tmp_path):
    state = run_loop(make_ctx(tmp_path, "attributed"))
    assert state.final["best_accuracy"] > state.final["seed_accuracy"]
    assert state.final["changed_components"] == [QA_PROMPT]
    saved = json.loads((tmp_path / "rounds" / "round_1" / "demos.json").read_text())
    assert list(saved["components"]) == [QA_PROMPT] and saved["counts"][QA_PROMPT]["repair"] == 3
    assert set(load_pools(tmp_path, 1)) == {QA_PROMPT}
    best = (tmp_path / "prompts" / f"{QA_PROMPT}.txt").read_text()
    assert split_prompt(best).instruction == SEED_QA  # edited by deltas, never rewritten
    assert (tmp_path / "prompts" / f"{QA_PROMPT}.diff").read_text().count("+") >= 2
    assert (tmp_path / "prompts" / "fact_extraction.txt").read_text() == PROMPTS["fact_extraction"]


@pytest.mark.parametrize("method", ["attributed", "unattributed"])
def test_every_method_spends_within_the_same_rollout_budget(tmp_path, method):
    state = run_loop(make_ctx(tmp_path / method, method, max_metric_calls=40))
    assert state.spend["rollouts"] <= 40 + len(cases_of(conversations()[2:])) * 2  # + the held-out final
    assert state.plan["max_metric_calls"] == 40 and state.plan["proposer"] == "delta"


class KillAtRule(ReflectionLM):
    """Ctrl-C at the first rule request of round ``kill_round`` (counted by rule requests seen)."""

    def __init__(self, kill_at: int) -> None:
        super().__init__()
        self.kill_at, self.seen = kill_at, 0

    def chat(self, messages, **kw):
        self.seen += 1
        if self.seen >= self.kill_at:
            raise KeyboardInterrupt
        return super().chat(messages, **kw)


def test_resume_mid_round_with_delta_proposals(tmp_path):
    whole = run_loop(make_ctx(tmp_path / "whole", "attributed"))
    with pytest.raises(KeyboardInterrupt):
        run_loop(make_ctx(tmp_path / "run", "attributed", reflection=KillAtRule(1)))
    killed = load_state(tmp_path / "run")
    assert killed.status == "running" and killed.rounds == []
    assert (tmp_path / "run" / "rounds" / "round_1" / "demos.json").exists()
    resumed = run_loop(make_ctx(tmp_path / "run", "attributed"), resume=True)
    assert resumed.status == "done"
    assert resumed.final["best_accuracy"] == whole.final["best_accuracy"]
    assert resumed.best_candidate == whole.best_candidate


class RecordingTaskLM(TaskLM):
    def __init__(self, convs) -> None:
        super().__init__(convs)
        self.qa_messages: list[list[dict[str, str]]] = []

    def chat(self, messages, **kw):
        if not messages[-1]["content"].startswith(("Message: ", "Fact: ")):
            self.qa_messages.append(messages)
        return super().chat(messages, **kw)


def test_the_answer_op_puts_learned_rules_and_examples_after_the_memories():
    """The instruction + memories prefix stays the seed's (KV-cache reuse); a plain prompt is sent as it was.
    The example here is hand-written text, which stays inline; mined examples become chat turns
    (tests/test_qa_example_turns.py)."""
    from memtrace_opt.graph.prompt_parts import compose_prompt

    convs = conversations()
    qas = convs[0].qa[:1]
    plain = RecordingTaskLM(convs)
    backend(plain).record(convs[0], qas, {**PROMPTS, QA_PROMPT: SEED_QA})
    system, user = (m["content"] for m in plain.qa_messages[0])
    assert system == SEED_QA and RULES_HEADER not in user

    learned = RecordingTaskLM(convs)
    prompt = compose_prompt(SEED_QA, ["If asked about a pet, it should name it."], ["Input: q\nCorrect output: a"])
    backend(learned).record(convs[0], qas, {**PROMPTS, QA_PROMPT: prompt})
    system2, user2 = (m["content"] for m in learned.qa_messages[0])
    assert system2 == SEED_QA
    assert user2.startswith(user.split("Question:")[0])  # same memories prefix as the plain prompt
    assert user2.index("Memories:") < user2.index(RULES_HEADER) < user2.index(EXAMPLES_HEADER) < user2.index("Question:")


def test_a_long_closest_record_is_cut_not_dropped():
    """A context whose most relevant record is longer than the excerpt budget still shows that record
    (an empty context in a demo taught the model to answer without evidence)."""
    from memtrace_opt.optimizers.feedback import render_value

    records = [{"text": "Bob: hello there"}, {"text": "Ann: my cat Biscuit " + "is lovely and fluffy " * 40},
               {"text": "Bob: nice weather"}] * 3
    shown = render_value(records, max_chars=200, focus="What is Ann's cat called? Biscuit")
    assert "Biscuit" in shown and len(shown) < 320


def test_a_demo_shows_only_the_context_lines_about_its_question():
    traces = traces_with(SEED_QA)
    pools = mine_unattributed_demos(traces, [QA_PROMPT])
    cat = next(d for d in pools[QA_PROMPT] if d.output == "Biscuit")
    context = dict(cat.inputs)["context"]
    assert "Biscuit" in context and "Bristol" not in context and "nurse" not in context


def test_accepting_ties_sends_a_tied_candidate_on_to_validation(tmp_path):
    """With acceptance 'equal' a candidate that only ties its parent on the minibatch is still validated."""

    class NoOp(ReflectionLM):  # every rule restates nothing useful: candidates tie the parent
        def chat(self, messages, **kw):
            self.components.append("question_answering")
            from memtrace_opt.lm.base import LMResult
            return LMResult(text="If the step receives a question naming a person, it should answer it.",
                            model=self.model_id)

    strict = run_loop(make_ctx(tmp_path / "strict", "attributed", reflection=NoOp(), rounds=1, max_demos=1,
                               demo_tokens=1))
    equal = run_loop(make_ctx(tmp_path / "equal", "attributed", reflection=NoOp(), rounds=1, max_demos=1,
                              demo_tokens=1, acceptance="equal"))
    log = lambda p: (p / "rounds" / "round_1" / "gepa" / "gepa_log.txt").read_text()  # noqa: E731
    assert "is not better than old score" in log(tmp_path / "strict")
    assert "is not better than old score" not in log(tmp_path / "equal")
    assert strict.plan["acceptance"] == "strict" and equal.plan["acceptance"] == "equal"
