"""Import of smartcomment exports (MemTraceBench graph files) into memory graphs.

The fixture follows smartcomment 0.1.2's export (``ExecNetwork.model_dump``): top-level graph fields
and ``data`` with nodes, edges, operations, sessions; MemTraceBench adds ``data.annotations``.
"""

from __future__ import annotations

import json

import pytest

from memtrace_opt.errors import GraphError
from memtrace_opt.graph import lineage, unit_lifetime, validate
from memtrace_opt.interop.smartcomment import from_smartcomment, import_smartcomment

COMMON = {"filename": "mem.py", "lineno": 3, "graph_id": "graph-1", "user_id": None, "project_id": None, "metadata": {}}


def node(name, version, value, *, class_name=None, session="sess-1", at="2026-01-01 10:00:00.000", category="variable",
         comment=None):
    full = f"{class_name}:{name}" if class_name else name
    return {**COMMON, "created_at": at, "session_id": session, "name": name, "version": version, "value": value,
            "comment": comment, "category": category, "class_name": class_name, "full_name": full,
            "node_id": f"{name}@{version}", "full_node_id": f"{full}@{version}", "trigger_point": "mem.py:3"}


def op(op_id, name, category, at, session="sess-1", comment=None):
    return {**COMMON, "created_at": at, "session_id": session, "op_id": op_id, "op_name": name, "comment": comment,
            "category": category, "trigger_point": "mem.py:9"}


def edge(op_id, src, dst, category="operation", at="2026-01-01 10:00:00.500", session="sess-1"):
    return {**COMMON, "created_at": at, "session_id": session, "edge_id": f"edge-{op_id}-{src}-{dst}", "op_id": op_id,
            "category": category, "source_full_node_id": src, "target_full_node_id": dst, "comment": None}


def export() -> dict:
    nodes = [
        node("msg1", 1, "'Alice: I moved to Bristol'", class_name="str", at="2026-01-01 10:00:00.001", category="message"),
        node("msg2", 1, "'Alice: I am vegetarian now'", class_name="str", at="2026-01-01 10:00:00.002", category="message"),
        node("mem-001", 1, json.dumps({"text": "lives in Manchester"}), at="2026-01-01 10:00:00.010", category="memory"),
        node("mem-001", 2, json.dumps({"text": "lives in Bristol"}), at="2026-01-01 10:00:00.020", category="memory"),
        node("seed", 1, "not python at all {", at="2026-01-01 10:00:00.015"),
        node("answer@q1", 1, "'Manchester'", at="2026-01-01 10:00:01.000", category="answer", session="sess-2"),
        {**node("COMMENT:NONE", 1, "NONE", session="__none__", category="sentinel"), "filename": "<sentinel>"},
    ]
    operations = [
        op("op-extract", "extract_facts", "extraction", "2026-01-01 10:00:00.009", comment="fact extraction"),
        op("op-seed", "seed", "operation", "2026-01-01 10:00:00.014"),
        op("op-mut", "mutation:mem-001", "mutation", "2026-01-01 10:00:00.019"),
        op("op-answer", "question_answering", "qa", "2026-01-01 10:00:00.999", session="sess-2"),
        {**op("__none_op__", "NONE sentinel", "sentinel", "2026-01-01 10:00:00.000", session="__none__"),
         "filename": "<sentinel>"},
    ]
    edges = [
        edge("op-extract", "str:msg1@1", "mem-001@1"),
        edge("op-seed", "COMMENT:NONE@1", "seed@1"),
        edge("op-mut", "mem-001@1", "mem-001@2", category="mutation"),
        edge("op-mut", "str:msg2@1", "mem-001@2", category="mutation"),
        edge("op-answer", "mem-001@1", "answer@q1@1", session="sess-2"),
        edge("op-answer", "seed@1", "answer@q1@1", session="sess-2"),
        edge("__none_op__", "str:msg2@1", "answer@q1@1", category="link", session="__none__"),
        edge("__none_op__", "seed@1", "COMMENT:NONE@1", category="link", session="__none__"),
    ]
    sessions = [
        {**COMMON, "created_at": "2026-01-01 09:59:59.000", "session_id": "sess-1", "session_name": "ingest",
         "comment": "session 1", "category": "ingest"},
        {**COMMON, "created_at": "2026-01-01 10:00:00.900", "session_id": "sess-2", "session_name": "answer q1",
         "comment": None, "category": "answer"},
        {**COMMON, "created_at": "2026-01-01 09:00:00.000", "session_id": "__none__", "session_name": "NONE sentinel",
         "comment": None, "category": "sentinel", "filename": "<sentinel>"},
    ]
    annotations = [{"query_id": "q1", "query": "Where does Alice live?", "golden_answers": ["Bristol"],
                    "prediction": "Manchester", "source_evidence_ids": ["str:msg1@1"],
                    "final_error_type": "RetrievalError", "final_op_id": "op-answer", "reason": "read the stale version"}]
    return {"graph_id": "graph-1", "user_id": None, "project_id": None, "storage_path": None, "strict": False,
            "driver_type": "in_memory", "created_at": "2026-01-01 09:59:58.000", "metadata": {"system": "mem0"},
            "data": {"nodes": nodes, "edges": edges, "operations": operations, "sessions": sessions,
                     "annotations": annotations}}


