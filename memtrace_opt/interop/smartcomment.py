"""Import smartcomment execution graphs (the format of MemTraceBench's graph files) as memory graphs.

smartcomment stores variables as nodes (``full_name@version``) and operations only as edge groups:
every edge carries an ``op_id`` and an op's inputs are the distinct sources, its outputs the distinct
targets, of its edges. In-place mutations are ops of category ``mutation`` with a version edge
``X@v -> X@v+1``. Sentinels stand in for nothing: the node ``COMMENT:NONE@1`` (an op with no input or
output), the session ``__none__`` and the op ``__none_op__`` (a link recorded outside any op). The
importer drops the sentinels, turns ``__none_op__`` links into one ``link`` op per target, keeps
MemTraceBench's ``data.annotations`` in ``meta["annotations"]`` and marks the graph
``meta["executable"] = False``: no registered implementation stands behind these ops, so they can be
queried and attributed but not replayed.

Where the format allows what the memory graph forbids, the importer keeps the graph well-formed and
says so in ``meta["import_notes"]``: a variable targeted by a second op keeps its first producer
(the later edges are listed), a variable an op both reads and writes counts as its output only, and
a ``__none_op__`` link into a variable that has a producer joins that producer's inputs (role ``link``).
"""

from __future__ import annotations

import ast
import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence, cast

from memtrace_opt.errors import GraphError
from memtrace_opt.graph.model import MemoryGraph, Operation, SessionRecord, Variable, split_var_id

__all__ = ["NONE_NODE", "NONE_OP", "NONE_SESSION", "from_smartcomment", "import_smartcomment"]

NONE_NODE = "COMMENT:NONE@1"
NONE_SESSION = "__none__"
NONE_OP = "__none_op__"
_HEADER = ("graph_id", "user_id", "project_id", "storage_path", "strict", "driver_type", "created_at", "metadata")

Decode = Literal["auto", "json", "raw"]


