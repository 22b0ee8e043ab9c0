"""validate() catches each way a graph can be malformed, naming the offending ids."""

from __future__ import annotations

import dataclasses

import pytest

from memtrace_opt.errors import GraphError
from memtrace_opt.graph import MemoryGraph, Operation, Variable, problems, validate


def chain() -> MemoryGraph:
    """m@1 -> extract -> f@1 -> store -> u@1 -> update(+f2@1) -> u@2."""
    g = MemoryGraph()
    for name, version, t in (("m", 1, 1), ("f", 1, 3), ("u", 1, 5), ("f2", 1, 6), ("u", 2, 8)):
        g.add_variable(Variable(name, version, "x", f"{name}{version}", t))
    g.add_operation(Operation("s/extract#0", "extract", "extraction", {"m": ("m@1",)}, {"f": "f@1"}, 2))
    g.add_operation(Operation("s/store#0", "store", "update", {"f": ("f@1",)}, {"u": "u@1"}, 4))
    g.add_operation(Operation("s/update#0", "update", "update", {"f": ("f2@1",), "_previous": ("u@1",)}, {"u": "u@2"}, 7))
    return g


def test_valid_graph_passes():
    validate(chain())
    assert problems(chain()) == []


def test_cycle_is_named():
    g = chain()
    g.nx.add_edge("u@2", "s/extract#0")
    g.ops["s/extract#0"] = dataclasses.replace(g.ops["s/extract#0"], inputs={"m": ("m@1", "u@2")})
    with pytest.raises(GraphError, match=r"cycle: cycle through .*u@2.*s/extract#0"):
        validate(g)


def test_dangling_edge_to_unknown_node():
    g = chain()
    g.nx.add_edge("u@2", "ghost#0")
    with pytest.raises(GraphError, match=r"dangling edge: .*'ghost#0'"):
        validate(g)


def test_record_pointing_to_missing_variable():
    g = chain()
    g.ops["s/store#0"] = dataclasses.replace(g.ops["s/store#0"], inputs={"f": ("f@1", "nowhere@1")})
    with pytest.raises(GraphError, match=r"records refer to missing nodes: 's/store#0 -> nowhere@1'"):
        validate(g)


def test_variable_to_variable_edge():
    g = chain()
    g.nx.add_edge("m@1", "f2@1")
    with pytest.raises(GraphError, match=r"not bipartite: .*'m@1 -> f2@1'"):
        validate(g)


def test_op_to_op_edge():
    g = chain()
    g.nx.add_edge("s/extract#0", "s/store#0")
    with pytest.raises(GraphError, match=r"not bipartite: .*'s/extract#0 -> s/store#0'"):
        validate(g)


def test_version_gap():
    g = chain()
    g.add_variable(Variable("u", 4, "x", "u4", 9))
    with pytest.raises(GraphError, match=r"version gap: missing versions: 'u@4 without u@3'"):
        validate(g)
    validate(g, versions=False)  # skips only the version-chain check (imported graphs)


def test_new_version_not_reading_its_predecessor():
    g = chain()
    g.ops["s/update#0"] = dataclasses.replace(g.ops["s/update#0"], inputs={"f": ("f2@1",)})
    g.nx.remove_edge("u@1", "s/update#0")
    with pytest.raises(GraphError, match=r"u@2 not made by an op reading u@1"):
        validate(g)


def test_variable_produced_twice():
    g = chain()
    g.ops["s/update#0"] = dataclasses.replace(g.ops["s/update#0"], outputs={"u": "u@2", "again": "f@1"})
    g.nx.add_edge("s/update#0", "f@1")
    with pytest.raises(GraphError, match=r"produced twice: .*f@1 by s/extract#0 and s/update#0"):
        validate(g)


def test_edges_that_differ_from_records():
    g = chain()
    g.nx.remove_edge("m@1", "s/extract#0")
    with pytest.raises(GraphError, match=r"edge/record mismatch: .*'m@1 -> s/extract#0'"):
        validate(g)


def test_several_problems_reported_in_one_line_with_where():
    g = chain()
    g.nx.add_edge("m@1", "f2@1")
    g.add_variable(Variable("z", 3, "x", None, 10))
    with pytest.raises(GraphError) as err:
        validate(g, where="run/graphs/conv-1.jsonl.gz")
    msg = err.value.one_line()
    assert msg.startswith("run/graphs/conv-1.jsonl.gz is invalid:")
    assert "not bipartite" in msg and "version gap" in msg and "\n" not in str(err.value)
