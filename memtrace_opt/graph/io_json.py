"""Save and load a memory graph as JSON Lines (optionally gzip-compressed), exactly.

Layout: line 1 is a header (format, version, graph meta, record counts); then one record per line,
sessions first, then variables, then operations, each in execution order. Loading reads one line at
a time, so a large graph is never held in memory twice, and the header's counts turn a file cut at
a line boundary into an error instead of a silently smaller graph. A path ending in ``.gz`` is
gzip-compressed.

Values are JSON; the few Python values JSON would silently change (tuples, sets, bytes, dicts with
non-string keys, non-finite floats, numpy arrays and scalars) are stored as tagged objects
``{"__t__": tag, ...}`` and restored exactly; anything else is rejected at save time, naming the
variable or op that holds it. The record converters here are shared with :mod:`.io_sqlite`.
"""

from __future__ import annotations

import base64
import gc
import gzip
import json
import math
import os
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator, Mapping

from memtrace_opt.atomic import atomic_path
from memtrace_opt.errors import GraphError
from memtrace_opt.graph.model import LMCall, MemoryGraph, Operation, PromptRef, SessionRecord, Variable

__all__ = [
    "FORMAT", "VERSION", "bulk_load", "decode_value", "dumps", "encode_value", "load_json", "loads", "op_from_record",
    "op_record", "save_json", "session_from_record", "session_record", "variable_from_record", "variable_record",
]

FORMAT = "memtrace-graph"
VERSION = 1
TAG = "__t__"

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


# -- values ---------------------------------------------------------------------------------------
def encode_value(value: Any, where: str = "value") -> Any:
    """``value`` as plain JSON data, with tagged objects for what JSON cannot hold exactly.

    >>> encode_value((1, {2: "x"}))
    {'__t__': 'tuple', 'v': [1, {'__t__': 'dict', 'v': [[2, 'x']]}]}
    """
    t = type(value)
    if value is None or t is str or t is bool or t is int:
        return value
    if t is float:
        return value if math.isfinite(value) else {TAG: "float", "v": repr(value)}
    if t is list:
        return [encode_value(x, where) for x in value]
    if t is dict:
        if TAG not in value and all(type(k) is str for k in value):
            return {k: encode_value(v, where) for k, v in value.items()}
        return {TAG: "dict", "v": [[encode_value(k, where), encode_value(v, where)] for k, v in value.items()]}
    if t is tuple or t is set or t is frozenset:
        return {TAG: t.__name__, "v": [encode_value(x, where) for x in value]}
    if t is bytes:
        return {TAG: "bytes", "v": base64.b64encode(value).decode("ascii")}
    if t.__module__ == "numpy":
        return _encode_numpy(value, where)
    raise GraphError(f"{where}: cannot store a {t.__module__}.{t.__qualname__} value in a graph file; "
                     "make the op return JSON data (dict, list, str, number, bool, None, tuple, set, bytes)")


def _encode_numpy(value: Any, where: str) -> Any:
    import numpy as np

    if isinstance(value, np.ndarray) and value.dtype != object:
        data = base64.b64encode(np.ascontiguousarray(value).tobytes()).decode("ascii")
        return {TAG: "ndarray", "dtype": value.dtype.str, "shape": list(value.shape), "v": data}
    if isinstance(value, np.generic) and not isinstance(value, np.object_):
        return {TAG: "npscalar", "dtype": value.dtype.str, "v": encode_value(value.item(), where)}
    raise GraphError(f"{where}: cannot store a numpy {type(value).__name__} of objects in a graph file")


def _tagged(d: dict[str, Any]) -> Any:
    """``json`` object hook: turn a tagged object back into its Python value (decoding runs bottom-up)."""
    tag = d.get(TAG)
    if tag is None:
        return d
    v = d["v"]
    if tag == "tuple":
        return tuple(v)
    if tag == "dict":
        return {_hashable(k): x for k, x in v}
    if tag == "set":
        return {_hashable(x) for x in v}
    if tag == "frozenset":
        return frozenset(_hashable(x) for x in v)
    if tag == "float":
        return float(v)
    if tag == "bytes":
        return base64.b64decode(v)
    if tag in ("ndarray", "npscalar"):
        import numpy as np

        if tag == "npscalar":
            return np.dtype(d["dtype"]).type(v)
        return np.frombuffer(base64.b64decode(v), dtype=np.dtype(d["dtype"])).reshape(d["shape"]).copy()
    raise ValueError(f"unknown value tag {tag!r}")


