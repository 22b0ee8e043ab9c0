"""Many graphs of one run in one SQLite database: one graph per conversation, round, or replay.

Tables ``graphs``, ``sessions``, ``variables`` and ``ops`` are keyed by a graph id; each row keeps
its record as the same JSON the JSON Lines files use (see :mod:`.io_json`), plus a few columns worth
querying (ids, names, categories, op status and prompt component). Saving a graph id again replaces
it in one transaction, so a crashed save leaves the previous version. The database runs in WAL
mode, so a report can read while the run keeps writing.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from memtrace_opt.errors import GraphError
from memtrace_opt.graph.io_json import (
    VERSION, bulk_load, dumps, encode_value, loads, op_from_record, op_record, session_from_record, session_record,
    variable_from_record, variable_record,
)
from memtrace_opt.graph.model import MemoryGraph

__all__ = ["delete_graph", "list_graphs", "load_graph", "save_graph"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS graphs (
    graph_id TEXT PRIMARY KEY, format_version INTEGER NOT NULL, meta TEXT NOT NULL,
    n_sessions INTEGER NOT NULL, n_variables INTEGER NOT NULL, n_ops INTEGER NOT NULL, saved_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    graph_id TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL, kind TEXT NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (graph_id, seq));
CREATE TABLE IF NOT EXISTS variables (
    graph_id TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL, name TEXT NOT NULL, version INTEGER NOT NULL,
    category TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (graph_id, seq));
CREATE TABLE IF NOT EXISTS ops (
    graph_id TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL, name TEXT NOT NULL, category TEXT NOT NULL,
    status TEXT NOT NULL, prompt TEXT, record TEXT NOT NULL, PRIMARY KEY (graph_id, seq));
"""

_TABLES = ("sessions", "variables", "ops")


def _connect(db_path: str | os.PathLike[str], *, create: bool) -> sqlite3.Connection:
    path = Path(db_path)
    if not create and not path.is_file():
        raise GraphError(f"{path}: no such graph database")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(path, timeout=30)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(_SCHEMA)
    except sqlite3.DatabaseError as err:
        raise GraphError(f"{path}: not a usable graph database ({err})") from None
    return conn


def save_graph(db_path: str | os.PathLike[str], graph_id: str, g: MemoryGraph) -> None:
    """Store ``g`` under ``graph_id``, replacing any graph saved under that id before (atomically)."""
    meta = dumps(encode_value(dict(g.meta), "graph meta"))
    # Generators: rows are encoded while SQLite inserts them, never all held at once.
    sessions = ((graph_id, i, s.id, s.kind, dumps(session_record(s))) for i, s in enumerate(g.sessions.values()))
    variables = ((graph_id, i, v.id, v.name, v.version, v.category, dumps(variable_record(v)))
                 for i, v in enumerate(g.variables.values()))
    ops = ((graph_id, i, o.id, o.name, o.category, o.status, o.prompt.component if o.prompt else None,
            dumps(op_record(o))) for i, o in enumerate(g.ops.values()))
    saved_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    with closing(_connect(db_path, create=True)) as conn:
        try:
            with conn:
                for table in _TABLES:
                    conn.execute(f"DELETE FROM {table} WHERE graph_id = ?", (graph_id,))
                conn.execute("INSERT OR REPLACE INTO graphs VALUES (?, ?, ?, ?, ?, ?, ?)",
                             (graph_id, VERSION, meta, len(g.sessions), len(g.variables), len(g.ops), saved_at))
                conn.executemany("INSERT INTO sessions VALUES (?, ?, ?, ?, ?)", sessions)
                conn.executemany("INSERT INTO variables VALUES (?, ?, ?, ?, ?, ?, ?)", variables)
                conn.executemany("INSERT INTO ops VALUES (?, ?, ?, ?, ?, ?, ?, ?)", ops)
        except sqlite3.DatabaseError as err:
            raise GraphError(f"{db_path}: could not save graph {graph_id!r} ({err})") from None


def list_graphs(db_path: str | os.PathLike[str]) -> list[str]:
    """The graph ids stored in the database, sorted."""
    with closing(_connect(db_path, create=False)) as conn:
        return [row[0] for row in conn.execute("SELECT graph_id FROM graphs ORDER BY graph_id")]


def delete_graph(db_path: str | os.PathLike[str], graph_id: str) -> bool:
    """Remove ``graph_id`` from the database; returns whether it was there."""
    with closing(_connect(db_path, create=False)) as conn, conn:
        for table in _TABLES:
            conn.execute(f"DELETE FROM {table} WHERE graph_id = ?", (graph_id,))
        return conn.execute("DELETE FROM graphs WHERE graph_id = ?", (graph_id,)).rowcount > 0


def load_graph(db_path: str | os.PathLike[str], graph_id: str) -> MemoryGraph:
    """Read graph ``graph_id`` back exactly as saved; a missing id or corrupt row raises :class:`GraphError`."""
    with closing(_connect(db_path, create=False)) as conn:
        head = conn.execute("SELECT format_version, meta, n_sessions, n_variables, n_ops FROM graphs WHERE graph_id = ?",
                            (graph_id,)).fetchone()
        if head is None:
            known = [r[0] for r in conn.execute("SELECT graph_id FROM graphs ORDER BY graph_id LIMIT 10")]
            raise GraphError(f"{db_path}: no graph {graph_id!r} (stored: {', '.join(known) or 'none'})")
        version, meta, *counts = head
        if version != VERSION:
            raise GraphError(f"{db_path}: graph {graph_id!r} has format version {version}; this build reads {VERSION}")
        g = MemoryGraph(loads(meta))
        adders: dict[str, Callable[[Any], None]] = {
            "sessions": lambda r: g.add_session(session_from_record(r)),
            "variables": lambda r: g.add_variable(variable_from_record(r)),
            "ops": lambda r: g.add_operation(op_from_record(r)),
        }
        for table, expected in zip(_TABLES, counts):
            with bulk_load():
                n = _load_rows(conn, db_path, graph_id, table, adders[table])
            if n != expected:
                raise GraphError(f"{db_path}: graph {graph_id!r} is incomplete: {table} has {n} rows, expected {expected}")
    return g


def _load_rows(conn: sqlite3.Connection, db_path: Any, graph_id: str, table: str, add: Callable[[Any], None]) -> int:
    rows: Iterator[tuple[int, str]] = conn.execute(
        f"SELECT seq, record FROM {table} WHERE graph_id = ? ORDER BY seq", (graph_id,))
    n = 0
    for seq, record in rows:
        try:
            add(loads(record))
        except (KeyError, TypeError, ValueError, GraphError) as err:
            raise GraphError(f"{db_path}: graph {graph_id!r}: {table} row {seq}: malformed record ({err})") from None
        n += 1
    return n
