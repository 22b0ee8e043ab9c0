"""RAG: buffer → document → embed → top-k retrieval → answer, each a traced op."""

from __future__ import annotations

import pytest

from memtrace_opt.graph import Overrides, replay
from memtrace_opt.graph.model import BUFFER, EMBEDDING, MEMORY_UNIT, QA, RETRIEVAL
from memtrace_opt.graph.queries import lineage_messages
from memtrace_opt.systems.rag import INDEX_ENTRY
from memtrace_opt.systems.runner import make_rerun, run_conversation
from tests.scripted_lm import HashEmbedder, ScriptedLM, judge_lm, make_conversation

SESSIONS = [
    [("Priya", "I adopted a grey cat called Biscuit."), ("Tom", "Lovely."),
     ("Tom", "I live in Leeds near the canal."), ("Priya", "Nice place.")],
    [("Tom", "My sister Ada is moving to Canada."), ("Priya", "When does Ada leave?"), ("Tom", "In June.")],
]
QAS = [
    {"question": "What is the name of the grey cat?", "answer": "Biscuit", "evidence": ["D1:1"]},
    {"question": "Where is Ada moving?", "answer": "Canada", "evidence": ["D2:1"]},
]


def reader_lm() -> ScriptedLM:
    def reply(messages, match):
        context, question = match[1], match[2].lower()
        word = "Biscuit" if "cat" in question else "Canada"
        answer = word if word in context else "Not mentioned"
        return ("R:" + answer) if "Respond" in messages[0]["content"] else answer
    return ScriptedLM([(r"Memories:\n(.*)\n\nQuestion: (.*?)\n", reply)])


def run(settings=None, embedder=None, **kw):
    conv = make_conversation(SESSIONS, QAS)
    emb = embedder or HashEmbedder()
    roles = {"task": reader_lm(), "judge": judge_lm()}
    r = run_conversation("rag", conv, lms=roles, settings=settings, resources={"embedder": emb}, **kw)
    return r, conv, roles, emb


def test_ops_categories_and_documents():
    r, _, _, _ = run(settings={"chunk_tokens": 12, "top_k": 2})
    g = r.graph
    cats = {o.name: o.category for o in g.ops.values()}
    assert cats == {"rag.message_buffer_update": BUFFER, "rag.finalize_memory_unit": BUFFER, "rag.add": EMBEDDING,
                    "rag.retrieve": RETRIEVAL, "qa.answer": QA, "eval.judge": "llm-judge"}
    docs = [v for v in g.variables.values() if v.category == MEMORY_UNIT]
    # chunk_tokens=12 closes a document once its messages reach ~12 tokens; sessions always close one.
    assert [d.value["turn_ids"] for d in docs] == [["D1:1", "D1:2"], ["D1:3", "D1:4"], ["D2:1", "D2:2"], ["D2:3"]]
    assert [d.value["date"] for d in docs] == ["1 May 2024"] * 2 + ["2 May 2024"] * 2
    assert docs[0].value["text"] == "Priya: I adopted a grey cat called Biscuit.\nTom: Lovely."
    assert len([v for v in g.variables.values() if v.category == INDEX_ENTRY]) == 4
    assert g.ops["answer:c1/q0/rag.retrieve#0"].params == {"top_k": 2} and g.ops["answer:c1/q0/rag.retrieve#0"].prompt is None
    assert len(g.value("retrieved:c1/q0@1")) == 2
    assert [x.judge_score for x in r.results] == [1, 1]


def test_one_document_per_session_with_default_chunk_size():
    r, _, _, _ = run()
    docs = [v for v in r.graph.variables.values() if v.category == MEMORY_UNIT]
    assert [d.name for d in docs] == ["mem:doc1", "mem:doc2"]
    buffers = [v.id for v in r.graph.variables.values() if v.name.startswith("buffer:")]
    assert buffers == ["buffer:1@1", "buffer:1@2", "buffer:1@3", "buffer:1@4", "buffer:2@1", "buffer:2@2", "buffer:2@3"]


def test_answer_lineage_reaches_evidence_and_retrieval_finds_the_evidence_document():
    r, conv, _, _ = run(settings={"chunk_tokens": 12, "top_k": 1})
    g = r.graph
    for qa in conv.qa:
        assert {f"message:{e}@1" for e in qa.evidence} <= set(lineage_messages(g, f"answer:{qa.id}@1"))
        top = g.value(f"retrieved:{qa.id}@1")[0]
        assert set(qa.evidence) <= set(top["turn_ids"]) and top["unit"].startswith("mem:doc")


def test_retrieval_miss_is_visible_as_a_wrong_answer_with_the_document_in_store():
    wrong = make_conversation(SESSIONS, [{"question": "Who lives in Leeds near the canal?", "answer": "Biscuit",
                                          "evidence": ["D1:1"]}])
    r = run_conversation("rag", wrong, lms={"task": reader_lm(), "judge": judge_lm()},
                         settings={"chunk_tokens": 12, "top_k": 1}, resources={"embedder": HashEmbedder()})
    g = r.graph
    assert [rec["turn_ids"] for rec in g.value("retrieved:c1/q0@1")] == [["D1:3", "D1:4"]]
    assert g.value("mem:doc1@1")["turn_ids"] == ["D1:1", "D1:2"] and r.results[0].judge_score == 0


