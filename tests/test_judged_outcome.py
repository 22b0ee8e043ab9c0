"""The one judged-outcome reader (:mod:`memtrace_opt.graph.outcome`): the right record off a real traced graph,
one error when there is none, and every former reader (runner results, the optimizer's adapter, attribution's
failure list, counterfactual and injection replays) built on it."""

from __future__ import annotations

import pytest

from memtrace_opt.attribution.counterfactual import replay_fix
from memtrace_opt.attribution.failures import collect_cases, collect_failures
from memtrace_opt.bench.inject import Injection, inject_case
from memtrace_opt.attribution.tracing import Candidate
from memtrace_opt.data.model import QA
from memtrace_opt.errors import GraphError
from memtrace_opt.graph import (
    JudgedOutcome, MemoryGraph, MissingOutcomeError, Overrides, Tracer, read_judged_outcome,
)
from memtrace_opt.graph.model import ANSWER, GOLD, JUDGEMENT
from memtrace_opt.optimizers import MemoryPromptAdapter, RunnerBackend, cases_of
from memtrace_opt.systems.base import QA_PROMPT
from memtrace_opt.systems.runner import make_rerun, results_from_graph, run_conversation
from tests.test_loop_fixtures import QA_MAGIC, SEED_QA, SYSTEM, TaskLM, conversations, seed_prompts
from tests.toy_system import PROMPTS as TOY_PROMPTS
from tests.toy_system import PromptEchoLM, run_toy

GOOD_QA = f"{SEED_QA} Always {QA_MAGIC} before answering."
SETTINGS = {"top_k": 1}  # retrieval shows only the first memory: the cat question is answerable, the others not


@pytest.fixture(scope="module")
def mixed():
    """A real run of the looptest system (deterministic judge): q0 right, q1 and q2 wrong."""
    convs = conversations()
    conv = convs[0]
    run = run_conversation(SYSTEM, conv, lms={"task": TaskLM(convs)}, prompts={**seed_prompts(), QA_PROMPT: GOOD_QA},
                           settings=SETTINGS, judge="deterministic", run_id="r1")
    return convs, conv, run


def _hand_graph(answer: object, judgement: object, gold: object = None) -> MemoryGraph:
    """One answer session holding ``answer:q1`` (two versions), ``judgement:q1`` and, if given, ``gold:q1``."""
    tracer = Tracer(MemoryGraph({"conversation_id": "hand"}))
    with tracer.session("answer:q1", kind="answer", qa_id="q1"):
        tracer.variable("answer:q1", "a first draft", category=ANSWER)
        tracer.variable("answer:q1", answer, category=ANSWER)
        if gold is not None:
            tracer.variable("gold:q1", gold, category=GOLD)
        tracer.variable("judgement:q1", judgement, category=JUDGEMENT)
    return tracer.graph


# -- the reader -------------------------------------------------------------------------------------

def test_reader_returns_a_real_runs_prediction_gold_verdict_and_variables(mixed):
    _, conv, run = mixed
    right, wrong = conv.qa[0], conv.qa[1]
    got = read_judged_outcome(run.graph, right.id)
    assert (got.qa_id, got.prediction, got.score, got.correct, got.gold) == (right.id, "Biscuit", 1, True, "Biscuit")
    assert got.answer_var == f"answer:{right.id}@1" and got.judgement_var == f"judgement:{right.id}@1"
    assert run.graph.ops[run.graph.producer[got.judgement_var]].name == "eval.judge"
    recorded = run.graph.value(got.judgement_var)
    assert (got.label, got.reason) == (recorded["label"], recorded["reason"]) and got.label == "CORRECT"
    missed = read_judged_outcome(run.graph, wrong.id)
    assert (missed.prediction, missed.score, missed.correct, missed.gold) == ("Not mentioned", 0, False, "Bristol")
    assert missed.label == "WRONG"


def test_reader_takes_latest_versions_a_label_only_verdict_and_a_dict_gold():
    got = read_judged_outcome(_hand_graph("Paris", {"label": "correct"}, {"answer": "Paris", "evidence": ["D1:1"]}), "q1")
    assert got == JudgedOutcome("q1", "Paris", 1, "correct", "", "Paris", "answer:q1@2", "judgement:q1@1")


def test_a_question_the_graph_never_answered_raises_one_line_naming_it_and_the_graph(mixed):
    _, _, run = mixed
    with pytest.raises(MissingOutcomeError) as err:
        read_judged_outcome(run.graph, "c-opt/q99")
    assert str(err.value) == ("graph of conversation 'c-opt', run 'r1' has no judged outcome for question "
                              "'c-opt/q99': no 'answer:c-opt/q99' variable")
    assert isinstance(err.value, GraphError) and err.value.one_line() == str(err.value)


def test_an_answer_never_judged_has_no_outcome_and_is_no_failure_case():
    tracer = Tracer(MemoryGraph({"conversation_id": "toy"}), lm=PromptEchoLM(), prompts=TOY_PROMPTS)
    run_toy(tracer, [["alice likes coffee"]], ["what does alice like?"])
    graph = tracer.graph
    assert "answer:q0" in graph.latest
    with pytest.raises(MissingOutcomeError, match=r"question 'q0': no 'judgement:q0' variable$"):
        read_judged_outcome(graph, "q0")
    assert collect_cases(graph) == []  # attribution's listing skips it explicitly: nothing says it failed


