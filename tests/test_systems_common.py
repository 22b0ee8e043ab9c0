"""Shared system machinery: registry, scripted LM, search index, judge op, runner, run directory."""

from __future__ import annotations

import json

import numpy as np
import pytest

from memtrace_opt import rundir as rd
from memtrace_opt.errors import ConfigError, GraphError
from memtrace_opt.graph.model import GOLD, JUDGE, JUDGEMENT
from memtrace_opt.systems.index import BM25Index, EmbeddingIndex, hybrid_rank, rrf_fuse
from memtrace_opt.systems.registry import get_system, system_names
from memtrace_opt.systems.evaluate import evaluate_system
from memtrace_opt.systems.runner import make_rerun, rerun_for, results_from_graph, run_conversation
from memtrace_opt.graph import replay
from tests.scripted_lm import HashEmbedder, ScriptedLM, UnscriptedPrompt, judge_lm, make_conversation

SESSIONS = [
    [("Priya", "I adopted a grey cat called Biscuit."), ("Tom", "I live in Leeds near the canal.")],
    [("Tom", "My sister Ada is moving to Canada."), ("Priya", "Biscuit sleeps all day.")],
]
QAS = [
    {"question": "What is the name of Priya's cat?", "answer": "Biscuit", "evidence": ["D1:1"]},
    {"question": "Where does Tom live?", "answer": "Leeds", "evidence": ["D1:2"]},
]
ANSWERS = {"cat": "Biscuit", "live": "Paris"}


def task_lm(**kw) -> ScriptedLM:
    """Answers by keyword of the question: the cat question right, the Tom question wrong."""
    def reply(messages, match):
        q = match[1].lower()
        return next((a for k, a in ANSWERS.items() if k in q), "Not mentioned")
    return ScriptedLM([(r"Question: (.*?)\n", reply)], **kw)


def lms(judge=None):
    return {"task": task_lm(), "judge": judge or judge_lm()}


@pytest.fixture
def conv():
    return make_conversation(SESSIONS, QAS)


# -- registry -----------------------------------------------------------------------------------
def test_registry_finds_systems_lazily():
    assert {"long_context", "rag"} <= set(system_names())
    assert get_system("rag").name == "rag"


def test_registry_unknown_name_lists_available():
    with pytest.raises(ConfigError, match=r"unknown memory system 'nope'.*long_context.*rag"):
        get_system("nope")


# -- scripted LM --------------------------------------------------------------------------------
def test_scripted_lm_rules_default_and_unmatched():
    lm = ScriptedLM([(r"hello (\w+)", lambda m, mt: mt[1].upper()), (r"bye", "ciao")])
    assert lm.chat([{"role": "user", "content": "hello world"}]).text == "WORLD"
    assert lm.chat([{"role": "user", "content": "bye"}], max_tokens=5).text == "ciao"
    assert lm.n_calls == 2 and lm.calls[1].kwargs == {"max_tokens": 5}
    with pytest.raises(UnscriptedPrompt, match="no rule matches"):
        lm.chat([{"role": "user", "content": "what?"}])
    assert ScriptedLM(default="x").chat([{"role": "user", "content": "?"}]).text == "x"


# -- search -------------------------------------------------------------------------------------
def test_embedding_index_add_replace_remove_search():
    idx = EmbeddingIndex(HashEmbedder())
    idx.add(["a", "b", "c"], ["grey cat Biscuit", "lives in Leeds", "sister moves to Canada"])
    assert idx.search("where is Leeds", k=1)[0].id == "b"
    idx.add(["b"], ["likes green tea"])  # replacing an id re-embeds it
    assert len(idx) == 3 and idx.search("green tea", k=1)[0].id == "b"
    idx.remove(["a", "zzz"])
    assert idx.ids() == ["c", "b"] and "a" not in idx
    assert [h.id for h in idx.search("cat", k=10)] and len(idx.search("cat", k=10)) == 2
    assert EmbeddingIndex(HashEmbedder()).search("anything", k=3) == []


