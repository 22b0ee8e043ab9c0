"""Recorded graphs per conversation, so each candidate is evaluated by the cheapest replay.

GEPA evaluates a parent, then a child that differs from it in one component. Replaying the child
from the parent's graph reuses everything but that component's operations (and what they feed);
replaying it from the seed graph would also redo every component the parent already changed. So
the store keeps a few graphs per conversation and hands out the one whose prompt set agrees with
the candidate on the most components (ties: the one answering the most requested questions). A
graph recorded with exactly the candidate's prompts that already answered every requested question
needs no replay at all.

A *scoped* graph (a minibatch score from a scoped replay, :mod:`memtrace_opt.graph.replay`) serves
only scoped requests for its own questions, and is never handed out as a replay base: its ops outside
the scored questions' cone hold outputs of another prompt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from memtrace_opt.graph import MemoryGraph

__all__ = ["GraphStore", "StoredGraph"]


@dataclass(frozen=True)
class StoredGraph:
    """A graph, the full prompt set it ran with, and the questions it answered."""

    graph: MemoryGraph
    prompts: Mapping[str, str]
    qa_ids: frozenset[str]
    scoped: bool = False

    def agreement(self, prompts: Mapping[str, str]) -> int:
        """How many components have the same text here and in ``prompts``."""
        return sum(1 for name, text in prompts.items() if self.prompts.get(name) == text)

    def serves(self, prompts: Mapping[str, str], qa_ids: Iterable[str], *, scoped_ok: bool = False) -> bool:
        """Whether this graph already holds the answers ``prompts`` would give to ``qa_ids`` (a scoped
        graph only when ``scoped_ok``)."""
        return (scoped_ok or not self.scoped) and dict(self.prompts) == dict(prompts) and set(qa_ids) <= self.qa_ids


class GraphStore:
    """Up to ``per_conversation`` graphs per conversation, least recently used dropped first.

    The first graph stored for a conversation (the seed run) is never dropped: it is the replay
    base of last resort and the one attribution reads for the round's failures.
    """

    def __init__(self, per_conversation: int = 4) -> None:
        if per_conversation < 1:
            raise ValueError(f"per_conversation must be at least 1, got {per_conversation}")
        self.per_conversation = per_conversation
        self._graphs: dict[str, list[StoredGraph]] = {}

    def __contains__(self, conversation_id: str) -> bool:
        return bool(self._graphs.get(conversation_id))

    def serving(self, conversation_id: str, prompts: Mapping[str, str], qa_ids: Iterable[str], *,
                scoped_ok: bool = False) -> StoredGraph | None:
        """A stored graph that already answers ``qa_ids`` under ``prompts`` (see :meth:`StoredGraph.serves`)."""
        wanted = set(qa_ids)
        for entry in self._graphs.get(conversation_id, ()):
            if entry.serves(prompts, wanted, scoped_ok=scoped_ok):
                self._touch(conversation_id, entry)
                return entry
        return None

    def nearest(self, conversation_id: str, prompts: Mapping[str, str], qa_ids: Iterable[str]) -> StoredGraph | None:
        """The full (unscoped) stored graph to replay ``prompts`` from (None when the conversation was never run)."""
        entries = [e for e in self._graphs.get(conversation_id, ()) if not e.scoped]
        if not entries:
            return None
        wanted = set(qa_ids)
        best = max(entries, key=lambda e: (e.agreement(prompts), len(wanted & e.qa_ids)))
        self._touch(conversation_id, best)
        return best

    def add(self, conversation_id: str, entry: StoredGraph) -> None:
        """Keep ``entry``; drop the least recently used non-seed graph beyond the limit."""
        entries = self._graphs.setdefault(conversation_id, [])
        entries.append(entry)
        while len(entries) > self.per_conversation:
            del entries[1]

    def graphs(self, conversation_id: str) -> list[StoredGraph]:
        return list(self._graphs.get(conversation_id, ()))

    def _touch(self, conversation_id: str, entry: StoredGraph) -> None:
        entries = self._graphs[conversation_id]
        if entries and entries[0] is entry:
            return
        entries.remove(entry)
        entries.append(entry)
