"""The GEPA adapter: replay-based evaluation, what it re-executes, and the reflective records it builds."""

from __future__ import annotations

import pytest

from memtrace_opt.errors import ConfigError
from memtrace_opt.optimizers import MemoryPromptAdapter, cases_of, reflective_records
from memtrace_opt.systems.base import QA_PROMPT
from tests.test_loop_fixtures import QA_MAGIC, SEED_QA, TaskLM, backend, conversations, qa_blamer, seed_prompts

GOOD_QA = f"{SEED_QA} Always {QA_MAGIC} before answering."


def make(mode: str = "attributed", attributor=None, **kw):
    convs = conversations()
    task = TaskLM(convs, **kw)
    adapter = MemoryPromptAdapter(backend(task), convs[:1], base_prompts=seed_prompts(), mode=mode,
                                  attributor=attributor or (qa_blamer() if mode == "attributed" else None))
    return adapter, task, cases_of(convs[:1])


def test_qa_prompt_change_makes_zero_ingestion_calls():
    adapter, task, cases = make()
    first = adapter.evaluate(cases, {QA_PROMPT: SEED_QA})
    assert first.scores == [0.0, 0.0, 0.0] and first.trajectories is None
    ingest_before, qa_before = task.ingestion_calls, task.calls["qa"]
    better = adapter.evaluate(cases, {QA_PROMPT: GOOD_QA})
    assert better.scores == [1.0, 1.0, 1.0]
    assert task.ingestion_calls == ingest_before  # ingestion reused from the recorded graph
    assert task.calls["qa"] == qa_before + len(cases)


def test_identical_candidate_costs_nothing_and_extraction_change_reruns_extraction():
    adapter, task, cases = make()
    adapter.evaluate(cases, {QA_PROMPT: SEED_QA})
    snapshot = dict(task.calls)
    adapter.evaluate(cases, {QA_PROMPT: SEED_QA})
    assert task.calls == snapshot
    adapter.evaluate(cases, {"fact_extraction": "Extract every fact, with dates."})
    assert task.calls["extract"] == snapshot["extract"] + 4
    assert task.calls["decide"] == snapshot["decide"]  # same facts came out: their consumers are reused


def test_rollouts_are_counted_per_question():
    adapter, _, cases = make()
    adapter.evaluate(cases, {})
    adapter.evaluate(cases[:2], {QA_PROMPT: GOOD_QA})
    assert adapter.rollouts == 5


def test_blame_is_attached_to_failures_and_cached():
    calls = []

    def counting(graph, conv, qas):
        calls.append([q.id for q in qas])
        return qa_blamer()(graph, conv, qas)

    adapter, _, cases = make(attributor=counting)
    batch = adapter.evaluate(cases, {}, capture_traces=True)
    assert all(t.blame and t.blame.prompt_component == QA_PROMPT for t in batch.trajectories)
    adapter.evaluate(cases, {}, capture_traces=True)
    assert len(calls) == 1


def test_attributed_records_go_only_to_the_blamed_component():
    adapter, _, cases = make()
    batch = adapter.evaluate(cases, {}, capture_traces=True)
    data = adapter.make_reflective_dataset({}, batch, [QA_PROMPT, "fact_extraction"])
    assert len(data[QA_PROMPT]) == 3 and data["fact_extraction"] == []
    record = data[QA_PROMPT][0]
    assert set(record) == {"Inputs", "Generated Outputs", "Feedback"}
    assert "ResponseError" in record["Feedback"] and "Biscuit" in record["Feedback"]
    assert "My cat is called Biscuit" in record["Inputs"]["context"]  # the faulty op's own input


def test_unattributed_and_answer_feedback_records():
    adapter, _, cases = make("unattributed")
    batch = adapter.evaluate(cases, {}, capture_traces=True)
    data = adapter.make_reflective_dataset({}, batch, [QA_PROMPT, "fact_extraction", "memory_update"])
    assert [len(v) for v in data.values()] == [3, 3, 3]
    assert data["fact_extraction"] == data[QA_PROMPT]
    assert data[QA_PROMPT][0]["Feedback"].startswith("ResponseError")
    assert all(t.blame is None for t in batch.trajectories)  # no attribution ran
    answer_level = reflective_records("answer_feedback", batch.trajectories, QA_PROMPT)
    assert answer_level[0]["Feedback"] == "The answer is wrong. The correct answer is: Biscuit"
    assert set(answer_level[0]["Inputs"]) == {"question"}


def test_unknown_component_is_a_config_error():
    adapter, _, cases = make()
    with pytest.raises(ConfigError, match="unknown prompt components"):
        adapter.evaluate(cases, {"nope": "x"})


def test_attributed_mode_needs_an_attributor():
    convs = conversations()
    with pytest.raises(ValueError, match="attributor"):
        MemoryPromptAdapter(backend(TaskLM(convs)), convs, base_prompts=seed_prompts(), mode="attributed")


def test_long_contexts_shown_to_reflection_keep_the_relevant_records():
    from memtrace_opt.optimizers.feedback import render_value

    records = [{"text": f"filler line {i} about the weather", "date": "1 May"} for i in range(80)]
    records[50] = {"text": "My cat is called Biscuit", "date": "2 May"}
    text = render_value(records, 500, focus="What is Ann's cat called? Biscuit")
    assert "[2 May] My cat is called Biscuit" in text and len(text) <= 500
    assert text.endswith("records shown: those closest to the question)")


def test_rag_candidate_replays_through_the_runner():
    from memtrace_opt.optimizers import RunnerBackend
    from memtrace_opt.systems.registry import get_system
    from tests.scripted_lm import HashEmbedder

    convs = conversations()
    task = TaskLM(convs)
    rag = RunnerBackend("rag", lms={"task": task}, judge="deterministic", resources={"embedder": HashEmbedder()})
    adapter = MemoryPromptAdapter(rag, convs[:2], base_prompts={**get_system("rag").prompts(), QA_PROMPT: SEED_QA},
                                  mode="answer_feedback")
    cases = cases_of(convs[:2])
    assert [t.score for t in adapter.run(cases, {})] == [0.0] * 6
    assert [t.score for t in adapter.run(cases, {QA_PROMPT: GOOD_QA})] == [1.0] * 6
    assert task.calls["qa"] == 12