def test_replay_with_changed_qa_prompt_makes_no_ingestion_lm_calls_and_rebuilds_the_index():
    r, conv, _, emb = run()
    roles = {"task": reader_lm(), "judge": judge_lm()}
    res = replay(r.graph, make_rerun("rag", conv, resources={"embedder": emb}), lms=roles,
                 overrides=Overrides(prompts={"question_answering": "Respond from the memories."}))
    assert roles["task"].n_calls == 2 and roles["judge"].n_calls == 2
    ingest = [o for o in res.executed_ops if o.startswith("ingest:")]
    assert ingest and {o.split("/")[1].split("#")[0] for o in ingest} == {"rag.add"}  # side effect: always re-run
    assert set(res.changed_answers) == {"answer:c1/q0", "answer:c1/q1"}


def test_replay_without_overrides_is_exact():
    r, conv, _, emb = run(settings={"chunk_tokens": 12})
    roles = {"task": reader_lm(), "judge": judge_lm()}
    res = replay(r.graph, make_rerun("rag", conv, settings={"chunk_tokens": 12}, resources={"embedder": emb}), lms=roles)
    assert res.graph.fingerprint() == r.graph.fingerprint() and roles["task"].n_calls == 0


@pytest.mark.slow
def test_rag_on_a_mini_conversation_with_the_embedded_model(tmp_path):
    """End to end with the real models: MiniLM embeddings and the embedded Qwen 1.5B (minutes on 2 CPUs)."""
    from memtrace_opt.data import load_dataset
    from memtrace_opt.lm import ModelConfig, UsageLedger, build_roles

    conv = load_dataset("mini").conversations[0]
    ledger = UsageLedger()
    roles = build_roles(ModelConfig(provider="embedded", model="qwen-1.5b"), cache_dir=tmp_path, ledger=ledger)
    r = run_conversation("rag", conv, lms={"task": roles.task, "judge": roles.judge},
                         settings={"top_k": 2, "chunk_tokens": 64})
    g = r.graph
    assert len(r.results) == len(conv.scored_qa()) and all(x.prediction for x in r.results)
    assert len([v for v in g.variables.values() if v.category == MEMORY_UNIT]) > 3
    with_evidence = [qa for qa in conv.scored_qa() if qa.evidence]
    found = 0
    for qa in with_evidence:
        assert {f"message:{e}@1" for e in qa.evidence} <= set(lineage_messages(g, f"answer:{qa.id}@1"))
        hit = {t for rec in g.value(f"retrieved:{qa.id}@1") for t in rec["turn_ids"]}
        found += bool(set(qa.evidence) & hit)
    assert found >= len(with_evidence) / 2, f"MiniLM retrieved evidence for only {found}/{len(with_evidence)}"
    usage = ledger.to_dict()["by_role"]
    assert usage["task"]["calls"] == len(conv.scored_qa()) and usage["task"]["completion_tokens"] > 0
    print(f"\nrag/mini-1 real: accuracy {sum(x.judge_score for x in r.results)}/{len(r.results)}, "
          f"evidence found {found}/{len(with_evidence)}, wall {r.wall_s:.0f} s, usage {usage}")


def test_a_fault_at_the_index_write_is_blamed_on_that_write_not_on_retrieval():
    """Corrupting the entry rag.add writes leaves the document unit intact: the searchable copy lost the
    fact, so the earliest decisive fault is the write (ExtractionError at rag.add), not retrieval."""
    from memtrace_opt.attribution.failures import collect_failures
    from memtrace_opt.attribution.tracing import TracingAttributor

    r, conv, roles, emb = run(settings={"chunk_tokens": 12, "top_k": 2})
    g = r.graph
    add = next(o for o in g.ops.values() if o.name == "rag.add" and "Biscuit" in str(g.value(o.output_ids()[0])))
    entry = dict(g.value(add.output_ids()[0]))
    entry["text"] = entry["text"].replace("called Biscuit", "")
    rerun = make_rerun("rag", conv, settings={"chunk_tokens": 12, "top_k": 2}, judge="llm",
                       resources={"embedder": emb})
    faulty = replay(g, rerun, overrides=Overrides(op_outputs={add.id: {"entry": entry}}), lms=roles).graph
    [case] = [c for c in collect_failures(faulty) if c.qa_id.endswith("q0")]
    blame = TracingAttributor(embed=None).attribute(faulty, case)
    assert (blame.error_type, blame.op_id) == ("ExtractionError", add.id)
    assert "wrote a copy without it" in blame.reason
    # with intact copies, a record dropped at retrieval is still a RetrievalError of the retrieval op
    retrieve = g.ops["answer:c1/q0/rag.retrieve#0"]
    kept = [rec for rec in g.value(retrieve.output_ids()[0]) if "Biscuit" not in rec["text"]]
    dropped = replay(g, rerun, overrides=Overrides(op_outputs={retrieve.id: {"context": kept}}), lms=roles).graph
    [case] = [c for c in collect_failures(dropped) if c.qa_id.endswith("q0")]
    blame = TracingAttributor(embed=None).attribute(dropped, case)
    assert (blame.error_type, blame.op_id) == ("RetrievalError", retrieve.id)


def test_the_cone_of_a_question_holds_only_the_documents_retrieval_kept():
    from memtrace_opt.graph import upstream_cone

    r, conv, _, _ = run(settings={"chunk_tokens": 12, "top_k": 1})
    g = r.graph
    qa = conv.qa[0]
    kept = {rec["unit"] for rec in g.value(f"retrieved:{qa.id}@1")}
    finalized = {o.id: g.value(o.outputs["doc"])["unit"] for o in g.ops.values() if o.name == "rag.finalize_memory_unit"}
    cone = upstream_cone(g, [qa.id])
    assert len(finalized) == 4 and len(kept) == 1
    assert {unit for op, unit in finalized.items() if op in cone} == kept
