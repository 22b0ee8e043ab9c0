"""A round's demo pools: mined from its training traces per method, saved with the round, pooled across rounds.

``attributed`` rounds mine bootstrapped demos from correct answers and repair demos from failures
only where blame names a prompt (:func:`memtrace_opt.optimizers.demos.mine_repair_demos`);
``unattributed`` rounds mine the same bootstrapped demos and turn every failure into an answer-style
demo dealt over every target. Each round writes ``rounds/round_k/demos.json``; a round draws from
the pools of every round so far, so what round 1 learned stays available in round 3 — and a
resumed round re-reads exactly what was mined.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping, Sequence

from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.loop.artifacts import read_json, round_dir, write_json
from memtrace_opt.optimizers.cases import CaseTrace
from memtrace_opt.optimizers.demos import (
    Demo, DemoPools, merge_pools, mine_bootstrap_demos, mine_repair_demos, mine_unattributed_demos,
)

__all__ = ["DEMOS_FILE", "load_pools", "round_pools", "save_pools"]

DEMOS_FILE = "demos.json"


def round_pools(method: str, traces: Sequence[CaseTrace], signals: Mapping[str, BlameSignal],
                targets: Sequence[str]) -> DemoPools:
    """The demos a round of ``method`` mines from its training ``traces`` (blame from ``signals``)."""
    bootstrap = mine_bootstrap_demos(traces)
    if method == "attributed":
        for t in traces:
            if t.failed:
                t.blame = signals.get(t.case.qa_id, t.blame)
        repair = mine_repair_demos(traces)
    else:
        repair = mine_unattributed_demos(traces, list(targets))
    pools = merge_pools(repair, bootstrap)
    return {c: pools.get(c, []) for c in targets if pools.get(c)}


def save_pools(path: Path, pools: Mapping[str, Sequence[Demo]]) -> None:
    write_json(path, {"components": {c: [asdict(d) for d in demos] for c, demos in pools.items()},
                      "counts": {c: {k: sum(d.kind == k for d in demos) for k in ("repair", "bootstrap")}
                                 for c, demos in pools.items()}})


def _demo(d: Mapping[str, Any]) -> Demo:
    return Demo(d["component"], d["kind"], d["case_id"], d["op_name"],
                tuple((str(r), str(t)) for r, t in d["inputs"]), d["output"], d.get("conversation", ""))


def load_pools(run_dir: Path, upto_round: int) -> DemoPools:
    """The pools saved by rounds 1..``upto_round`` of ``run_dir``, merged (earlier rounds first)."""
    pools: list[DemoPools] = []
    for r in range(1, upto_round + 1):
        path = round_dir(run_dir, r) / DEMOS_FILE
        if path.exists():
            data = read_json(path)
            pools.append({c: [_demo(d) for d in demos] for c, demos in data.get("components", {}).items()})
    return merge_pools(*pools)
