"""Graph files: exact JSON Lines / SQLite round-trips, tagged values, and clear errors on bad files."""

from __future__ import annotations

import gzip
import json
import sqlite3

import numpy as np
import pytest

from memtrace_opt.errors import GraphError
from memtrace_opt.graph import (
    MemoryGraph, New, Tracer, Variable, list_graphs, load_graph, load_json, operation, save_graph, save_json, validate,
)
from memtrace_opt.graph.io_sqlite import delete_graph
from tests.toy_system import PROMPTS, PromptEchoLM, run_toy


@operation("io.odd", category="intermediate")
def _odd(ctx, inputs, params):
    return {"out": params["value"]}


def toy(**meta) -> MemoryGraph:
    tracer = Tracer(MemoryGraph({"prompts": PROMPTS, **meta}), lm=PromptEchoLM(), prompts=PROMPTS)
    run_toy(tracer, [["alice likes tea", "bob lives in paris"], ["bob moved to rome"]], ["what does alice like"],
            delete_word="rome")
    return tracer.graph


def same(a: MemoryGraph, b: MemoryGraph) -> bool:
    return (a.fingerprint() == b.fingerprint() and list(a.variables.values()) == list(b.variables.values())
            and list(a.ops.values()) == list(b.ops.values()) and a.sessions == b.sessions and a.meta == b.meta)


@pytest.mark.parametrize("name", ["g.jsonl", "g.jsonl.gz"])
def test_json_round_trip_exact(tmp_path, name):
    g = toy(run_id="r1", tags=("a", "b"), counts={1: "one"})
    path = save_json(g, tmp_path / "sub" / name)
    back = load_json(path)
    assert same(g, back)
    validate(back)
    assert back.meta["tags"] == ("a", "b") and back.meta["counts"] == {1: "one"}
    if name.endswith(".gz"):
        assert path.read_bytes()[:2] == b"\x1f\x8b"
    assert not list(tmp_path.glob("sub/*.part*"))


def test_odd_values_survive_via_tags(tmp_path):
    tracer = Tracer()
    values = [(1, 2), {3: "x"}, {"__t__": "not a tag"}, b"\x00\xff", float("nan"), frozenset({"a"}),
              np.arange(6, dtype=np.float32).reshape(2, 3), np.int64(7)]
    with tracer.session("s", kind="ingest"):
        for i, v in enumerate(values):
            tracer.call("io.odd", inputs={}, params={"value": v}, outputs={"out": New(f"v{i}", "x")})
    back = load_json(save_json(tracer.graph, tmp_path / "odd.jsonl"))
    got = [back.value(f"v{i}@1") for i in range(len(values))]
    assert got[:4] == values[:4] and got[5] == values[5] and type(got[0]) is tuple
    assert got[4] != got[4]  # nan
    assert got[6].dtype == np.float32 and got[6].shape == (2, 3) and (got[6] == values[6]).all()
    assert got[7] == 7 and type(got[7]) is np.int64
    assert back.ops["s/io.odd#0"].params == {"value": (1, 2)}


def test_unstorable_value_rejected_at_save_naming_the_variable(tmp_path):
    g = MemoryGraph()

    g.add_variable(Variable("weird", 1, "x", object(), 1))
    with pytest.raises(GraphError, match=r"variable 'weird@1': cannot store a builtins.object value"):
        save_json(g, tmp_path / "w.jsonl")
    assert not (tmp_path / "w.jsonl").exists() and not list(tmp_path.iterdir())


