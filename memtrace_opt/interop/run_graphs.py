"""The conversation graphs of one run directory, in either of the two storages a run may have used.

A run directory holds one graph per conversation, either as ``graphs/<conversation id>.jsonl.gz``
(or ``.jsonl``; see :mod:`memtrace_opt.graph.io_json`) or as ``graphs.sqlite`` keyed by conversation
id (:mod:`memtrace_opt.graph.io_sqlite`). :class:`RunGraphs` hides which, and loads a graph only when
asked, so a person's view of one question does not read a whole run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from memtrace_opt.errors import GraphError
from memtrace_opt.graph.io_json import load_json
from memtrace_opt.graph.io_sqlite import list_graphs, load_graph
from memtrace_opt.graph.model import MemoryGraph

__all__ = ["RunGraphs"]

_SUFFIXES = (".jsonl.gz", ".jsonl")


class RunGraphs:
    """The conversation graphs of one run directory, loaded on demand."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        if not self.run_dir.is_dir():
            raise GraphError(f"{self.run_dir}: no such run directory")
        self.files = {_conversation_id(p): p for p in sorted((self.run_dir / "graphs").glob("*.jsonl*"))
                      if p.name.endswith(_SUFFIXES)}
        self.db = self.run_dir / "graphs.sqlite"
        if not self.files and not self.db.is_file():
            raise GraphError(f"{self.run_dir}: no graphs/<conversation>.jsonl.gz files and no graphs.sqlite")

    def conversations(self) -> list[str]:
        """Every conversation id with a graph here, from either storage, sorted."""
        ids = set(self.files)
        if self.db.is_file():
            ids |= set(list_graphs(self.db))
        return sorted(ids)

    def load(self, conversation: str) -> MemoryGraph:
        """The conversation's graph (its JSON Lines file first, else the SQLite database)."""
        if conversation in self.files:
            return load_json(self.files[conversation])
        if self.db.is_file() and conversation in list_graphs(self.db):
            return load_graph(self.db, conversation)
        raise GraphError(f"{self.run_dir}: no graph for conversation {conversation!r} "
                         f"(have: {', '.join(self.conversations())})")

    def graphs(self, conversation: str | None = None) -> Iterator[tuple[str, MemoryGraph]]:
        """``(conversation id, graph)`` for one conversation, or for all of them in order, loaded one at a time."""
        for conv in [conversation] if conversation else self.conversations():
            yield conv, self.load(conv)


def _conversation_id(path: Path) -> str:
    name = path.name
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem
