"""``memtrace-opt trace follow`` / ``trace unit``: where a turn's content went, forward (interop/trace_follow.py)."""

from __future__ import annotations

import pytest

from memtrace_opt.cli import main
from memtrace_opt.errors import GraphError
from memtrace_opt.graph import Overrides, replay
from memtrace_opt.graph.io_json import save_json
from memtrace_opt.interop.trace_follow import render_follow, render_unit, resolve_variable
from tests.test_attribution_system import ScriptLM, record_tt, rerun_tt


@pytest.fixture(scope="module")
def recorded():
    return record_tt()[0]


def test_a_stored_then_deleted_turn_is_followed_to_its_unit_and_deletion(recorded):
    lines = render_follow(recorded, resolve_variable(recorded, "D3:1"))
    text = "\n".join(lines)
    path = [line.split()[1] for line in lines if line.startswith("  ● ")]
    assert path[:3] == ["ingest:s3/tt.extract#0", "ingest:s3/tt.decide#0", "ingest:s3/tt.write#0"]
    assert "ingest:s3/tt.delete#0" in path  # the deletion carries it on (to its end)
    assert "reached no memory unit" not in text
    assert "mem:5@1" in text and "(deleted)" in text


def test_a_turn_the_extraction_dropped_says_where_its_content_stopped(recorded):
    graph = replay(recorded, rerun_tt(), overrides=Overrides(op_outputs={"ingest:s1/tt.extract#2": {"facts": []}}),
                   lms={"task": ScriptLM(), "judge": ScriptLM()}).graph
    text = "\n".join(render_follow(graph, resolve_variable(graph, "D1:3")))
    assert "(no op carried it on)" in text
    assert "it reached no memory unit: read, and not carried on, by tt.extract ×1 (first ingest:s1/tt.extract#2)" in text
    assert "memory units downstream: 0" in text


def test_a_later_merge_keeps_the_content_and_the_contexts_that_carry_it_name_their_question(recorded):
    lines = render_follow(recorded, resolve_variable(recorded, "D1:2"))  # Leeds, merged in session 2
    text = "\n".join(lines)
    assert "ingest:s2/tt.write#0" in text and "mem:2@2" in text
    assert "(question q1)" in text


def test_unit_lifetime_lists_every_version_with_its_maker(recorded):
    lines = render_unit(recorded, "mem:5")
    assert lines[0] == "unit mem:5"
    assert [line.split()[1] for line in lines[1:]] == ["created", "deleted"]
    assert "by ingest:s3/tt.delete#0" in lines[2]


def test_an_unknown_variable_is_a_one_line_error_naming_it(recorded, tmp_path, capsys):
    with pytest.raises(GraphError, match="'message:D9:1' is not a variable"):
        resolve_variable(recorded, "D9:1")
    save_json(recorded, tmp_path / "graphs" / "c1.jsonl.gz")
    assert main(["trace", "follow", str(tmp_path), "D9:1", "-c", "c1"]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
    assert main(["trace", "follow", str(tmp_path), "D1:1", "-c", "c1"]) == 0
    assert "follow message:D1:1@1" in capsys.readouterr().out
    assert main(["trace", "unit", str(tmp_path), "mem:1", "-c", "c1"]) == 0
    assert capsys.readouterr().out.startswith("unit mem:1\n")


def test_a_turn_is_identified_by_its_own_words_not_by_names_or_caption_words():
    from types import SimpleNamespace

    from memtrace_opt.interop.trace_follow import turn_words

    graph = SimpleNamespace(meta={"speakers": ["James", "John"]})
    turn = {"speaker": "John", "text": "James, look at Max! [shares a photo of a beagle in the snow]"}
    words = turn_words(graph, turn)  # type: ignore[arg-type]
    assert {"max", "beagl", "snow"} <= words
    assert not words & {"jame", "john", "share", "photo"}  # "John shared a photo of ..." says nothing of this turn
