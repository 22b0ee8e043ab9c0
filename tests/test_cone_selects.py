"""The upstream cone through searches: only the items a search (or a rerank) kept reach the answer.

Hand-built graphs pin the walk's rules; a scripted EverMemOS run checks them on a real system's
graph and counts the extraction calls a scoped replay makes against a full one.
"""

from __future__ import annotations

import pytest

from memtrace_opt.data import load_dataset
from memtrace_opt.graph import MemoryGraph, Operation, Overrides, Variable, operation, replay, upstream_cone
from memtrace_opt.graph.cone import item_ids
from memtrace_opt.systems import evermemos_prompts as P
from memtrace_opt.systems.runner import make_rerun, run_conversation
from tests.test_evermemos import scripted_lm


@operation("conetest.search", category="retrieval", selects={"units": "id", "index": "id"})
def _search(ctx, inputs, params):  # pragma: no cover - the graphs below are built by hand
    return {}


@operation("conetest.rerank", category="retrieval", selects={"candidates": "id"})
def _rerank(ctx, inputs, params):  # pragma: no cover
    return {}


def _graph(*, search: str = "conetest.search", rerank: bool = False) -> MemoryGraph:
    """Three units u1..u3 extracted from three messages, an index over them, a search keeping u2
    and u3 (and, with ``rerank``, a rerank keeping only u3), then the answer."""
    g = MemoryGraph()
    clock = iter(range(1, 1000))

    def var(name: str, category: str, value, version: int = 1) -> str:
        g.add_variable(Variable(name, version, category, value, next(clock)))
        return f"{name}@{version}"

    def op(op_id: str, name: str, category: str, inputs: dict, outputs: dict) -> None:
        """Add the op after its outputs (``{role: (name, category, value, version)}``); return their ids."""
        made = {role: var(*spec) for role, spec in outputs.items()}
        g.add_operation(Operation(op_id, name, category, {k: tuple(v) for k, v in inputs.items()}, made,
                                  next(clock)))
        return made

    index: list[str] = []
    units = []
    for i in (1, 2, 3):
        msg = var(f"message:{i}", "message", {"text": f"turn {i}"})
        units.append(op(f"x{i}", "conetest.extract", "extraction", {"message": [msg]},
                        {"unit": (f"unit:{i}", "memory-unit", {"id": f"u{i}", "text": f"fact {i}"})})["unit"])
        index = [op(f"ix{i}", "conetest.index", "embedding", {"unit": [units[-1]], "index": index},
                    {"index": ("index", "index", {"size": i}, i)})["index"]]
    question = var("question:q", "question", "what?")
    context = op("s", search, "retrieval", {"query": [question], "units": units, "index": index},
                 {"candidates": ("candidates:q", "intermediate",
                                 [{"id": "u2", "text": "fact 2"}, {"id": "u3", "text": "fact 3"}])})["candidates"]
    if rerank:
        context = op("r", "conetest.rerank", "retrieval", {"query": [question], "candidates": [context]},
                     {"context": ("retrieved:q", "retrieved-context", [{"id": "u3", "text": "fact 3"}])})["context"]
    op("a", "conetest.answer", "qa", {"context": [context], "question": [question]},
       {"answer": ("answer:q", "answer", "fact")})
    return g


def test_item_ids_reads_one_record_or_a_list_and_ignores_the_rest():
    assert item_ids({"id": "u1"}, "id") == {"u1"}
    assert item_ids([{"id": "u1"}, {"id": 2}, {"text": "no id"}, "plain"], "id") == {"u1", "2"}
    assert item_ids({"size": 3}, "id") == set() and item_ids(None, "id") == set()


def test_a_search_is_followed_only_into_the_units_it_kept():
    cone = upstream_cone(_graph(), ["q"])
    assert {"x2", "x3", "s", "a"} <= cone
    assert not {"x1", "ix1", "ix2", "ix3"} & cone  # unit 1 was ranked but not kept; the index holds no unit


def test_a_chain_of_selections_keeps_only_what_the_last_one_kept():
    cone = upstream_cone(_graph(rerank=True), ["q"])
    assert {"x3", "s", "r", "a"} <= cone
    assert not {"x1", "x2"} & cone  # the search kept u2, the rerank dropped it


def test_an_op_that_declares_no_selection_is_followed_through_every_input():
    cone = upstream_cone(_graph(search="conetest.unregistered_search"), ["q"])
    assert {"x1", "x2", "x3", "ix1", "ix2", "ix3"} <= cone


@operation("conetest.check", category="retrieval", reads_first={"candidates": ("id", "shown")})
def _check(ctx, inputs, params):  # pragma: no cover
    return {}