def test_bm25_and_rrf_and_hybrid():
    bm = BM25Index(["d1", "d2", "d3"], ["Tom lives in Leeds", "Priya adopted a cat", "Ada moves to Canada"])
    assert [h.id for h in bm.search("Where does Tom live?", k=3)] == ["d1"]
    assert bm.search("xylophone", k=3) == [] and BM25Index([], []).search("a", 2) == []
    fused = rrf_fuse([["a", "b"], ["b", "c"]], k=60)
    assert [i for i, _ in fused] == ["b", "a", "c"] and fused[0][1] == pytest.approx(1 / 62 + 1 / 61)
    top = hybrid_rank("Tom live Leeds", ["d1", "d2", "d3"], bm.ids and ["Tom lives in Leeds", "Priya adopted a cat",
                      "Ada moves to Canada"], k=2, embedder=HashEmbedder())
    assert top[0][0] == "d1" and len(top) == 2


# -- runner and judge op ------------------------------------------------------------------------
def test_run_conversation_records_gold_judgement_and_meta(conv):
    run = run_conversation("long_context", conv, lms=lms(), run_id="r1", dataset="unit")
    g = run.graph
    assert g.meta["run_id"] == "r1" and g.meta["system"] == "long_context" and g.meta["judge"] == "llm"
    assert g.meta["prompts"]["question_answering"] and g.meta["qa_ids"] == ["c1/q0", "c1/q1"]
    assert g.meta["settings"]["context_tokens"] == 4000 and g.meta["conversation_id"] == "c1"
    judge_op = g.ops["answer:c1/q0/eval.judge#0"]
    assert judge_op.category == JUDGE and judge_op.prompt is None and len(judge_op.lm_calls) == 1
    assert g.variables["gold:c1/q0@1"].category == GOLD and g.variables["judgement:c1/q0@1"].category == JUDGEMENT
    assert set(judge_op.input_ids()) == {"question:c1/q0@1", "gold:c1/q0@1", "answer:c1/q0@1"}
    assert [(r.prediction, r.judge_score) for r in run.results] == [("Biscuit", 1), ("Paris", 0)]
    assert run.results[0].f1 == 1.0 and run.results[1].f1 == 0.0 and run.results[0].bleu1 > 0.9


def test_deterministic_judge_needs_no_judge_lm(conv):
    run = run_conversation("long_context", conv, lms={"task": task_lm()}, judge="deterministic")
    assert [r.judge_score for r in run.results] == [1, 0]
    assert run.graph.ops["answer:c1/q1/eval.judge#0"].params == {"judge": "deterministic"}


def test_unparsable_judge_reply_is_a_failed_op_and_the_run_continues(conv):
    run = run_conversation("long_context", conv, lms=lms(judge=ScriptedLM(default="hmm, maybe")))
    failed = [o for o in run.graph.ops.values() if o.status == "failed"]
    assert [o.name for o in failed] == ["eval.judge", "eval.judge"] and failed[0].raw == "hmm, maybe"
    assert [(r.judge_score, r.judge_label) for r in run.results] == [(0, "FAILED"), (0, "FAILED")]


def test_bad_settings_and_unknown_prompt_are_config_errors(conv):
    with pytest.raises(ConfigError, match=r"system\.settings\.chunk_size"):
        run_conversation("rag", conv, lms=lms(), settings={"chunk_size": 3})
    with pytest.raises(ConfigError, match="no prompt component 'fact_extraction'"):
        run_conversation("rag", conv, lms=lms(), prompts={"fact_extraction": "x"})


@pytest.mark.parametrize("system", ["long_context", "rag"])
def test_empty_conversation_and_empty_turns_and_question_before_ingestion(system):
    empty = make_conversation([], QAS[:1])
    roles = lms()
    run = run_conversation(system, empty, lms=roles, resources={"embedder": HashEmbedder()})
    assert run.graph.value("retrieved:c1/q0@1") == [] and len(run.results) == 1
    assert "(no memories)" in roles["task"].calls[0].prompt
    blank = make_conversation([[("A", ""), ("B", "")], []], QAS[:1])
    run = run_conversation(system, blank, lms=lms(), resources={"embedder": HashEmbedder()})
    assert len(run.results) == 1 and not [o for o in run.graph.ops.values() if o.status == "failed"]