def test_a_judgement_without_a_readable_score_is_no_outcome():
    with pytest.raises(MissingOutcomeError, match=r"'judgement:q1@1' holds no readable score"):
        read_judged_outcome(_hand_graph("Paris", {"reason": "the judge gave no reply"}, "Paris"), "q1")


# -- the runner -------------------------------------------------------------------------------------

def test_runner_results_read_back_from_the_graph_equal_the_runs_own(mixed):
    convs, conv, run = mixed
    assert [r.judge_score for r in run.results] == [1, 0, 0]
    assert results_from_graph(run.graph, conv.id, conv.qa) == run.results
    unrecorded = run_conversation(SYSTEM, conv, lms={"task": TaskLM(convs)},
                                  prompts={**seed_prompts(), QA_PROMPT: GOOD_QA}, settings=SETTINGS,
                                  judge="deterministic", enabled=False)
    assert not unrecorded.graph.variables and unrecorded.results == run.results  # read off the variables themselves


def test_runner_results_need_the_gold_and_raise_for_a_missing_question(mixed):
    _, conv, run = mixed
    with pytest.raises(MissingOutcomeError, match="no 'answer:c-opt/q9' variable"):
        results_from_graph(run.graph, conv.id, [QA("c-opt/q9", "?", "x", "single-hop")])
    with pytest.raises(MissingOutcomeError, match=r"no gold answer \('gold:q1'\)"):
        results_from_graph(_hand_graph("Paris", {"score": 1}), "hand", [QA("q1", "?", "Paris", "single-hop")])


# -- the optimizer's adapter --------------------------------------------------------------------------

class ForgetfulBackend(RunnerBackend):
    """Records only the first question it is asked for: the graph lacks the others' outcomes."""

    def record(self, conversation, qas, prompts):
        return super().record(conversation, list(qas)[:1], prompts)


def test_adapter_scores_are_the_readers_and_a_missing_outcome_raises_instead_of_scoring_zero():
    convs = conversations()
    backend = RunnerBackend(SYSTEM, lms={"task": TaskLM(convs)}, settings=SETTINGS, judge="deterministic")
    adapter = MemoryPromptAdapter(backend, convs[:1], base_prompts=seed_prompts(), mode="unattributed")
    cases = cases_of(convs[:1])
    batch = adapter.evaluate(cases, {QA_PROMPT: GOOD_QA}, capture_traces=True)
    assert batch.scores == [1.0, 0.0, 0.0]
    for trace in batch.trajectories:
        read = read_judged_outcome(trace.graph, trace.case.qa_id)
        assert (trace.prediction, trace.score, trace.verdict) == (read.prediction, float(read.score), read.label)
    forgetful = ForgetfulBackend(SYSTEM, lms={"task": TaskLM(convs)}, settings=SETTINGS, judge="deterministic")
    adapter = MemoryPromptAdapter(forgetful, convs[:1], base_prompts=seed_prompts(), mode="unattributed")
    with pytest.raises(MissingOutcomeError, match=f"question '{cases[1].qa_id}'"):
        adapter.evaluate(cases, {QA_PROMPT: GOOD_QA})


# -- attribution ----------------------------------------------------------------------------------------

def test_failure_listing_carries_the_readers_outcome_and_variables(mixed):
    _, conv, run = mixed
    failures = collect_failures(run.graph, conv.qa)
    assert [c.qa_id for c in failures] == [conv.qa[1].id, conv.qa[2].id]
    for case in failures:
        read = read_judged_outcome(run.graph, case.qa_id)
        assert (case.prediction, case.score, case.answer_var) == (read.prediction, 0, read.answer_var)
        assert case.qa_op == run.graph.producer[read.answer_var]
        assert case.judge_op == run.graph.producer[read.judgement_var]
    assert [c.score for c in collect_cases(run.graph, conv.qa)] == [1, 0, 0]


def test_a_verification_replay_that_loses_the_question_is_a_counted_failure_not_a_verdict(mixed):
    _, conv, run = mixed
    case = collect_failures(run.graph, conv.qa)[0]
    other = [q for q in conv.qa if q.id != case.qa_id][:1]  # the replay answers another question only
    rerun = make_rerun(SYSTEM, conv, other, SETTINGS, "deterministic")
    cand = Candidate("ResponseError", case.qa_op, 0, "test")
    verdict = replay_fix(run.graph, case, cand, (Overrides(), case.qa_op), rerun, {"task": TaskLM(conversations())})
    assert verdict.failed and verdict.rescued is None
    assert f"no judged outcome for question '{case.qa_id}'" in verdict.note


def test_an_injection_replay_that_loses_the_question_is_a_skip_reason(mixed):
    _, conv, run = mixed
    case = collect_cases(run.graph, conv.qa)[0]
    rerun = make_rerun(SYSTEM, conv, [conv.qa[1]], SETTINGS, "deterministic")
    injection = Injection("ResponseError", case.qa_op, Overrides(), "nothing changed")
    got = inject_case(run.graph, case, injection, rerun, {"task": TaskLM(conversations())})
    assert got == "the replayed graph has no judgement for the question"
