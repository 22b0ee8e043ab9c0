"""Compare finished ``optimize`` runs: ``memtrace-opt compare`` and :func:`memtrace_opt.compare`.

The rows and their statistics are the loop's (:mod:`memtrace_opt.loop.compare`: held-out gain over the
seed with a paired bootstrap CI and p, the pairing with the unattributed ablation, routing); this is
the run-level entry point, so every command the CLI has is one function here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from memtrace_opt.loop.compare import CompareRow, compare_runs

__all__ = ["compare"]


def compare(run_dirs: Sequence[str | Path]) -> list[CompareRow]:
    """One :class:`CompareRow` per finished run dir, ordered by system then method (ConfigError naming a run
    dir that has not finished)."""
    return compare_runs(list(run_dirs))