def test_make_rerun_replays_exactly_for_free(conv):
    emb = HashEmbedder()
    run = run_conversation("rag", conv, lms=lms(), resources={"embedder": emb})
    again = lms()
    result = replay(run.graph, make_rerun("rag", conv, resources={"embedder": emb}), lms=again)
    assert result.graph.fingerprint() == run.graph.fingerprint()
    assert again["task"].n_calls == 0 and again["judge"].n_calls == 0


def test_rerun_for_reads_the_run_from_graph_meta(conv):
    from memtrace_opt.graph import Overrides

    emb = HashEmbedder()
    run = run_conversation("rag", conv, [conv.qa[1]], lms=lms(), settings={"top_k": 1}, judge="deterministic",
                           resources={"embedder": emb})
    roles = lms()
    res = replay(run.graph, rerun_for(run.graph, conv, resources={"embedder": emb}), lms=roles,
                 overrides=Overrides(prompts={"question_answering": "Answer: Leeds"}))
    assert roles["task"].n_calls == 1 and res.graph.meta["settings"]["top_k"] == 1
    assert [r.qa_id for r in results_from_graph(res.graph, "c1", [conv.qa[1]])] == ["c1/q1"]
    other = make_conversation(SESSIONS, QAS, conv_id="c9")
    with pytest.raises(GraphError, match="conversation 'c1', not 'c9'"):
        rerun_for(run.graph, other)


# -- evaluation and run dir ---------------------------------------------------------------------
def test_evaluate_system_writes_run_dir_and_resumes(tmp_path):
    convs = [make_conversation(SESSIONS, QAS, conv_id=c) for c in ("c1", "c/2")]
    first = lms()
    ev = evaluate_system("long_context", convs, lms=first, run_dir=tmp_path, judge="llm", dataset="unit",
                         run_id="r", progress=False)
    assert sorted(p.name for p in rd.list_graphs(tmp_path)) == ["c1.jsonl.gz", rd.graph_path(tmp_path, "c/2").name]
    assert rd.graph_path(tmp_path, "c/2").name.startswith("c_2-")  # escaped ids get a hash: c_2 stays free
    assert rd.read_graph(tmp_path, "c/2").meta["conversation_id"] == "c/2"
    assert [r.qa_id for r in rd.read_results(tmp_path)] == ["c1/q0", "c1/q1", "c/2/q0", "c/2/q1"]
    summary = rd.read_summary(tmp_path)
    assert summary["n"] == 4 and summary["accuracy"] == 0.5 and summary["per_category"]["single-hop"]["n"] == 4
    assert summary["lm_usage"]["lm_calls"] == 8 and summary["failed_ops_total"] == 0
    assert rd.read_usage(tmp_path)["by_op"]["qa.answer"]["lm_calls"] == 4
    assert ev.summary == summary and rd.done_conversations(tmp_path) == ["c1", "c/2"]
    second = lms()
    ev2 = evaluate_system("long_context", convs, lms=second, run_dir=tmp_path, progress=False)
    assert second["task"].n_calls == 0 and ev2.resumed == ["c1", "c/2"]
    assert [r.to_dict() for r in ev2.results] == [r.to_dict() for r in ev.results]
    assert ev2.summary["lm_usage"] == summary["lm_usage"]


def test_run_dir_json_helpers(tmp_path):
    rd.write_summary(tmp_path, {"accuracy": np.float64(0.5).item()})
    assert rd.read_summary(tmp_path) == {"accuracy": 0.5}
    assert rd.done_conversations(tmp_path) == []
    (tmp_path / "usage.json").write_text("{broken")
    with pytest.raises(Exception, match="usage.json.*not valid JSON"):
        rd.read_usage(tmp_path)
    assert json.loads((tmp_path / "summary.json").read_text())["accuracy"] == 0.5
