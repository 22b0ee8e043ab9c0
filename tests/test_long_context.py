"""Long-Context: one memory unit per conversation, updated per turn, trimmed visibly to its budget."""

from __future__ import annotations

import pytest

from memtrace_opt.graph import Overrides, replay
from memtrace_opt.graph.model import ANSWER, QA, RETRIEVAL, UPDATE
from memtrace_opt.graph.queries import lineage, lineage_messages
from memtrace_opt.systems.long_context import TRIMMED, record_tokens, split_to_budget
from memtrace_opt.systems.runner import make_rerun, run_conversation
from tests.scripted_lm import ScriptedLM, judge_lm, make_conversation

SESSIONS = [
    [("Priya", "I adopted a grey cat called Biscuit."), ("Tom", "I live in Leeds near the canal.")],
    [("Tom", "My sister Ada is moving to Canada."), ("Priya", "She sleeps all day long.")],
]
QAS = [
    {"question": "What is the name of Priya's cat?", "answer": "Biscuit", "evidence": ["D1:1"]},
    {"question": "Where is Ada moving?", "answer": "Canada", "evidence": ["D2:1"]},
]


def reader_lm() -> ScriptedLM:
    """Answers from the memories it is shown: the cat's name if Biscuit is in the context, Ada's move,
    and a tell-tale prefix when the system prompt says 'Respond' (to see prompt overrides)."""
    def reply(messages, match):
        context, question = match[1], match[2].lower()
        prefix = "R:" if "Respond" in messages[0]["content"] and "cat" in question else ""
        if "cat" in question:
            return prefix + ("Biscuit" if "Biscuit" in context else "Not mentioned")
        return "Canada" if "Canada" in context else "Not mentioned"
    return ScriptedLM([(r"Memories:\n(.*)\n\nQuestion: (.*?)\n", reply)])


def run(settings=None, conv=None, **kw):
    conv = conv or make_conversation(SESSIONS, QAS)
    roles = {"task": reader_lm(), "judge": judge_lm()}
    return run_conversation("long_context", conv, lms=roles, settings=settings, **kw), conv, roles


def test_one_unit_updated_per_turn_with_expected_categories():
    r, _, _ = run()
    g = r.graph
    assert g.latest_id("mem:context") == "mem:context@4"
    cats = {o.name: o.category for o in g.ops.values()}
    assert cats == {"long_context.memory_update": UPDATE, "long_context.retrieve": RETRIEVAL,
                    "qa.answer": QA, "eval.judge": "llm-judge"}
    update = g.ops[g.producer["mem:context@2"]]
    assert set(update.input_ids()) == {"message:D1:2@1", "mem:context@1"} and not update.lm_calls
    assert [rec["turn_id"] for rec in g.value("retrieved:c1/q1@1")] == ["D1:1", "D1:2", "D2:1", "D2:2"]
    assert [x.judge_score for x in r.results] == [1, 1]


def test_answer_lineage_reaches_the_evidence_messages():
    r, conv, _ = run()
    for qa in conv.qa:
        msgs = lineage_messages(r.graph, f"answer:{qa.id}@1")
        assert {f"message:{e}@1" for e in qa.evidence} <= set(msgs)


def test_trim_is_its_own_op_and_keeps_what_it_dropped():
    budget = sum(record_tokens(m) for m in [{"speaker": "Tom", "text": "My sister Ada is moving to Canada.",
                                              "date": "2 May 2024"},
                                             {"speaker": "Priya", "text": "She sleeps all day long.",
                                              "date": "2 May 2024"}])
    r, _, _ = run(settings={"context_tokens": budget})
    g = r.graph
    trims = [o for o in g.ops.values() if o.name == "long_context.trim"]
    assert trims and all(o.category == UPDATE and o.params == {"budget": budget} for o in trims)
    dropped = [rec["turn_id"] for v in g.variables.values() if v.category == TRIMMED for rec in v.value]
    assert dropped == ["D1:1", "D1:2"]
    final = g.value(g.latest_id("mem:context"))
    assert [rec["turn_id"] for rec in final] == ["D2:1", "D2:2"]
    # The cat question now fails, and its answer depends on the trim that dropped the evidence.
    assert [x.judge_score for x in r.results] == [0, 1]
    trim_of_d11 = next(o.id for o in trims if any(rec["turn_id"] == "D1:1"
                                                  for rec in g.value(o.outputs["trimmed"])))
    assert trim_of_d11 in lineage(g, "answer:c1/q0@1")
    assert "message:D1:1@1" in lineage_messages(g, g.ops[trim_of_d11].outputs["trimmed"])


def test_split_to_budget_drops_oldest_first():
    recs = [{"speaker": "A", "text": "one two three", "date": None}] * 3
    kept, dropped = split_to_budget(recs, record_tokens(recs[0]) * 2)
    assert len(kept) == 2 and len(dropped) == 1
    assert split_to_budget(recs, 0) == ([], recs)


def test_counterfactual_trim_override_rescues_the_answer():
    r, conv, _ = run(settings={"context_tokens": 20})
    g = r.graph
    last_trim = [o for o in g.ops.values() if o.name == "long_context.trim"][-1]
    evidence = g.value("message:D1:1@1")
    kept = g.value(last_trim.outputs["memory"])
    roles = {"task": reader_lm(), "judge": judge_lm()}
    over = Overrides(op_outputs={last_trim.id: {"memory": [evidence, *kept], "trimmed": []}})
    res = replay(g, make_rerun("long_context", conv, settings={"context_tokens": 20}), from_op=last_trim.id,
                 overrides=over, lms=roles)
    assert res.changed_answers == {"answer:c1/q0": ("Not mentioned", "Biscuit")}
    assert res.graph.value("judgement:c1/q0@1")["score"] == 1
    assert roles["task"].n_calls == 2  # both answers read the overridden memory; nothing upstream re-ran


def test_changed_qa_prompt_reexecutes_only_answers_and_their_changed_judgements():
    r, conv, _ = run()
    roles = {"task": reader_lm(), "judge": judge_lm()}
    res = replay(r.graph, make_rerun("long_context", conv), lms=roles,
                 overrides=Overrides(prompts={"question_answering": "Respond briefly from the memories."}))
    assert roles["task"].n_calls == 2  # the two answers; no ingestion op calls an LM
    assert sorted(o.split("/")[-1] for o in res.executed_ops) == ["eval.judge#0", "qa.answer#0", "qa.answer#0"]
    assert set(res.changed_answers) == {"answer:c1/q0"} and roles["judge"].n_calls == 1
    assert not [o for o in res.executed_ops if o.startswith("ingest:")]


@pytest.mark.parametrize("budget", [1, 10_000])
def test_extreme_budgets(budget):
    r, _, _ = run(settings={"context_tokens": budget})
    units = [v for v in r.graph.variables.values() if v.name == "mem:context"]
    assert units and (budget > 1 or r.graph.value(r.graph.latest_id("mem:context")) == [])
    assert any(v.category == ANSWER for v in r.graph.variables.values())