def test_truncated_json_names_path_and_line(tmp_path):
    path = save_json(toy(), tmp_path / "g.jsonl")
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:5]) + lines[5][: len(lines[5]) // 2])
    with pytest.raises(GraphError, match=rf"{path}: line 6: corrupt record"):
        load_json(path)
    path.write_text("".join(lines[:7]))  # cut at a line boundary
    with pytest.raises(GraphError, match=rf"{path}: truncated after line 7: header promises {len(lines) - 1} records, found 6"):
        load_json(path)


def test_truncated_gzip_names_path_and_line(tmp_path):
    path = save_json(toy(), tmp_path / "g.jsonl.gz")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(GraphError, match=rf"{path}: line \d+: (truncated or corrupt file|corrupt record)"):
        load_json(path)
    path.write_bytes(b"\x1f\x8bnot gzip at all")
    with pytest.raises(GraphError, match=rf"{path}: line 1: truncated or corrupt file"):
        load_json(path)


def test_corrupt_records_name_the_line(tmp_path):
    path = save_json(toy(), tmp_path / "g.jsonl")
    lines = path.read_text().splitlines()
    bad = json.loads(lines[-1])
    bad["inputs"] = {"x": ["ghost@1"]}
    path.write_text("\n".join(lines[:-1] + [json.dumps(bad)]) + "\n")
    with pytest.raises(GraphError, match=rf"line {len(lines)}: operation .* reads unknown variable 'ghost@1'"):
        load_json(path)
    del bad["inputs"]
    path.write_text("\n".join(lines[:-1] + [json.dumps(bad)]) + "\n")
    with pytest.raises(GraphError, match=rf"line {len(lines)}: malformed record \(KeyError: 'inputs'\)"):
        load_json(path)


def test_wrong_header_and_missing_file(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"format": "other"}\n')
    with pytest.raises(GraphError, match="line 1: not a memtrace-graph file"):
        load_json(path)
    path.write_text("")
    with pytest.raises(GraphError, match="line 1: empty file"):
        load_json(path)
    with pytest.raises(GraphError, match="no such graph file"):
        load_json(tmp_path / "missing.jsonl.gz")


def test_sqlite_holds_many_graphs_and_replaces(tmp_path):
    db = tmp_path / "run" / "graphs.sqlite"
    g1, g2 = toy(conv="a"), toy(conv="b")
    save_graph(db, "conv-b", g2)
    save_graph(db, "conv-a", g1)
    assert list_graphs(db) == ["conv-a", "conv-b"]
    assert same(load_graph(db, "conv-a"), g1) and same(load_graph(db, "conv-b"), g2)
    small = MemoryGraph({"conv": "a2"})
    save_graph(db, "conv-a", small)
    back = load_graph(db, "conv-a")
    assert len(back.variables) == 0 and back.meta == {"conv": "a2"}
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT COUNT(*) FROM variables WHERE graph_id='conv-a'").fetchone()[0] == 0
    assert delete_graph(db, "conv-b") and list_graphs(db) == ["conv-a"]


def test_sqlite_errors(tmp_path):
    db = tmp_path / "graphs.sqlite"
    with pytest.raises(GraphError, match="no such graph database"):
        load_graph(db, "x")
    save_graph(db, "conv-a", toy())
    with pytest.raises(GraphError, match=r"no graph 'nope' \(stored: conv-a\)"):
        load_graph(db, "nope")
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE ops SET record = '{broken' WHERE graph_id = 'conv-a' AND seq = 2")
    with pytest.raises(GraphError, match=r"graph 'conv-a': ops row 2: malformed record"):
        load_graph(db, "conv-a")
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(GraphError, match="not a usable graph database"):
        list_graphs(junk)


def test_gzip_file_is_streamed_line_by_line(tmp_path):
    path = save_json(toy(), tmp_path / "g.jsonl.gz")
    with gzip.open(path, "rt") as f:
        header = json.loads(f.readline())
        records = [json.loads(line) for line in f]
    assert header["format"] == "memtrace-graph" and sum(header["counts"].values()) == len(records)
    assert [r["k"] for r in records] == sorted((r["k"] for r in records), key="svo".index)


def test_sqlite_failed_save_keeps_previous_graph(tmp_path):
    db = tmp_path / "graphs.sqlite"
    g = toy()
    save_graph(db, "conv-a", g)
    bad = toy()
    bad.add_variable(Variable("weird", 1, "x", object(), 10**6))
    with pytest.raises(GraphError, match=r"variable 'weird@1': cannot store"):
        save_graph(db, "conv-a", bad)
    assert same(load_graph(db, "conv-a"), g)


def test_reused_prompt_tokens_round_trip_and_old_call_records_still_load(tmp_path):
    import dataclasses

    from memtrace_opt.graph.model import LMCall

    g = toy()
    op = next(o for o in g.ops.values() if o.lm_calls)
    g.ops[op.id] = dataclasses.replace(op, lm_calls=(dataclasses.replace(op.lm_calls[0], reused_prompt_tokens=5),))
    back = load_json(save_json(g, tmp_path / "g.jsonl"))
    assert back.ops[op.id].lm_calls[0].reused_prompt_tokens == 5
    other = next(o for o in back.ops.values() if o.lm_calls and o.id != op.id)
    assert other.lm_calls[0].reused_prompt_tokens == 0  # written in the old six-field shape, read back as 0
    assert LMCall(*["m", 1, 2, 0.5, False, "stop"]).reused_prompt_tokens == 0
