"""Tracer and replay on the toy system: structure, versions, memo reuse and exact re-execution."""

from __future__ import annotations

import pytest

from memtrace_opt.errors import GraphError
from memtrace_opt.graph import MemoryGraph, Overrides, Tracer, replay
from tests.toy_system import PROMPTS, PromptEchoLM, run_toy

SESSIONS = [["alice likes tea", "bob lives in paris"], ["alice likes coffee", "bob moved to rome"]]
QUESTIONS = ["what does alice like", "where does bob live"]


def record(lm=None, **kw):
    lm = lm or PromptEchoLM()
    tracer = Tracer(MemoryGraph({"prompts": PROMPTS}), lm=lm, prompts=PROMPTS)
    run_toy(tracer, SESSIONS, QUESTIONS, **kw)
    return tracer, lm


def rerun(**kw):
    return lambda tracer: run_toy(tracer, SESSIONS, QUESTIONS, **kw)


def test_updates_make_versions_linked_to_previous():
    tracer, _ = record()
    g = tracer.graph
    assert g.latest_id("mem:1") == "mem:1@2"
    op = g.ops[g.producer["mem:1@2"]]
    assert "mem:1@1" in op.input_ids()
    assert g.variables["mem:1@2"].value == "Extract:alice likes coffee"


def test_deletion_is_an_op_with_a_tombstone():
    tracer, _ = record(delete_word="rome")
    g = tracer.graph
    tomb = g.variables[g.latest_id("mem:2")]
    assert tomb.deleted and tomb.value is None
    assert g.ops[g.producer[tomb.id]].category == "deletion"


def test_lm_calls_are_recorded_on_ops():
    tracer, lm = record()
    calls = [c for op in tracer.graph.ops.values() for c in op.lm_calls]
    assert len(calls) == lm.calls == 6
    assert tracer.graph.ops["ingest:s1/toy.extract#0"].prompt.component == "extract"


def test_replay_without_overrides_is_exact_and_free():
    tracer, _ = record()
    lm2 = PromptEchoLM()
    result = replay(tracer.graph, rerun(), lm=lm2)
    assert lm2.calls == 0
    assert result.graph.fingerprint() == tracer.graph.fingerprint()
    assert result.changed_answers == {}


def test_replay_with_changed_prompt_reexecutes_exactly_its_users():
    tracer, _ = record()
    lm2 = PromptEchoLM()
    result = replay(tracer.graph, rerun(), overrides=Overrides(prompts={"answer": "Respond briefly."}), lm=lm2)
    assert lm2.calls == 2
    assert sorted(o for o in result.executed_ops if "toy.answer" in o) == ["answer:q0/toy.answer#0", "answer:q1/toy.answer#0"]
    assert result.changed_answers["answer:q0"][1].startswith("Respond:")


def test_replay_with_output_override_changes_downstream_only():
    tracer, _ = record()
    lm2 = PromptEchoLM()
    over = Overrides(op_outputs={"ingest:s2/toy.extract#1": {"fact": "Extract:bob lives in oslo"}})
    result = replay(tracer.graph, rerun(), from_op="ingest:s2/toy.extract#1", overrides=over, lm=lm2)
    assert result.graph.value("mem:2@2") == "Extract:bob lives in oslo"
    assert lm2.calls == 1  # only the answer whose context changed
    assert set(result.changed_answers) == {"answer:q1"}


def test_replay_rejects_unknown_op():
    tracer, _ = record()
    with pytest.raises(GraphError, match="unknown operation"):
        replay(tracer.graph, rerun(), overrides=Overrides(op_outputs={"nope#0": {}}))


def test_disabled_tracer_passes_values_through():
    lm = PromptEchoLM()
    tracer = Tracer(lm=lm, prompts=PROMPTS, enabled=False)
    run_toy(tracer, SESSIONS, QUESTIONS)
    assert len(tracer.graph) == 0 and lm.calls == 6
