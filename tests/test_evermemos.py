"""EverMemOS as a traced system: ops, lineage, segmentation, agentic rounds, failures, replay.

A scripted LM answers each prompt component by regex; retrieval uses the real MiniLM embedder
(it loads in a few seconds and is shared by the whole module).
"""

from __future__ import annotations

import json
import re

import networkx as nx
import pytest

from memtrace_opt.data import load_dataset
from memtrace_opt.errors import ConfigError
from memtrace_opt.graph import Overrides, replay
from memtrace_opt.graph.model import BOUNDARY, BUFFER, EMBEDDING, EXTRACTION, MEMORY_UNIT, QA, RETRIEVAL
from memtrace_opt.systems import evermemos_prompts as P
from memtrace_opt.systems.evermemos import EverMemOS
from memtrace_opt.systems.registry import get_system
from memtrace_opt.systems.resolve import resolve_settings
from memtrace_opt.systems.runner import make_rerun, run_conversation
from tests.scripted_lm import HashEmbedder, ScriptedLM, prompt_text

SETTINGS = {"boundary_check_every": 2}
MULTI_HOP = "mini-1/q2"  # "Where is the person who gave Tom his guitar moving to?"


def _newest(messages: list[dict[str, str]]) -> str:
    return messages[-1]["content"].split("Newest messages:", 1)[1]


def _segment(messages: list[dict[str, str]]) -> str:
    return messages[-1]["content"].split("Segment:\n", 1)[1]


def scripted_lm(*, fail_extraction_on: str | None = None, boundary_reply: str | None = None) -> ScriptedLM:
    """Boundary before "Did you buy one?" (D1:5); round 1 insufficient only for the guitar question."""

    def boundary(ms, _m):
        if boundary_reply is not None:
            return boundary_reply
        return json.dumps({"boundary": "Did you buy one" in _newest(ms), "reason": "topic shift"})

    def extract(ms, _m):
        seg = _segment(ms)
        if fail_extraction_on and fail_extraction_on in seg:
            return "Sorry, I can't help with that."
        lines = seg.splitlines()
        return json.dumps({"episode": " ".join(lines), "facts": lines[:2],
                           "foresight": [{"text": "visit", "valid_until": None}]})

    def sufficient(ms, _m):
        question = re.search(r"Question: (.*)", prompt_text(ms))[1]
        return json.dumps({"sufficient": "guitar" not in question, "missing": "who gave the guitar"})

    def answer(ms, _m):
        return "Biscuit" if "called Biscuit" in prompt_text(ms) else "Not mentioned."

    return ScriptedLM([
        (r"split a conversation into episodes", boundary),
        (r"memory record of a conversation segment", extract),
        (r"enough to answer a question", sufficient),
        (r"short search queries", '{"queries": ["Tom sister Ada", "Ada moving abroad"]}'),
        (r"You answer questions", answer),
    ])


@pytest.fixture(scope="module")
def conv():
    return load_dataset("mini").conversations[0]


def run(conv, lm=None, settings=SETTINGS):
    lm = lm or scripted_lm()
    return run_conversation("evermemos", conv, lms={"task": lm}, judge="deterministic", settings=settings), lm


@pytest.fixture(scope="module")
def recorded(conv):
    return run(conv)


def ops_named(graph, name):
    return [o for o in graph.ops.values() if o.name == name]


def test_registered_with_its_prompt_components():
    assert get_system("evermemos") is EverMemOS
    assert set(EverMemOS.prompts()) == {"boundary_detection", "memcell_extraction", "sufficiency_check",
                                        "query_rewrite", "question_answering"}


def test_op_categories_and_prompts(recorded):
    graph = recorded[0].graph
    expected = {
        "evermemos.buffer_update": (BUFFER, None), "evermemos.boundary_detection": (BOUNDARY, "boundary_detection"),
        "evermemos.finalize_memory_unit": (BUFFER, None),
        "evermemos.extract_memory": (EXTRACTION, "memcell_extraction"),
        "evermemos.index": (EMBEDDING, None), "evermemos.hybrid_retrieval": (RETRIEVAL, None),
        "evermemos.sufficiency_check": (RETRIEVAL, "sufficiency_check"),
        "evermemos.query_rewrite": (RETRIEVAL, "query_rewrite"),
        "evermemos.multi_query_retrieval": (RETRIEVAL, None), "evermemos.final_rerank": (RETRIEVAL, None),
        "qa.answer": (QA, "question_answering"),
    }
    for name, (category, component) in expected.items():
        ops = ops_named(graph, name)
        assert ops, name
        assert {o.category for o in ops} == {category}, name
        assert {o.prompt.component if o.prompt else None for o in ops} == {component}, name
    assert all(v.category == MEMORY_UNIT for v in graph.variables.values() if v.name.startswith("mem:cell"))


