"""Question-slice layout: which nodes are drawn, where, and what stands for the rest."""

from __future__ import annotations

import pytest

from memtrace_opt.errors import GraphError
from memtrace_opt.graph.queries import question_slice
from memtrace_opt.report.graph_svg import slice_svg, timeline_svg
from memtrace_opt.report.layout import COLUMNS, column_of, layout_question, preview
from memtrace_opt.report.select import resolve_evidence
from memtrace_opt.report.slices import SliceIndex
from tests.test_report_support import CONV, record_toy_graph, synthetic_graph


@pytest.fixture(scope="module")
def toy():
    return record_toy_graph()


@pytest.fixture(scope="module")
def big():
    return synthetic_graph(1200, 6, versions=6)


def test_slice_index_matches_question_slice(toy) -> None:
    qa_ids = [f"{CONV}/q{i}" for i in range(4)]
    index = SliceIndex(toy, qa_ids, column_of)
    for qa in qa_ids:
        sliced = question_slice(toy, qa)
        assert index.nodes(qa) == set(sliced.variables) | set(sliced.ops)
    assert index.nodes("nope") == set() and not index.has("nope")


def test_small_slice_is_drawn_whole_left_to_right(toy) -> None:
    lay = layout_question(toy, f"{CONV}/q2", blamed_op="ingest:s2/toy.store#0", evidence=["D1:1"])
    assert lay.shown == lay.total and not any(n.kind == "more" for n in lay.nodes)
    x = {n.id: n.x for n in lay.nodes}
    assert x["message:D1:1@1"] < x["ingest:s1/toy.extract#0"] < x["fact:D1:1@1"] < x["mem:1@1"]
    assert x["mem:1@2"] < x[f"retrieved:{CONV}/q2@1"] < x[f"answer:{CONV}/q2@1"] < x[f"judgement:{CONV}/q2@1"]
    assert [t for t, _ in lay.columns] == list(COLUMNS)
    flags = {n.id: n.flags for n in lay.nodes}
    assert "blamed" in flags["ingest:s2/toy.store#0"] and "evidence" in flags["message:D1:1@1"]
    assert "wrong" in flags[f"answer:{CONV}/q2@1"]
    assert lay.units == ("mem:1",)
    assert {e.source for e in lay.edges if "version" in e.flags} == {"mem:1@1", "mem:3@1"}  # updated units


def test_versions_of_a_unit_stay_together_in_their_column(toy) -> None:
    lay = layout_question(toy, f"{CONV}/q0")
    units = [n for n in sorted(lay.nodes, key=lambda n: n.y) if n.category == "memory-unit"]
    names = [n.id.split("@")[0] for n in units]
    assert names == sorted(names, key=names.index)  # each name's versions are adjacent
    ys = [n.y for n in lay.nodes if n.column == lay.nodes[0].column]
    assert ys == sorted(ys)


def test_blamed_deletion_outside_the_slice_is_still_drawn(toy) -> None:
    # the deleted unit never reached the answer, so the deletion op is not an ancestor of it
    assert "ingest:s2/toy.delete#0" not in question_slice(toy, f"{CONV}/q1").ops
    lay = layout_question(toy, f"{CONV}/q1", blamed_op="ingest:s2/toy.delete#0", evidence=["D2:2"])
    ids = {n.id for n in lay.nodes}
    assert {"ingest:s2/toy.delete#0", "mem:2@3", "message:D2:2@1"} <= ids
    assert "deleted" in next(n for n in lay.nodes if n.id == "mem:2@3").flags


def test_big_slice_is_capped_with_more_nodes(big) -> None:
    lay = layout_question(big, "big/q2", blamed_op="ingest:s1/x.update#14", evidence=["D1:14"], max_nodes=24)
    real = [n for n in lay.nodes if n.kind != "more"]
    more = [n for n in lay.nodes if n.kind == "more"]
    assert lay.total > 2000 and len(real) == lay.shown <= 24 + 8  # the answer session is always drawn
    assert more and sum(int(n.label.split("+")[1].split()[0]) for n in more) == lay.total - lay.shown
    ids = {n.id for n in real}
    assert {"ingest:s1/x.update#14", "message:D1:14@1", "answer:big/q2@1", "judgement:big/q2@1"} <= ids
    assert all(e.source in ids | {m.id for m in more} and e.target in ids | {m.id for m in more} for e in lay.edges)
    assert any("collapsed" in e.flags for e in lay.edges)
    svg = slice_svg(lay, error_type="UpdateError")
    assert svg.count('<g class="node ') == len(lay.nodes)


def test_evidence_by_turn_name_or_id(toy) -> None:
    assert resolve_evidence(toy, ["D1:1", "message:D2:2", "fact:D1:1@1", "D9:9"]) == [
        "message:D1:1@1", "message:D2:2@1", "fact:D1:1@1"]


def test_unanswered_question_is_a_graph_error(toy) -> None:
    with pytest.raises(GraphError, match="no answer"):
        layout_question(toy, "conv-1/q99")


def test_long_unit_life_is_shortened_around_the_blamed_version(big) -> None:
    svg = timeline_svg(big, "mem:3", blamed_op="ingest:s1/x.update#603", max_events=5)
    assert "v1 created" in svg and "v6 updated" in svg and "more</text>" in svg
    assert "v4 updated" in svg  # made by the blamed op, kept although in the middle


def test_preview() -> None:
    assert preview({"speaker": "Ann", "text": "hi"}) == "Ann: hi"
    assert preview([]) == "(empty)" and preview(["a", "b"]) == "2 × a"
    assert preview({"score": 0, "label": "WRONG"}) == "WRONG"
    assert preview({"cell": "c1", "episode": "Tom moved"}) == "Tom moved"
