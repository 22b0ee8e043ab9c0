"""Question slices of one graph for many questions at once, with per-node facts cached.

A slice is what :func:`memtrace_opt.graph.queries.question_slice` returns: the answer and judgement
of a question and everything they depend on. That function builds a new graph per question, which
on a 10k-op conversation costs most of a second each; a report with dozens of failed questions on
the same graph would spend half a minute there. :class:`SliceIndex` computes the node sets of all
of a graph's questions in one backward pass (one bit per question, ORed from consumers to inputs in
reverse topological order), and caches what the layout asks of every node (its column) and of every
session (its ops), so each question then costs time proportional to its drawing, not to the graph.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable, Iterable

import networkx as nx

from memtrace_opt.graph.model import MemoryGraph

__all__ = ["SliceIndex", "slice_roots"]


def slice_roots(g: MemoryGraph, qa_id: str) -> list[str]:
    """The latest ``answer:<qa_id>`` and ``judgement:<qa_id>`` variables present (the slice's sinks)."""
    return [g.latest_id(n) for n in (f"answer:{qa_id}", f"judgement:{qa_id}") if n in g.latest]


class SliceIndex:
    """Slices of ``qa_ids`` in ``g`` (same node sets as ``question_slice``), plus cached node columns."""

    def __init__(self, g: MemoryGraph, qa_ids: Iterable[str], column: Callable[[MemoryGraph, str], int]) -> None:
        self.g = g
        self._column_fn = column
        self._columns: dict[str, int] = {}
        self._bit = {qa: i for i, qa in enumerate(dict.fromkeys(qa_ids))}
        self._mask = self._masks()
        self._session_ops: dict[str | None, list[str]] = defaultdict(list)
        for op in g.ops.values():
            self._session_ops[op.session].append(op.id)

    def _masks(self) -> dict[str, int]:
        """Node → bitset of the questions whose slice holds it."""
        g = self.g
        mask: dict[str, int] = defaultdict(int)
        for qa, bit in self._bit.items():
            for root in slice_roots(g, qa):
                mask[root] |= 1 << bit
        if not mask:
            return {}
        pred = g.nx.pred
        for node in reversed(list(nx.topological_sort(g.nx))):
            m = mask.get(node)
            if m:
                for p in pred[node]:
                    mask[p] |= m
        return dict(mask)

    def has(self, qa_id: str) -> bool:
        """Whether ``qa_id`` was answered in this graph (its slice is non-empty)."""
        return qa_id in self._bit and bool(slice_roots(self.g, qa_id))

    def nodes(self, qa_id: str) -> set[str]:
        """The variable and op ids of ``qa_id``'s slice (empty for an unknown or unanswered question)."""
        bit = self._bit.get(qa_id)
        if bit is None:
            return set()
        flag = 1 << bit
        return {n for n, m in self._mask.items() if m & flag}

    def column(self, node_id: str) -> int:
        """The layout column of a node, computed once per graph."""
        col = self._columns.get(node_id)
        if col is None:
            col = self._columns[node_id] = self._column_fn(self.g, node_id)
        return col

    def session_ops(self, session: str) -> list[str]:
        """The ops of ``session`` in execution order."""
        return self._session_ops.get(session, [])