@pytest.fixture
def g(tmp_path):
    path = tmp_path / "graph-1.json"
    path.write_text(json.dumps(export()))
    return import_smartcomment(path)


def test_nodes_become_versioned_variables_without_sentinels(g):
    assert set(g.variables) == {"str:msg1@1", "str:msg2@1", "mem-001@1", "mem-001@2", "seed@1", "answer@q1@1"}
    assert g.variables["answer@q1@1"].name == "answer@q1" and g.variables["answer@q1@1"].version == 1
    assert g.value("str:msg1@1") == "Alice: I moved to Bristol"  # repr-decoded
    assert g.value("mem-001@2") == {"text": "lives in Bristol"}  # JSON-decoded
    assert g.value("seed@1") == "not python at all {"  # kept as the raw string
    assert g.variables["str:msg1@1"].category == "message"
    assert set(g.sessions) == {"sess-1", "sess-2"} and g.sessions["sess-1"].kind == "ingest"


def test_edges_grouped_into_ops(g):
    assert g.ops["op-extract"].inputs == {"input": ("str:msg1@1",)}
    assert g.ops["op-extract"].outputs == {"mem-001": "mem-001@1"}
    assert g.ops["op-extract"].comment == "fact extraction"
    mut = g.ops["op-mut"]
    assert mut.category == "mutation" and mut.name == "mutation:mem-001"
    assert mut.inputs == {"input": ("str:msg2@1",), "_previous": ("mem-001@1",)}
    assert g.ops["op-seed"].inputs == {}  # the NONE sentinel input is dropped
    assert g.ops["op-answer"].inputs["input"] == ("mem-001@1", "seed@1")
    assert [u.event for u in unit_lifetime(g, "mem-001")] == ["created", "updated"]
    assert "str:msg1@1" in lineage(g, "answer@q1@1")


def test_none_op_links_join_the_producer_and_sentinel_links_vanish(g):
    assert not [o for o in g.ops.values() if o.id.startswith("__none_op__")]
    assert g.ops["op-answer"].inputs == {"input": ("mem-001@1", "seed@1"), "link": ("str:msg2@1",)}
    assert any("joined to its producer op-answer" in n for n in g.meta["import_notes"])
    assert "str:msg2@1" in lineage(g, "answer@q1@1")


def test_second_producer_is_noted_not_kept():
    data = export()
    data["data"]["edges"].append(edge("op-seed", "str:msg1@1", "mem-001@1"))
    g = from_smartcomment(data)
    assert g.producer["mem-001@1"] == "op-extract"
    assert any("mem-001@1 is also targeted by op-seed" in n for n in g.meta["import_notes"])
    validate(g)


def test_meta_keeps_annotations_and_marks_not_executable(g):
    assert g.meta["executable"] is False and g.meta["source"] == "smartcomment"
    assert g.meta["annotations"][0]["final_op_id"] == "op-answer" and "op-answer" in g.ops
    assert g.meta["smartcomment"]["metadata"] == {"system": "mem0"}
    validate(g)


def test_times_follow_created_at(g):
    t = {vid: v.time for vid, v in g.variables.items()}
    assert t["str:msg1@1"] < t["mem-001@1"] < t["mem-001@2"] < t["answer@q1@1"]
    assert g.ops["op-extract"].time < g.ops["op-mut"].time < g.ops["op-answer"].time
    assert list(g.ops) == sorted(g.ops, key=lambda o: g.ops[o].time)


def test_link_op_kept_when_target_free():
    data = export()
    data["data"]["edges"] = [e for e in data["data"]["edges"] if e["op_id"] != "op-answer"]
    g = from_smartcomment(data)
    link = g.ops[g.producer["answer@q1@1"]]
    assert link.id.startswith("__none_op__#") and link.category == "link"
    assert link.inputs == {"input": ("str:msg2@1",)}


def test_raw_decoding_and_errors(tmp_path):
    g = from_smartcomment(export(), decode="raw")
    assert g.value("str:msg1@1") == "'Alice: I moved to Bristol'"
    with pytest.raises(GraphError, match="not a smartcomment export"):
        from_smartcomment({"nodes": []})
    bad = export()
    bad["data"]["edges"].append(edge("op-extract", "str:msg1@1", "ghost@1"))
    with pytest.raises(GraphError, match=r"edge 'edge-op-extract-str:msg1@1-ghost@1' of op 'op-extract' points to unknown node 'ghost@1'"):
        from_smartcomment(bad, where="bench/x.json")
    path = tmp_path / "broken.json"
    path.write_text('{"data": ')
    with pytest.raises(GraphError, match=rf"{path}: not valid JSON"):
        import_smartcomment(path)