def test_every_json_call_is_schema_constrained_and_bounded(recorded):
    _, lm = recorded
    json_calls = [c for c in lm.calls if not c.prompt.startswith("You answer questions")]
    assert json_calls and all(c.kwargs.get("json_schema") for c in json_calls)
    assert all(0 < c.kwargs["max_tokens"] <= 512 for c in lm.calls)


def test_lineage_answer_to_messages(recorded):
    graph = recorded[0].graph
    ancestors = nx.ancestors(graph.nx, "answer:mini-1/q0@1")
    assert "retrieved:mini-1/q0@1" in ancestors
    cell = next(r["cell"] for r in graph.value("retrieved:mini-1/q0@1") if "D1:1" in r["turn_ids"])
    assert f"{cell}@1" in ancestors
    segment = graph.ops[graph.producer[f"{cell}@1"]].inputs["segment"][0]
    assert segment in ancestors
    assert "message:D1:1@1" in nx.ancestors(graph.nx, segment)
    assert "message:D1:1@1" in ancestors


def test_boundary_decision_splits_segments(recorded):
    graph = recorded[0].graph
    assert graph.value("boundary:D1:4@1")["boundary"] is False
    assert graph.value("boundary:D1:6@1") == {"boundary": True, "reason": "topic shift", "split": 4}
    assert graph.value("segment:1@1")["turn_ids"] == ["D1:1", "D1:2", "D1:3", "D1:4"]
    assert graph.value("segment:2@1")["turn_ids"] == ["D1:5", "D1:6", "D1:7", "D1:8"]  # session end closes
    assert graph.value("boundary:D1:8@1")["reason"].startswith("forced")
    assert [graph.value(f"mem:cell{n}@1")["turn_ids"][0] for n in (1, 2, 3, 4)] == ["D1:1", "D1:5", "D2:1", "D3:1"]
    assert graph.value(graph.latest_id("index:evermemos"))["size"] == 4


def test_forced_closes_ask_no_llm(recorded):
    graph = recorded[0].graph
    forced = [o for o in ops_named(graph, "evermemos.boundary_detection") if o.params["force"]]
    asked = [o for o in ops_named(graph, "evermemos.boundary_detection") if not o.params["force"]]
    assert len(forced) == 3 and all(not o.lm_calls for o in forced)
    assert len(asked) == 6 and all(len(o.lm_calls) == 1 for o in asked)


def test_round_two_only_when_round_one_insufficient(recorded):
    graph = recorded[0].graph
    by_session = {}
    for op in graph.ops.values():
        by_session.setdefault(op.session, []).append(op.name)
    assert "evermemos.query_rewrite" in by_session[f"answer:{MULTI_HOP}"]
    assert "evermemos.multi_query_retrieval" in by_session[f"answer:{MULTI_HOP}"]
    assert graph.value(f"queries:{MULTI_HOP}@1") == ["Tom sister Ada", "Ada moving abroad"]
    rerank = graph.ops[graph.producer[f"retrieved:{MULTI_HOP}@1"]]
    assert rerank.inputs["candidates"] == (f"candidates:{MULTI_HOP}:r2@1",)
    for qa_id in ("mini-1/q0", "mini-1/q3"):
        names = by_session[f"answer:{qa_id}"]
        assert "evermemos.sufficiency_check" in names
        assert "evermemos.query_rewrite" not in names and "evermemos.multi_query_retrieval" not in names


def test_retrieval_finds_the_evidence_cell(recorded):
    graph = recorded[0].graph
    context = graph.value("retrieved:mini-1/q0@1")
    assert len(context) == 4  # every cell of this small conversation fits in top_k
    best = min(context, key=lambda r: r["rank"])
    assert "D1:1" in best["turn_ids"] and "Biscuit" in best["text"]
    assert recorded[0].results[0].prediction == "Biscuit"