def import_smartcomment(path: str | os.PathLike[str], *, decode: Decode = "auto") -> MemoryGraph:
    """Read a smartcomment JSON export (or MemTraceBench graph file) from ``path`` into a :class:`MemoryGraph`."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GraphError(f"{path}: no such smartcomment graph file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise GraphError(f"{path}: not valid JSON ({err})") from None
    return from_smartcomment(data, where=str(path), decode=decode)


def from_smartcomment(data: Mapping[str, Any], *, where: str = "smartcomment graph", decode: Decode = "auto") -> MemoryGraph:
    """Convert an already-parsed smartcomment export; ``where`` names it in errors.

    ``decode`` turns node values (encoded strings) back into data: ``"auto"`` tries JSON, then a Python
    literal (smartcomment's default encoding is ``repr``), else keeps the string; ``"json"`` tries JSON
    only; ``"raw"`` keeps every value as the stored string.
    """
    body = data.get("data") if isinstance(data, Mapping) else None
    if not isinstance(body, Mapping):
        raise GraphError(f"{where}: not a smartcomment export (no 'data' object with nodes/edges/operations/sessions)")
    try:
        return _Importer(where, decode).run(data, body)
    except (KeyError, TypeError) as err:
        raise GraphError(f"{where}: malformed smartcomment record ({type(err).__name__}: {err})") from None
    except GraphError as err:
        if str(err).startswith(where):
            raise
        raise GraphError(f"{where}: {err}") from None


class _Importer:
    """One import: orders the records, builds variables, then regroups edges into operations."""

    def __init__(self, where: str, decode: Decode) -> None:
        self.where, self.decode = where, decode
        self.notes: list[str] = []
        self.times: dict[tuple[str, str], int] = {}

    def run(self, data: Mapping[str, Any], body: Mapping[str, Any]) -> MemoryGraph:
        nodes, ops = list(body.get("nodes", [])), list(body.get("operations", []))
        sessions, edges = list(body.get("sessions", [])), list(body.get("edges", []))
        self._order(sessions, nodes, ops)
        meta = {"source": "smartcomment", "executable": False,
                "smartcomment": {k: data.get(k) for k in _HEADER if k in data},
                "annotations": list(body.get("annotations", []))}
        g = MemoryGraph(meta)
        for rec in sorted((s for s in sessions if s["session_id"] != NONE_SESSION),
                          key=lambda s: self.times[("s", s["session_id"])]):
            g.add_session(SessionRecord(rec["session_id"], rec.get("category") or "session",
                                        self.times[("s", rec["session_id"])], _session_meta(rec)))
        for rec in sorted((n for n in nodes if _node_id(n) != NONE_NODE), key=lambda n: self.times[("n", _node_id(n))]):
            g.add_variable(self._variable(rec))
        for op in self._operations(g, ops, edges):
            g.add_operation(op)
        g.meta["import_notes"] = self.notes
        return g

    def _order(self, sessions: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]],
               ops: Sequence[Mapping[str, Any]]) -> None:
        """Logical times from ``created_at`` (ties: sessions, then nodes, then ops, then file order)."""
        keyed = [(s.get("created_at", ""), 0, i, ("s", s["session_id"])) for i, s in enumerate(sessions)]
        keyed += [(n.get("created_at", ""), 1, i, ("n", _node_id(n))) for i, n in enumerate(nodes)]
        keyed += [(o.get("created_at", ""), 2, i, ("o", o["op_id"])) for i, o in enumerate(ops)]
        for tick, (*_, key) in enumerate(sorted(keyed), start=1):
            self.times[key] = tick

    def _variable(self, rec: Mapping[str, Any]) -> Variable:
        name, version = split_var_id(_node_id(rec))
        if rec.get("version") is not None and int(rec["version"]) != version:
            raise GraphError(f"{self.where}: node {_node_id(rec)!r} has version field {rec['version']}")
        session = rec.get("session_id")
        return Variable(name, version, rec.get("category") or "variable", self._value(rec.get("value")),
                        self.times[("n", _node_id(rec))], None if session == NONE_SESSION else session,
                        rec.get("comment") or "")

    def _value(self, raw: Any) -> Any:
        if not isinstance(raw, str) or self.decode == "raw":
            return raw
        try:
            return json.loads(raw)
        except ValueError:
            pass
        if self.decode == "auto":
            try:
                return ast.literal_eval(raw)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                pass
        return raw

    def _operations(self, g: MemoryGraph, ops: Sequence[Mapping[str, Any]],
                    edges: Sequence[Mapping[str, Any]]) -> list[Operation]:
        """Real ops first (in time order, the first op to target a node is its producer), then the
        ``__none_op__`` links: merged into the target's producer as ``link`` inputs, or a ``link`` op of its own."""
        records = {o["op_id"]: o for o in ops if o["op_id"] != NONE_OP}
        groups: dict[str, list[Mapping[str, Any]]] = {op_id: [] for op_id in records}
        links: dict[str, list[str]] = defaultdict(list)
        for e in edges:
            src, dst = e["source_full_node_id"], e["target_full_node_id"]
            for end in (src, dst):
                if end != NONE_NODE and end not in g.variables:
                    raise GraphError(f"{self.where}: edge {e.get('edge_id')!r} of op {e['op_id']!r} "
                                     f"points to unknown node {end!r}")
            if e["op_id"] == NONE_OP:
                if src != NONE_NODE and dst != NONE_NODE:
                    links[dst].append(src)
            else:
                groups.setdefault(e["op_id"], []).append(e)
        specs: dict[str, dict[str, Any]] = {}
        produced: dict[str, str] = {}
        for op_id in sorted(groups, key=lambda k: self._op_time(k, groups[k], g)):
            rec = records.get(op_id) or {"op_id": op_id, "op_name": op_id, "category": "operation"}
            specs[op_id] = self._spec(op_id, rec, groups[op_id], produced, g)
        for n, (target, sources) in enumerate(links.items()):
            self._link(f"{NONE_OP}#{n}", target, list(dict.fromkeys(sources)), specs, produced, g)
        made = [Operation(id=op_id, **spec) for op_id, spec in specs.items()]
        return sorted(made, key=lambda o: (o.time, o.id))

    def _op_time(self, key: str, group: list[Mapping[str, Any]], g: MemoryGraph) -> tuple[int, str]:
        if ("o", key) in self.times:
            return self.times[("o", key)], key
        targets = [g.variables[e["target_full_node_id"]].time for e in group if e["target_full_node_id"] in g.variables]
        return (max(targets) if targets else 0), key

    def _spec(self, op_id: str, rec: Mapping[str, Any], group: list[Mapping[str, Any]], produced: dict[str, str],
              g: MemoryGraph) -> dict[str, Any]:
        """The fields of one real op: inputs are the distinct sources, outputs the distinct targets."""
        sources = list(dict.fromkeys(e["source_full_node_id"] for e in group if e["source_full_node_id"] != NONE_NODE))
        targets: list[str] = []
        for e in group:
            t = e["target_full_node_id"]
            if t == NONE_NODE or t in targets:
                continue
            if t in produced:
                self.notes.append(f"{t} is also targeted by {op_id} (edge {e.get('edge_id')}); "
                                  f"kept {produced[t]} as its producer")
                continue
            targets.append(t)
            produced[t] = op_id
        internal = [s for s in sources if s in targets]
        if internal:
            self.notes.append(f"{op_id} reads and writes {', '.join(internal)}; counted as output only")
        previous = {f"{n}@{v - 1}" for n, v in map(split_var_id, targets) if v > 1}
        inputs = {"input": tuple(s for s in sources if s not in previous and s not in internal),
                  "_previous": tuple(s for s in sources if s in previous and s not in internal)}
        outputs: dict[str, str] = {}
        for t in targets:
            role = split_var_id(t)[0]
            outputs[role if role not in outputs else f"{role}#{len(outputs)}"] = t
        session = rec.get("session_id") or (group[0].get("session_id") if group else None)
        return {"name": rec.get("op_name") or op_id, "category": rec.get("category") or "operation",
                "inputs": {r: ids for r, ids in inputs.items() if ids}, "outputs": outputs,
                "time": self._op_time(op_id, group, g)[0], "session": None if session == NONE_SESSION else session,
                "params": {k: rec[k] for k in ("trigger_point", "metadata") if rec.get(k)},
                "comment": rec.get("comment") or ""}

    def _link(self, op_id: str, target: str, sources: list[str], specs: dict[str, dict[str, Any]],
              produced: dict[str, str], g: MemoryGraph) -> None:
        """A dependency recorded outside any op: join it to the target's producer, else make a ``link`` op."""
        sources = [s for s in sources if s != target]
        if target in produced:
            spec = specs[produced[target]]
            have = {v for ids in spec["inputs"].values() for v in ids}
            extra = tuple(s for s in sources if s not in have)
            if extra:
                spec["inputs"] = {**spec["inputs"], "link": spec["inputs"].get("link", ()) + extra}
                self.notes.append(f"links {', '.join(extra)} -> {target} joined to its producer {produced[target]}")
            return
        produced[target] = op_id
        var = g.variables[target]
        specs[op_id] = {"name": "link", "category": "link", "inputs": {"input": tuple(sources)} if sources else {},
                        "outputs": {var.name: target}, "time": var.time, "session": var.session, "params": {},
                        "comment": "dependency recorded outside any operation"}


def _node_id(rec: Mapping[str, Any]) -> str:
    """A node's id as edges name it: ``full_node_id``, else rebuilt from ``class_name``, ``name``, ``version``."""
    if rec.get("full_node_id"):
        return cast(str, rec["full_node_id"])
    full = f"{rec['class_name']}:{rec['name']}" if rec.get("class_name") else rec["name"]
    return f"{full}@{rec.get('version', 1)}"


def _session_meta(rec: Mapping[str, Any]) -> dict[str, Any]:
    meta = {"name": rec.get("session_name"), "comment": rec.get("comment"), "created_at": rec.get("created_at")}
    if rec.get("metadata"):
        meta["metadata"] = rec["metadata"]
    return {k: v for k, v in meta.items() if v is not None}