def _hashable(x: Any) -> Any:
    return tuple(_hashable(i) for i in x) if type(x) is list else x


_DECODER = json.JSONDecoder(object_hook=_tagged)
_PLAIN = json.JSONDecoder()
_MARK = f'"{TAG}"'


def decode_value(data: Any) -> Any:
    """Inverse of :func:`encode_value` for data already parsed without the object hook."""
    return _DECODER.decode(_ENCODER.encode(data))


def dumps(obj: Any) -> str:
    """Compact one-line JSON of already-encoded data."""
    return _ENCODER.encode(obj)


def loads(text: str) -> Any:
    """Parse one JSON text, restoring tagged values.

    Every tagged object is written with the literal key ``"__t__"``, so a text without it is parsed by
    the plain C decoder; calling the Python object hook on every dict would double the load time.
    """
    return _DECODER.decode(text) if _MARK in text else _PLAIN.decode(text)


@contextmanager
def bulk_load() -> Iterator[None]:
    """Pause the cyclic garbage collector while a graph is built from storage, then restore it.

    Loading allocates hundreds of thousands of long-lived containers and none of them is garbage;
    the collector's repeated full passes over the growing heap were half of the load time.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# -- records --------------------------------------------------------------------------------------
def variable_record(v: Variable) -> dict[str, Any]:
    rec: dict[str, Any] = {"k": "v", "name": v.name, "version": v.version, "category": v.category,
                           "value": encode_value(v.value, f"variable {v.id!r}"), "time": v.time}
    if v.session is not None:
        rec["session"] = v.session
    if v.comment:
        rec["comment"] = v.comment
    if v.deleted:
        rec["deleted"] = True
    return rec


def variable_from_record(r: Mapping[str, Any]) -> Variable:
    return Variable(r["name"], r["version"], r["category"], r["value"], r["time"], r.get("session"),
                    r.get("comment", ""), r.get("deleted", False))


def op_record(o: Operation) -> dict[str, Any]:
    rec: dict[str, Any] = {"k": "o", "id": o.id, "name": o.name, "category": o.category,
                           "inputs": {role: list(ids) for role, ids in o.inputs.items()},
                           "outputs": dict(o.outputs), "time": o.time}
    optional = {
        "session": o.session, "params": encode_value(dict(o.params), f"params of op {o.id!r}") if o.params else None,
        "prompt": [o.prompt.component, o.prompt.sha] if o.prompt else None,
        # reused_prompt_tokens only when reported, so graphs without it keep their old shape
        "lm_calls": [[c.model, c.prompt_tokens, c.completion_tokens, c.latency_s, c.cached, c.finish_reason]
                     + ([c.reused_prompt_tokens] if c.reused_prompt_tokens else []) for c in o.lm_calls] or None,
        "error": o.error, "raw": o.raw, "memo_key": o.memo_key, "comment": o.comment or None,
    }
    rec.update((k, v) for k, v in optional.items() if v is not None)
    if o.status != "ok":
        rec["status"] = o.status
    if o.reused:
        rec["reused"] = True
    return rec


def op_from_record(r: Mapping[str, Any]) -> Operation:
    prompt = r.get("prompt")
    return Operation(
        id=r["id"], name=r["name"], category=r["category"],
        inputs={role: tuple(ids) for role, ids in r["inputs"].items()}, outputs=dict(r["outputs"]),
        time=r["time"], session=r.get("session"), params=r.get("params", {}),
        prompt=PromptRef(prompt[0], prompt[1]) if prompt else None,
        lm_calls=tuple(LMCall(*c) for c in r.get("lm_calls", ())), status=r.get("status", "ok"),
        error=r.get("error"), raw=r.get("raw"), memo_key=r.get("memo_key"), reused=r.get("reused", False),
        comment=r.get("comment", ""),
    )


def session_record(s: SessionRecord) -> dict[str, Any]:
    return {"k": "s", "id": s.id, "kind": s.kind, "time": s.time,
            "meta": encode_value(dict(s.meta), f"meta of session {s.id!r}")}


def session_from_record(r: Mapping[str, Any]) -> SessionRecord:
    return SessionRecord(r["id"], r["kind"], r["time"], r.get("meta", {}))


# -- files ----------------------------------------------------------------------------------------
def _open(path: Path, mode: str) -> IO[str]:
    if path.name.endswith(".gz"):
        return gzip.open(path, mode + "t", encoding="utf-8", compresslevel=5)  # type: ignore[return-value]
    return open(path, mode, encoding="utf-8")


def _lines(g: MemoryGraph) -> Iterator[str]:
    counts = {"sessions": len(g.sessions), "variables": len(g.variables), "ops": len(g.ops)}
    yield dumps({"format": FORMAT, "version": VERSION, "meta": encode_value(dict(g.meta), "graph meta"),
                 "counts": counts})
    for s in g.sessions.values():
        yield dumps(session_record(s))
    for v in g.variables.values():
        yield dumps(variable_record(v))
    for o in g.ops.values():
        yield dumps(op_record(o))


def save_json(g: MemoryGraph, path: str | os.PathLike[str]) -> Path:
    """Write ``g`` to ``path`` (``.jsonl`` or ``.jsonl.gz``) atomically; returns the path.

    A value that cannot be stored raises :class:`GraphError` naming its variable or op, and no file is left.
    """
    path = Path(path)
    with atomic_path(path) as tmp:
        with _open(tmp, "w") as f:
            for line in _lines(g):
                f.write(line)
                f.write("\n")
    return path


def load_json(path: str | os.PathLike[str]) -> MemoryGraph:
    """Read a graph written by :func:`save_json`, line by line.

    A missing, corrupt or truncated file raises :class:`GraphError` naming the path and the line.
    """
    path = Path(path)
    if not path.is_file():
        raise GraphError(f"{path}: no such graph file")
    lineno, seen = 1, 0
    try:
        with bulk_load(), _open(path, "r") as f:
            lines = enumerate(f, start=1)
            g, counts = _read_header(next(lines, (1, ""))[1])
            for lineno, line in lines:
                _add_record(g, loads(line))
                seen += 1
    except json.JSONDecodeError as err:
        raise GraphError(f"{path}: line {lineno}: corrupt record ({err.msg} at column {err.colno})") from None
    except (EOFError, zlib.error, gzip.BadGzipFile, UnicodeDecodeError) as err:
        raise GraphError(f"{path}: line {lineno}: truncated or corrupt file ({err})") from None
    except (KeyError, TypeError, ValueError) as err:
        raise GraphError(f"{path}: line {lineno}: malformed record ({type(err).__name__}: {err})") from None
    except GraphError as err:
        raise GraphError(f"{path}: line {lineno}: {err}") from None
    expected = sum(counts.values())
    if seen != expected:
        raise GraphError(f"{path}: truncated after line {lineno}: header promises {expected} records, found {seen}")
    return g


def _read_header(line: str) -> tuple[MemoryGraph, dict[str, int]]:
    if not line.strip():
        raise GraphError("empty file, expected a memtrace-graph header")
    head = loads(line)
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        raise GraphError(f"not a {FORMAT} file (header has format {head.get('format') if isinstance(head, dict) else None!r})")
    if head.get("version") != VERSION:
        raise GraphError(f"unsupported {FORMAT} version {head.get('version')!r}; this build reads version {VERSION}")
    return MemoryGraph(head.get("meta", {})), dict(head["counts"])


def _add_record(g: MemoryGraph, rec: dict[str, Any]) -> None:
    kind = rec["k"]
    if kind == "v":
        g.add_variable(variable_from_record(rec))
    elif kind == "o":
        g.add_operation(op_from_record(rec))
    elif kind == "s":
        g.add_session(session_from_record(rec))
    else:
        raise GraphError(f"unknown record kind {kind!r}")