def test_agentic_off_skips_both_rounds(conv):
    result, lm = run(conv, settings={**SETTINGS, "agentic": False, "top_k": 2})
    names = {o.name for o in result.graph.ops.values()}
    assert "evermemos.sufficiency_check" not in names and "evermemos.query_rewrite" not in names
    assert all(len(result.graph.value(f"retrieved:{q.id}@1")) == 2 for q in conv.scored_qa())
    assert not lm.calls_matching("enough to answer")


SHARED = {**SETTINGS, "question_layout": "shared_prefix"}


@pytest.fixture(scope="module")
def shared(conv):
    return run(conv, settings=SHARED)


def _question_calls(lm, question):
    return [c for c in lm.calls if c.messages[0]["content"].startswith("Memories:")
            and f"Question: {question}" in c.messages[0]["content"]]


def test_shared_prefix_ops_of_a_question_open_with_the_same_context_message(conv, shared):
    result, lm = shared
    for qa in conv.scored_qa():
        calls = _question_calls(lm, qa.question)
        kinds = [next(k for k, pat in (("check", "enough to answer"), ("rewrite", "short search queries"),
                                      ("answer", "You answer questions")) if re.search(pat, c.prompt)) for c in calls]
        assert kinds[0] == "check" and kinds[-1] == "answer", (qa.id, kinds)
        first = {c.messages[0]["content"] for c in calls[:-1]}
        assert len(first) == 1, qa.id  # the check and the rewrite send the same bytes first
        if "rewrite" not in kinds:  # sufficient: the answer reads the very context the check saw
            assert calls[-1].messages[0] == calls[0].messages[0], qa.id
        # the instruction comes after the context, never before it
        assert all(c.messages[0]["role"] == "system" and c.messages[-1]["role"] == "user" for c in calls)
    assert [r.prediction for r in result.results][0] == "Biscuit"


def test_shared_prefix_checks_the_reranked_context_and_round_two_versions_it(conv, shared):
    graph = shared[0].graph
    check = next(o for o in ops_named(graph, "evermemos.sufficiency_check") if o.session == "answer:mini-1/q0")
    assert check.inputs["candidates"] == ("retrieved:mini-1/q0@1",)
    assert graph.ops[graph.producer["retrieved:mini-1/q0@1"]].name == "evermemos.final_rerank"
    answer = next(o for o in ops_named(graph, "qa.answer") if o.session == "answer:mini-1/q0")
    assert answer.inputs["context"] == ("retrieved:mini-1/q0@1",)
    # insufficient: round 2 fuses with the *ranked* round-1 list, and its rerank writes version 2
    multi = next(o for o in ops_named(graph, "evermemos.multi_query_retrieval") if o.session == f"answer:{MULTI_HOP}")
    assert multi.inputs["candidates"] == (f"candidates:{MULTI_HOP}:r1@1",)
    final = next(o for o in ops_named(graph, "qa.answer") if o.session == f"answer:{MULTI_HOP}")
    assert final.inputs["context"] == (f"retrieved:{MULTI_HOP}@2",)
    assert graph.ops[graph.producer[f"retrieved:{MULTI_HOP}@2"]].inputs["candidates"] == (f"candidates:{MULTI_HOP}:r2@1",)


def test_separate_layout_keeps_its_messages_and_params(recorded):
    graph, lm = recorded[0].graph, recorded[1]
    assert all("layout" not in o.params and "reason_chars" not in o.params for o in graph.ops.values())
    check = next(c for c in lm.calls if "enough to answer" in c.prompt)
    assert check.messages[0]["content"] == P.DEFAULT_PROMPTS[P.SUFFICIENCY]
    assert check.messages[1]["content"].startswith("Question: ")
    assert check.kwargs["json_schema"] == P.SUFFICIENCY_SCHEMA and check.kwargs["max_tokens"] == 96


def test_a_bare_verdict_is_a_boolean_under_a_short_budget(conv):
    result, lm = run(conv, settings={**SETTINGS, "verdict_reason_chars": 0})
    checks = [c for c in lm.calls if "enough to answer" in c.prompt]
    assert checks and all(c.kwargs["max_tokens"] == 16 for c in checks)
    assert all(set(c.kwargs["json_schema"]["properties"]) == {"sufficient"} for c in checks)
    # the scripted reply still carries a reason; the verdict keeps it, the rewrite is run as before
    assert result.graph.value(f"queries:{MULTI_HOP}@1") == ["Tom sister Ada", "Ada moving abroad"]


