"""Mem0 on the real mem0ai 1.0.x library (faiss + MiniLM, no LLM): every internal step is a graph op.

The LM is scripted: extraction turns each ``Speaker: sentence`` line into facts by regex, the
decision reads mem0's own prompt (the shown memories and the new facts) and decides UPDATE for a
changed city, DELETE for a retracted diet, ADD otherwise; the QA answer echoes the first memory.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re

import networkx as nx
import pytest

from memtrace_opt.errors import LMError
from memtrace_opt.graph import MemoryGraph, Overrides, Tracer, replay
from memtrace_opt.systems.mem0_prompts import FACT_PROMPT, UPDATE_PROMPT, load_mem0
from memtrace_opt.systems.mem0_system import Mem0System
from memtrace_opt.systems.registry import get_system
from memtrace_opt.systems.runner import make_rerun, run_conversation
from tests.scripted_lm import ScriptedLM, judge_lm, make_conversation

SESSIONS = [
    [("Alice", "I live in Paris."), ("Bob", "I am vegetarian."), ("Alice", "I have a cat named Tom."),
     ("Bob", "Nice!"), ("Alice", "Thanks."), ("Bob", "See you.")],
    [("Alice", "I moved to Rome last week."), ("Bob", "I eat meat again now.")],
]
QAS = [{"question": "Where does Alice live?", "answer": "Rome", "evidence": ["D2:1"]},
       {"question": "What is the name of Alice's cat?", "answer": "Tom", "evidence": ["D1:3"]}]

FACT_RULES = [
    (r"I (?:live in|moved to) (\w+)", "{speaker} lives in {0}"),
    (r"I am vegetarian", "{speaker} is vegetarian"),
    (r"I eat meat", "{speaker} eats meat"),
    (r"cat named (\w+)", "{speaker} has a cat named {0}"),
]


def extract_reply(messages, match, *, broken: str | None = None):
    system, user = messages[0]["content"], messages[-1]["content"]
    facts = []
    for speaker, text in re.findall(r"^user: (\w+): (.*)$", user, re.M):
        if broken and broken in text:
            return "Sure! Here are the facts: Alice, Paris"
        for pattern, template in FACT_RULES:
            m = re.search(pattern, text)
            if m:
                facts.append(template.format(*m.groups(), speaker=speaker))
    if "SHOUT" in system:
        facts = [f.upper() for f in facts]
    return json.dumps({"facts": facts})


def decision_reply(messages, match, *, bad_id: bool = False):
    prompt = messages[-1]["content"]
    blocks = re.findall(r"```\s*(\[.*?\])\s*```", prompt, re.S)
    facts = ast.literal_eval(blocks[-1])
    memory = ast.literal_eval(blocks[0]) if len(blocks) == 2 else []
    events, next_id = [], len(memory)
    for fact in facts:
        city = re.match(r"(\w+) lives in (\w+)", fact)
        old = next((m for m in memory if city and m["text"].startswith(f"{city[1]} lives in ")), None)
        diet = next((m for m in memory if "eats meat" in fact and "vegetarian" in m["text"]), None)
        if old is not None:
            mid = "7" if bad_id else old["id"]
            events.append({"id": mid, "text": fact, "event": "UPDATE", "old_memory": old["text"]})
        elif diet is not None:
            events.append({"id": diet["id"], "text": diet["text"], "event": "DELETE"})
            events.append({"id": str(next_id), "text": fact, "event": "ADD"})
            next_id += 1
        else:
            events.append({"id": str(next_id), "text": fact, "event": "ADD"})
            next_id += 1
    return json.dumps({"memory": events})


def qa_reply(messages, match):
    tag = messages[0]["content"].split()[0]
    first = re.search(r"^- \[[^\]]*\] (.*)$", messages[-1]["content"], re.M)
    return f"{tag}: {first[1] if first else 'Not mentioned'}"


def mem0_lm(*, broken: str | None = None, bad_id: bool = False) -> ScriptedLM:
    return ScriptedLM([
        (r"new retrieved facts are mentioned", lambda m, mt: decision_reply(m, mt, bad_id=bad_id)),
        (r"\nInput:\n", lambda m, mt: extract_reply(m, mt, broken=broken)),
        (r"Memories:\n", qa_reply),
    ], model_id="scripted/mem0")


@pytest.fixture(scope="module")
def conv():
    return make_conversation(SESSIONS, QAS)


def drive(tracer: Tracer, conv) -> None:
    system = Mem0System(tracer)
    try:
        system.ingest(conv)
        for qa in conv.qa:
            system.answer(qa)
    finally:
        system.close()


def record(conv, lm=None, prompts=None):
    lm = lm or mem0_lm()
    prompts = {**Mem0System.prompts(), **(prompts or {})}
    tracer = Tracer(MemoryGraph({"prompts": prompts}), lm=lm, prompts=prompts)
    drive(tracer, conv)
    return tracer.graph, lm


@pytest.fixture(scope="module")
def recorded(conv):
    return record(conv)


def units(graph):
    return {v.name for v in graph.variables.values() if v.name.startswith("mem:")}


def unit_holding(graph, text):
    return next(v for v in graph.variables.values() if v.name.startswith("mem:") and v.value == text)


# -- structure ----------------------------------------------------------------------------------
def test_every_step_of_add_is_an_op(recorded):
    graph, lm = recorded
    names = {op.name for op in graph.ops.values()}
    assert {"mem0.extract_facts", "mem0.search_similar", "mem0.update_decision", "mem0.add_memory",
            "mem0.update_memory", "mem0.delete_memory", "mem0.search", "qa.answer"} <= names
    # 3 adds (turn pairs) in session 1, 1 in session 2; the small-talk pair has no facts, so no decision
    assert len([o for o in graph.ops.values() if o.name == "mem0.extract_facts"]) == 4
    assert len([o for o in graph.ops.values() if o.name == "mem0.update_decision"]) == 3
    assert graph.ops["ingest:s1/mem0.extract_facts#0"].prompt.component == FACT_PROMPT
    assert graph.ops["ingest:s1/mem0.update_decision#0"].prompt.component == UPDATE_PROMPT
    assert lm.n_calls == 4 + 3 + 2
    assert nx.is_directed_acyclic_graph(graph.nx)


def test_update_links_new_version_to_old_and_decision(recorded):
    graph, _ = recorded
    old = unit_holding(graph, "Alice lives in Paris")
    new_id = f"{old.name}@2"
    assert graph.variables[new_id].value == "Alice lives in Rome"
    op = graph.ops[graph.producer[new_id]]
    assert op.name == "mem0.update_memory" and op.category == "update"
    assert old.id in op.input_ids()
    decision = graph.variables[op.inputs["decision"][0]]
    assert decision.name == "decision:s2#0"
    assert graph.ops[graph.producer[decision.id]].name == "mem0.update_decision"


def test_delete_is_a_deletion_op_ending_the_unit(recorded):
    graph, _ = recorded
    veg = unit_holding(graph, "Bob is vegetarian")
    tomb = graph.variables[graph.latest_id(veg.name)]
    assert tomb.deleted and tomb.value is None
    op = graph.ops[graph.producer[tomb.id]]
    assert op.name == "mem0.delete_memory" and op.category == "deletion"


def test_decision_sees_shown_units_and_mem0_built_the_same_prompts(conv):
    lm = mem0_lm()
    prompts = Mem0System.prompts()
    tracer = Tracer(MemoryGraph(), lm=lm, prompts=prompts)
    system = Mem0System(tracer)
    seen = []
    original = system.hooks.llm_call
    system.hooks.llm_call = lambda call, messages: (seen.append(messages), original(call, messages))[1]
    try:
        system.ingest(conv)
    finally:
        system.close()
    ours = [c.messages for c in lm.calls]
    assert ours == seen  # the ops sent exactly what mem0 itself built
    assert "Today's date is 2 May 2024." in ours[-2][0]["content"]  # session date, not today's
    decision = tracer.graph.ops["ingest:s2/mem0.update_decision#0"]
    shown = [tracer.graph.variables[v].value for v in decision.inputs["memories"]]
    assert "Alice lives in Paris" in shown


def test_answer_lineage_reaches_source_messages(recorded):
    graph, _ = recorded
    ctx = graph.variables["retrieved:c1/q0@1"].value
    assert ctx and {"text", "date", "memory_id"} <= set(ctx[0])
    ancestors = nx.ancestors(graph.nx, "answer:c1/q0@1")
    assert "message:D2:1@1" in ancestors and "message:D1:1@1" in ancestors


def test_memory_ids_are_deterministic(conv, recorded):
    graph, _ = recorded
    again, _ = record(conv)
    assert units(again) == units(graph)
    assert again.fingerprint() == graph.fingerprint()


# -- replay -------------------------------------------------------------------------------------
def test_replay_without_overrides_is_exact_and_free(conv, recorded):
    graph, _ = recorded
    lm = mem0_lm()
    result = replay(graph, lambda t: drive(t, conv), lm=lm)
    assert lm.n_calls == 0 and result.stats.lm_calls == 0
    assert result.graph.fingerprint() == graph.fingerprint()
    assert result.changed_answers == {}


def test_changed_qa_prompt_makes_no_ingestion_calls(conv, recorded):
    graph, _ = recorded
    lm = mem0_lm()
    result = replay(graph, lambda t: drive(t, conv), lm=lm,
                    overrides=Overrides(prompts={"question_answering": "Respond tersely from the memories."}))
    assert lm.n_calls == 2 and all("Memories:" in c.prompt for c in lm.calls)
    assert result.changed_answers["answer:c1/q0"][1].startswith("Respond:")


def test_changed_fact_prompt_reexecutes_extraction_and_downstream(conv, recorded):
    graph, _ = recorded
    lm = mem0_lm()
    prompt = graph.meta["prompts"][FACT_PROMPT] + "\nSHOUT every fact."
    result = replay(graph, lambda t: drive(t, conv), lm=lm, overrides=Overrides(prompts={FACT_PROMPT: prompt}))
    executed = result.stats.executed
    assert sum("mem0.extract_facts" in o for o in executed) == 4
    assert sum("mem0.update_decision" in o for o in executed) == 3
    assert "ALICE LIVES IN ROME" in {v.value for v in result.graph.variables.values() if v.name.startswith("mem:")}
    assert set(result.changed_answers) == {"answer:c1/q0", "answer:c1/q1"}


def test_overridden_decision_changes_what_mem0_applies(conv, recorded):
    graph, _ = recorded
    op_id = "ingest:s2/mem0.update_decision#0"
    forced = [{"id": "0", "text": "Alice lives in Milan", "event": "ADD"}]
    lm = mem0_lm()
    result = replay(graph, lambda t: drive(t, conv), from_op=op_id, lm=lm,
                    overrides=Overrides(op_outputs={op_id: {"decision": forced}}))
    g = result.graph
    paris = unit_holding(g, "Alice lives in Paris")
    assert g.latest_id(paris.name) == paris.id  # never updated now
    assert unit_holding(g, "Alice lives in Milan").version == 1
    assert unit_holding(g, "Bob is vegetarian").name in {v.name for v in g.variables.values()}
    assert g.variables[g.latest_id(unit_holding(g, "Bob is vegetarian").name)].deleted is False
    assert lm.n_calls <= 2  # only answers whose context changed


def test_overridden_facts_change_what_mem0_applies(conv, recorded):
    graph, _ = recorded
    op_id = "ingest:s1/mem0.extract_facts#1"
    lm = mem0_lm()
    result = replay(graph, lambda t: drive(t, conv), from_op=op_id, lm=lm,
                    overrides=Overrides(op_outputs={op_id: {"facts": ["Alice has a dog named Rex"]}}))
    texts = {v.value for v in result.graph.variables.values() if v.name.startswith("mem:")}
    assert "Alice has a dog named Rex" in texts and "Alice has a cat named Tom" not in texts
    assert lm.calls and "new retrieved facts" in lm.calls[0].prompt


# -- failures are data ----------------------------------------------------------------------------
def test_unparsable_extraction_is_a_failed_op_and_the_run_continues(conv):
    graph, _ = record(conv, lm=mem0_lm(broken="cat named"))
    op = graph.ops["ingest:s1/mem0.extract_facts#1"]
    assert op.status == "failed" and "unparsable" in op.error and op.raw.startswith("Sure!")
    assert graph.variables[op.outputs["facts"]].value == []
    assert "ingest:s1/mem0.update_decision#1" not in graph.ops  # mem0 saw no facts: no decision call
    assert "Alice has a cat named Tom" not in {v.value for v in graph.variables.values() if v.name.startswith("mem:")}
    assert "answer:c1/q1@1" in graph.variables and graph.ops["ingest:s2/mem0.update_memory#0"].status == "ok"


def test_out_of_range_id_is_a_failed_op(conv):
    graph, _ = record(conv, lm=mem0_lm(bad_id=True))
    dropped = [o for o in graph.ops.values() if o.name == "mem0.dropped_event"]
    assert len(dropped) == 1
    op = dropped[0]
    assert op.status == "failed" and "Error processing memory action" in op.error and op.params["event"] == 0
    assert op.inputs["decision"] == ("decision:s2#0@1",)
    paris = unit_holding(graph, "Alice lives in Paris")
    assert graph.latest_id(paris.name) == paris.id  # mem0 dropped the update


def test_length_cutoff_is_a_failed_decision(conv):
    lm = mem0_lm()
    original = lm.chat

    def chat(messages, **kw):
        result = original(messages, **kw)
        if "new retrieved facts" in messages[-1]["content"]:
            return dataclasses.replace(result, finish_reason="length")
        return result

    lm.chat = chat
    graph, _ = record(conv, lm=lm)
    decisions = [o for o in graph.ops.values() if o.name == "mem0.update_decision"]
    assert decisions and all(o.status == "failed" and "max_tokens" in o.error for o in decisions)
    assert not units(graph)


def test_lm_error_inside_a_hook_is_not_swallowed_by_mem0(conv):
    lm = mem0_lm()
    original = lm.chat

    def chat(messages, **kw):
        if "new retrieved facts" in messages[-1]["content"]:
            raise LMError("scripted: model crashed")  # mem0 catches this call's errors and logs them
        return original(messages, **kw)

    lm.chat = chat
    with pytest.raises(LMError, match="model crashed"):
        record(conv, lm=lm)


def test_disabled_tracer_runs_mem0_without_recording(conv):
    lm = mem0_lm()
    tracer = Tracer(lm=lm, prompts=Mem0System.prompts(), enabled=False)
    drive(tracer, conv)
    assert len(tracer.graph) == 0 and lm.n_calls == 4 + 3 + 2


# -- integration ----------------------------------------------------------------------------------
def test_registered_and_runs_through_the_shared_runner(conv):
    assert get_system("mem0") is Mem0System
    lms = {"task": mem0_lm(), "judge": judge_lm()}
    run = run_conversation("mem0", conv, list(conv.qa), lms=lms, judge="llm")
    assert [r.judge_score for r in run.results] == [1, 1]
    lm = mem0_lm()
    result = replay(run.graph, make_rerun("mem0", conv, list(conv.qa)), lms={"task": lm, "judge": judge_lm()})
    assert lm.n_calls == 0 and result.graph.fingerprint() == run.graph.fingerprint()


def test_default_prompts_are_mem0s_with_a_date_slot():
    prompts = Mem0System.prompts()
    assert set(prompts) == {FACT_PROMPT, UPDATE_PROMPT, "question_answering"}
    assert "Today's date is {session_date}." in prompts[FACT_PROMPT]
    assert prompts[UPDATE_PROMPT] == load_mem0().prompts.DEFAULT_UPDATE_MEMORY_PROMPT


# -- cost settings --------------------------------------------------------------------------------
def _run_with(conv, settings):
    lm = mem0_lm()
    prompts = Mem0System.prompts()
    tracer = Tracer(MemoryGraph({"prompts": prompts}), lm=lm, prompts=prompts)
    system = Mem0System(tracer, settings)
    try:
        system.ingest(conv)
    finally:
        system.close()
    return tracer.graph, lm


def _live_texts(graph):
    latest = {graph.variables[graph.latest_id(v.name)] for v in graph.variables.values() if v.name.startswith("mem:")}
    return sorted(v.value for v in latest if not v.deleted)


def test_session_level_ingestion_extracts_and_decides_once_per_session(conv, recorded):
    graph, lm = _run_with(conv, {"turns_per_add": "session"})
    extracts = [o for o in graph.ops.values() if o.name == "mem0.extract_facts"]
    assert [o.id for o in extracts] == ["ingest:s1/mem0.extract_facts#0", "ingest:s2/mem0.extract_facts#0"]
    assert len(extracts[0].inputs["messages"]) == len(SESSIONS[0])  # the whole session in one add
    assert lm.n_calls == 2 + 2  # one extraction and one decision per session, against 4 + 3 per pair
    assert _live_texts(graph) == _live_texts(recorded[0]) == [
        "Alice has a cat named Tom", "Alice lives in Rome", "Bob eats meat"]


@pytest.mark.parametrize("value", [0, -2, "sessions", "all"])
def test_turns_per_add_must_be_positive_or_session(value):
    from memtrace_opt.errors import ConfigError
    from memtrace_opt.systems.resolve import resolve_settings

    with pytest.raises(ConfigError, match="system.settings.turns_per_add"):
        resolve_settings(Mem0System, {"turns_per_add": value})


def test_changes_only_decision_asks_for_changes_and_keys_the_memo_on_it(conv):
    from memtrace_opt.systems.mem0_prompts import CHANGES_ONLY

    changes, lm_changes = _run_with(conv, {"decision_output": "changes"})
    full, lm_full = _run_with(conv, {})
    decisions = [c.messages[-1]["content"] for c in lm_changes.calls if "new retrieved facts" in c.messages[-1]["content"]]
    # the rule is only added where memories are shown (session 1's first add shows none)
    assert [d.endswith(CHANGES_ONLY) for d in decisions] == [False, True, True]
    assert not any(CHANGES_ONLY in c.messages[-1]["content"] for c in lm_full.calls)
    op = changes.ops["ingest:s2/mem0.update_decision#0"]
    assert op.params["output"] == "changes"  # a different request, so a memo never serves one for the other
    assert "output" not in full.ops["ingest:s2/mem0.update_decision#0"].params  # the default graph is unchanged
    assert _live_texts(changes) == _live_texts(full)
