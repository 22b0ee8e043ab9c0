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
from typing import Any, Collection, Mapping, Sequence

from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.rundir import read_object, round_dir, write_json
from memtrace_opt.optimizers.cases import CaseTrace
from memtrace_opt.optimizers.demos import (
    Demo, DemoPools, merge_pools, mine_bootstrap_demos, mine_repair_demos, mine_unattributed_demos,
)

__all__ = ["DEMOS_FILE", "load_pools", "round_pools", "save_pools", "testable_pools"]

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
            data: Mapping[str, Any] = read_object(path)
            pools.append({c: [_demo(d) for d in demos] for c, demos in data.get("components", {}).items()})
    return merge_pools(*pools)


def testable_pools(pools: Mapping[str, Sequence[Demo]], minibatch_conversations: Collection[str],
                   validation_conversations: Collection[str], *, accept_ties: bool) -> tuple[DemoPools, int]:
    """The demos a candidate could be scored with, and how many were left out.

    A run of a demo's own conversation never sees it (:func:`memtrace_opt.graph.prompt_parts.withhold_examples`),
    so a demo set cut only from the conversations it would be scored on ties with its parent by
    construction: GEPA's minibatch (the training conversations) must see it for the set to win there,
    or, when ties go on (``accept_ties``), validation must. The quickstart's one conversation both
    trains and selects, so none of its demos can be tested, and the budget goes to rules and lines.
    """
    scored = set(minibatch_conversations) | (set(validation_conversations) if accept_ties else set())
    out: DemoPools = {}
    left = 0
    for component, demos in pools.items():
        kept = [d for d in demos if not d.conversation or scored - {d.conversation}]
        left += len(demos) - len(kept)
        if kept:
            out[component] = kept
    return out, left