def test_unparsable_extraction_is_a_failed_op_with_a_fallback_cell(conv):
    result, _ = run(conv, scripted_lm(fail_extraction_on="greetings from Bristol"))
    graph = result.graph
    failed = [o for o in graph.ops.values() if o.status == "failed"]
    assert [o.name for o in failed] == ["evermemos.extract_memory"]
    op = failed[0]
    assert op.raw == "Sorry, I can't help with that." and "episode" in op.error
    cell = graph.value(op.outputs["cell"])
    assert cell["episode"].startswith("Tom: Hi Priya, greetings from Bristol!") and cell["facts"] == []
    assert len(result.results) == len(conv.scored_qa())  # the run went on to answer every question


def test_replay_reuses_failed_ops_too(conv):
    result, _ = run(conv, scripted_lm(fail_extraction_on="greetings from Bristol"))
    lm = scripted_lm(fail_extraction_on="greetings from Bristol")
    rerun = make_rerun("evermemos", conv, settings=SETTINGS, judge="deterministic")
    replayed = replay(result.graph, rerun, lm=lm)
    assert replayed.graph.fingerprint() == result.graph.fingerprint()
    assert lm.calls == []  # failed ops are memoized like the rest: a replay is free


def test_unparsable_boundary_means_no_boundary(conv):
    result, _ = run(conv, scripted_lm(boundary_reply="maybe?"))
    graph = result.graph
    failed = [o for o in graph.ops.values() if o.status == "failed"]
    assert failed and {o.name for o in failed} == {"evermemos.boundary_detection"}
    assert graph.value("boundary:D1:6@1") == {"boundary": False, "reason": "unparsable reply", "split": 0}
    assert graph.value("segment:1@1")["turn_ids"] == [f"D1:{t}" for t in range(1, 9)]


def test_long_segments_are_closed_without_asking(conv):
    lm = scripted_lm(boundary_reply='{"boundary": false, "reason": "same topic"}')
    result, _ = run(conv, lm, settings={"boundary_check_every": 1, "max_segment_turns": 3})
    graph = result.graph
    assert graph.value("segment:1@1")["turn_ids"] == ["D1:1", "D1:2", "D1:3"]
    assert graph.value("boundary:D1:3@1")["reason"] == "forced: segment too long"
    assert graph.value("segment:3@1")["turn_ids"] == ["D1:7", "D1:8"]


def test_replay_without_overrides_is_exact_and_free(conv, recorded):
    result, _ = recorded
    silent = ScriptedLM()  # any call would raise UnscriptedPrompt
    rerun = make_rerun("evermemos", conv, settings=SETTINGS, judge="deterministic")
    replayed = replay(result.graph, rerun, lm=silent)
    assert silent.n_calls == 0 and replayed.stats.lm_calls == 0
    assert replayed.graph.fingerprint() == result.graph.fingerprint()
    assert replayed.changed_answers == {}


def test_changed_qa_prompt_reruns_only_answers(conv, recorded):
    result, _ = recorded
    lm = scripted_lm()
    rerun = make_rerun("evermemos", conv, settings=SETTINGS, judge="deterministic")
    new_prompt = EverMemOS.prompts()["question_answering"] + "\nBe precise."
    replayed = replay(result.graph, rerun, lm=lm, overrides=Overrides(prompts={"question_answering": new_prompt}))
    assert lm.n_calls == len(conv.scored_qa())
    assert all(re.search("You answer questions", c.prompt) for c in lm.calls)  # zero ingestion LM calls
    with_lm = {o for o in replayed.stats.executed if replayed.graph.ops[o].lm_calls}
    assert with_lm == {f"answer:{q.id}/qa.answer#0" for q in conv.scored_qa()}


def test_changed_sufficiency_prompt_reruns_exactly_its_users(conv, recorded):
    result, _ = recorded
    lm = scripted_lm()
    rerun = make_rerun("evermemos", conv, settings=SETTINGS, judge="deterministic")
    new_prompt = P.DEFAULT_PROMPTS["sufficiency_check"] + "\nBe strict."
    replayed = replay(result.graph, rerun, lm=lm, overrides=Overrides(prompts={"sufficiency_check": new_prompt}))
    users = {o.id for o in ops_named(result.graph, "evermemos.sufficiency_check")}
    assert {o for o in replayed.stats.executed if "sufficiency" in o} == users
    assert lm.n_calls == len(users)  # same verdicts, so nothing downstream needed the LM
    assert replayed.graph.ops[next(iter(users))].prompt.sha != result.graph.ops[next(iter(users))].prompt.sha


