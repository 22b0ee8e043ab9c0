"""Graph queries on the toy system: lineage, impact, op subgraphs, unit lifetimes, slices, flat log, live units."""

from __future__ import annotations


import pytest

from memtrace_opt.errors import GraphError
from memtrace_opt.graph import MemoryGraph, Tracer, validate
from memtrace_opt.graph.queries import (
    descendants, flat_op_log, forward_impact, lineage, lineage_messages, live_units, op_subgraph, question_slice,
    short_value, unit_lifetime,
)
from tests.toy_system import PROMPTS, PromptEchoLM, run_toy

SESSIONS = [["alice likes tea", "bob lives in paris"], ["alice likes coffee", "bob moved to rome"]]
QUESTIONS = ["what does alice like", "where does bob live"]


@pytest.fixture(scope="module")
def g() -> MemoryGraph:
    tracer = Tracer(MemoryGraph({"prompts": PROMPTS}), lm=PromptEchoLM(), prompts=PROMPTS)
    run_toy(tracer, SESSIONS, QUESTIONS, delete_word="rome")
    return tracer.graph


def test_lineage_reaches_messages_through_versions(g):
    anc = lineage(g, "answer:q0@1")
    assert {"question:q0@1", "retrieved:q0@1", "mem:1@2", "mem:1@1", "message:D1:1@1", "message:D2:1@1"} <= anc
    assert "answer:q0/toy.answer#0" in anc and "answer:q0@1" not in anc
    assert lineage(g, "answer:q0@1", kind="operation") == {o for o in anc if o in g.ops}
    assert lineage(g, "message:D1:1@1") == set()


def test_lineage_messages_oldest_first(g):
    assert lineage_messages(g, "mem:1@2") == ["message:D1:1@1", "message:D2:1@1"]
    # bob's unit was deleted, so no answer depends on his messages through memory
    assert "message:D2:2@1" not in lineage_messages(g, "answer:q1@1")


def test_forward_impact_finds_answers(g):
    assert forward_impact(g, "message:D2:1@1") == ["answer:q0@1", "answer:q1@1"]
    assert forward_impact(g, "mem:2@3") == []  # a tombstone reaches nothing
    assert "answer:q0@1" in descendants(g, "fact:D1:1@1")


def test_op_subgraph_has_producer_consumers_and_leaves(g):
    views = op_subgraph(g, "mem:1@2")
    assert [v.relation for v in views] == ["producer", "consumer", "consumer"]
    producer = views[0]
    assert producer.op.id == "ingest:s2/toy.store#0"
    assert producer.outputs["unit"].id == "mem:1@2"
    assert [v.id for v in producer.inputs["_previous"]] == ["mem:1@1"]
    assert {leaf.id for leaf in producer.leaves} == {"answer:q0@1", "answer:q1@1"}
    assert all(v.op.category == "retrieval" for v in views[1:])


def test_unit_lifetime_shows_created_updated_deleted(g):
    events = unit_lifetime(g, "mem:2")
    assert [(e.var_id, e.event) for e in events] == [("mem:2@1", "created"), ("mem:2@2", "updated"), ("mem:2@3", "deleted")]
    assert events[2].op.category == "deletion" and events[2].readers == ()
    assert [e.event for e in unit_lifetime(g, "message:D1:1")] == ["input"]
    with pytest.raises(GraphError, match="no variable named"):
        unit_lifetime(g, "mem:99")


def test_question_slice_is_a_valid_closed_subgraph(g):
    s = question_slice(g, "q0")
    validate(s)
    assert s.meta["slice_of"] == "q0"
    assert "answer:q0@1" in s.variables and "answer:q1@1" not in s.variables
    assert "ingest:s2/toy.store#0" in s.ops  # made mem:1@2, which the retrieval read
    assert "ingest:s2/toy.store#1" not in s.ops  # bob's unit was deleted before q0: not in its slice
    assert set(s.sessions) == {"ingest:s1", "ingest:s2", "answer:q0"}
    assert list(s.variables) == [v for v in g.variables if v in s.variables]  # execution order kept
    with pytest.raises(GraphError, match="no answer:nope"):
        question_slice(g, "nope")


def test_flat_op_log_is_time_ordered_text(g):
    log = flat_op_log(g)
    assert [e.time for e in log] == sorted(e.time for e in log) and len(log) == len(g.ops)
    first = log[0]
    assert first.op_id == "ingest:s1/toy.extract#0" and first.prompt == "extract"
    assert first.inputs == (("message", "message:D1:1@1", "'alice likes tea'"),)
    assert "in: message=message:D1:1@1 'alice likes tea' -> out: fact=fact:D1:1@1" in first.line()


def test_live_units_over_time(g):
    t_after_s1 = max(v.time for v in g.variables.values() if v.session == "ingest:s1")
    assert [v.id for v in live_units(g, t_after_s1)] == ["mem:1@1", "mem:2@1"]
    assert [v.id for v in live_units(g, 10**9)] == ["mem:1@2"]
    assert live_units(g, 0) == []


def test_short_value_previews():
    assert short_value({"speaker": "Ann", "text": "hi\nthere"}) == "Ann: hi there"
    assert short_value("x" * 200, width=10) == "'xxxxxxxx…"


def test_unknown_ids_are_graph_errors(g):
    for fn in (lineage, forward_impact, op_subgraph):
        with pytest.raises(GraphError, match="not a variable"):
            fn(g, "ghost@1")


def test_lineage_reaches_the_input_messages_on_a_10k_op_graph():
    """Speed is a benchmark goal (`memtrace-opt bench-trace`), not a timed test; this checks the answer."""
    from memtrace_opt.bench.synthetic import synthetic_graph

    g = synthetic_graph(10_000)
    answers = [v.id for v in g.variables.values() if v.category == "answer"]
    assert len(answers) >= 20
    for vid in answers[-20:]:
        assert any(x.startswith("message:") for x in lineage(g, vid))


def test_slice_keeps_whole_multi_output_ops():
    from memtrace_opt.graph import Operation, Variable

    g = MemoryGraph()
    for name, t in (("message:D1:1", 1), ("mem:a", 3), ("mem:b", 4), ("question:x", 5), ("answer:x", 7)):
        g.add_variable(Variable(name, 1, "x", name, t))
    g.add_operation(Operation("s/update#0", "update", "update", {"m": ("message:D1:1@1",)},
                              {"a": "mem:a@1", "b": "mem:b@1"}, 2))
    g.add_operation(Operation("q/answer#0", "answer", "question-answering", {"q": ("question:x@1",), "u": ("mem:a@1",)},
                              {"answer": "answer:x@1"}, 6))
    s = question_slice(g, "x")
    validate(s)
    assert set(s.variables) == set(g.variables) and set(s.ops) == set(g.ops)