def _checked_graph(shown) -> MemoryGraph:
    """A search keeping u1..u3 in rank order u1, u2, u3; a check shown the top ``shown`` of them
    (None: no count recorded); a rerank keeping u3; the answer reads the check's verdict and the rerank."""
    g = MemoryGraph()
    clock = iter(range(1, 1000))

    def var(name, value, category="intermediate"):
        g.add_variable(Variable(name, 1, category, value, next(clock)))
        return f"{name}@1"

    def op(op_id, name, inputs, role, out_name, value, params=None):
        out = var(out_name, value)
        g.add_operation(Operation(op_id, name, "retrieval", {k: tuple(v) for k, v in inputs.items()}, {role: out},
                                  next(clock), params=params or {}))
        return out

    units = [op(f"x{i}", "conetest.extract", {"message": [var(f"message:{i}", f"turn {i}", "message")]}, "unit",
                f"unit:{i}", {"id": f"u{i}", "text": f"fact {i}"}) for i in (1, 2, 3)]
    question = var("question:q", "what?", "question")
    ranked = [{"id": f"u{i}", "text": f"fact {i}"} for i in (1, 2, 3)]
    cands = op("s", "conetest.search", {"query": [question], "units": units}, "candidates", "candidates:q", ranked)
    verdict = op("c", "conetest.check", {"query": [question], "candidates": [cands]}, "verdict", "verdict:q",
                 {"sufficient": False}, params={} if shown is None else {"shown": shown})
    context = op("r", "conetest.rerank", {"candidates": [cands]}, "context", "retrieved:q", [ranked[2]])
    op("a", "conetest.answer", {"context": [context], "verdict": [verdict]}, "answer", "answer:q", "fact")
    return g


def test_an_op_that_reads_the_top_of_a_list_is_followed_only_into_what_it_read():
    cone = upstream_cone(_checked_graph(1), ["q"])
    assert {"x1", "x3", "c", "r", "s"} <= cone  # u1: shown to the check; u3: kept by the rerank
    assert "x2" not in cone  # ranked second: neither shown to the check nor kept
    assert {"x1", "x2", "x3"} <= upstream_cone(_checked_graph(2), ["q"])
    assert {"x1", "x2", "x3"} <= upstream_cone(_checked_graph(None), ["q"])  # no count recorded: all of it


# -- EverMemOS, scripted ------------------------------------------------------------------------------
SETTINGS = {"boundary_check_every": 2, "agentic": False, "top_k": 1}
EXTRACTION = "memory record of a conversation segment"


@pytest.fixture(scope="module")
def recorded():
    conv = load_dataset("mini").conversations[0]
    result = run_conversation("evermemos", conv, lms={"task": scripted_lm()}, judge="deterministic",
                              settings=SETTINGS)
    return conv, result.graph


def test_an_evermemos_question_cone_holds_only_the_extraction_of_its_retrieved_cell(recorded):
    conv, graph = recorded
    qa = conv.scored_qa()[0]
    extractions = {o.id for o in graph.ops.values() if o.name == "evermemos.extract_memory"}
    kept = {r["cell"] for r in graph.value(graph.latest_id(f"retrieved:{qa.id}"))}
    cone = upstream_cone(graph, [qa.id])
    assert len(extractions) >= 4 and len(kept) == 1
    assert {op for op in cone if op in extractions} == {graph.producer[f"{c}@1"] for c in kept}


def test_a_scoped_replay_of_a_changed_extraction_prompt_reextracts_only_the_cone(recorded):
    conv, graph = recorded
    qas = conv.scored_qa()[:2]
    changed = Overrides(prompts={"memcell_extraction": P.DEFAULT_PROMPTS["memcell_extraction"] + "\nBe brief."})
    rerun = make_rerun("evermemos", conv, qas, settings=SETTINGS, judge="deterministic")
    full_lm, scoped_lm = scripted_lm(), scripted_lm()
    full = replay(graph, rerun, overrides=changed, lm=full_lm)
    scoped = replay(graph, rerun, overrides=changed, lm=scoped_lm, scope=[q.id for q in qas])
    n_cells = len([o for o in graph.ops.values() if o.name == "evermemos.extract_memory"])
    cone_cells = {c for q in qas for c in (r["cell"] for r in graph.value(graph.latest_id(f"retrieved:{q.id}")))}
    assert len(full_lm.calls_matching(EXTRACTION)) == n_cells
    assert len(scoped_lm.calls_matching(EXTRACTION)) == len(cone_cells) < n_cells
    for q in qas:  # the scripted extraction ignores the added line, so both replays answer alike
        name = f"answer:{q.id}"
        assert scoped.graph.value(scoped.graph.latest_id(name)) == full.graph.value(full.graph.latest_id(name))


def test_an_agentic_evermemos_cone_holds_the_kept_cells_and_the_top_ones_the_checks_read():
    conv = load_dataset("mini").conversations[0]
    settings = {"boundary_check_every": 2, "agentic": True, "top_k": 1, "check_k": 1}
    graph = run_conversation("evermemos", conv, lms={"task": scripted_lm()}, judge="deterministic",
                             settings=settings).graph
    qa = next(q for q in conv.scored_qa() if "guitar" in q.question)  # the scripted check says "insufficient"
    assert f"queries:{qa.id}" in graph.latest  # the rewrite ran: both checks are in the cone
    extractions = {o.id for o in graph.ops.values() if o.name == "evermemos.extract_memory"}
    kept = {r["cell"] for r in graph.value(graph.latest_id(f"retrieved:{qa.id}"))}
    shown = {r["cell"] for r in graph.value(graph.latest_id(f"candidates:{qa.id}:r1"))[:1]}
    cone = upstream_cone(graph, [qa.id])
    assert {op for op in cone if op in extractions} == {graph.producer[f"{c}@1"] for c in kept | shown}
    assert len(kept | shown) < len(extractions)