def test_overriding_a_cell_changes_retrieval_downstream(conv, recorded):
    result, _ = recorded
    graph = result.graph
    op_id = graph.producer["mem:cell1@1"]
    cell = dict(graph.value("mem:cell1@1"), episode="Priya and Tom said hello.", facts=[])
    lm = scripted_lm()
    rerun = make_rerun("evermemos", conv, settings=SETTINGS, judge="deterministic")
    replayed = replay(graph, rerun, from_op=op_id, overrides=Overrides(op_outputs={op_id: {"cell": cell}}), lm=lm)
    assert replayed.graph.value("mem:cell1@1")["episode"] == "Priya and Tom said hello."
    assert replayed.changed_answers["answer:mini-1/q0"] == ("Biscuit", "Not mentioned.")
    assert not lm.calls_matching("memory record of a conversation segment")  # no re-extraction


def test_a_forced_boundary_decision_resegments(conv, recorded):
    result, _ = recorded
    op_id = result.graph.producer["boundary:D1:4@1"]
    lm = scripted_lm()
    rerun = make_rerun("evermemos", conv, settings=SETTINGS, judge="deterministic")
    over = Overrides(op_outputs={op_id: {"decision": {"boundary": True, "reason": "counterfactual"}}})
    replayed = replay(result.graph, rerun, from_op=op_id, overrides=over, lm=lm)
    assert replayed.graph.value("segment:1@1")["turn_ids"] == ["D1:1", "D1:2"]
    assert replayed.graph.value("segment:2@1")["turn_ids"] == ["D1:3", "D1:4"]
    assert lm.calls_matching("memory record of a conversation segment")  # new segments, new extractions


def test_embedder_comes_from_the_run_resources(conv):
    fake = HashEmbedder()
    result = run_conversation("evermemos", conv, lms={"task": scripted_lm()}, judge="deterministic",
                              settings=SETTINGS, resources={"embedder": fake})
    assert fake.calls > 0
    assert len(result.graph.value("retrieved:mini-1/q0@1")) == 4


def test_settings_are_validated():
    with pytest.raises(ConfigError, match="boundary_check_every"):
        resolve_settings(EverMemOS, {"boundary_check_every": 0})
    with pytest.raises(ConfigError, match="rerank"):
        resolve_settings(EverMemOS, {"rerank": True})
    assert resolve_settings(EverMemOS, {}).rrf_k == 60


# -- reply parsers ------------------------------------------------------------------------------
def test_parse_json_tolerates_fences_and_prose():
    assert P.parse_json('```json\n{"a": 1}\n```') == {"a": 1}
    assert P.parse_json('Sure! {"boundary": true, "reason": "x"} done') == {"boundary": True, "reason": "x"}
    assert P.parse_json("no json here") is None


def test_parse_boundary_and_sufficiency():
    assert P.parse_boundary('{"boundary": "yes", "reason": "new topic"}') == {"boundary": True, "reason": "new topic"}
    assert P.parse_boundary('{"reason": "x"}') is None
    verdict = P.parse_sufficiency('{"sufficient": false, "missing": ["a", "b"]}')
    assert verdict == {"sufficient": False, "missing": "a; b"}


def test_parse_queries_drops_duplicates_and_the_question():
    reply = '{"queries": ["Where does Tom live?", "Tom new city", "tom new city", "Tom job", "Tom flat"]}'
    assert P.parse_queries(reply, "Where does Tom live?") == ["Tom new city", "Tom job", "Tom flat"]
    assert P.parse_queries('["Ada Canada"]', "q") == ["Ada Canada"]
    assert P.parse_queries('{"queries": []}', "q") is None


def test_parse_memcell_normalises_items():
    reply = json.dumps({"episode": " Tom moved. ", "facts": ["Tom lives in Bristol", ""],
                        "foresight": ["dinner", {"text": "Ada moves", "valid_until": "2024-05-31"}]})
    assert P.parse_memcell(reply) == {
        "episode": "Tom moved.", "facts": ["Tom lives in Bristol"],
        "foresight": [{"text": "dinner", "valid_until": None}, {"text": "Ada moves", "valid_until": "2024-05-31"}],
    }
    assert P.parse_memcell('{"episode": "", "facts": []}') is None
