"""What the LM work of a memory system costs, and what speculation and scoped replay save — measured.

Two measurements, each a ratio against the current configuration taken in the same run:

- :func:`measure_variants`: one traced system run per variant, a speculative-decoding mode and/or
  system settings (the first is the baseline), with seconds per ingested turn, question-time LM
  seconds per question and accuracy on the same questions, items extracted per turn, LM seconds,
  generation tokens/s and completion tokens per call per op kind, the share of drafted tokens the model accepted per op kind (when the LM logs its drafts), the
  split of LM time into prefill and decoding with the speed-up bound it implies (when the LM logs
  llama.cpp's timings), and whether every op output is identical to the baseline's (speculation
  must not change text at temperature 0).
- :func:`measure_scoped_replay`: a changed ingestion prompt scored on a few questions by full
  replay and by scoped replay (:mod:`memtrace_opt.graph.replay`): LM calls, executed ops, seconds,
  and whether the scored answers agree.

The LM comes from a factory, so tests run both on scripted models; ``memtrace-opt bench-lm``
(:mod:`.lm_run`) runs them on the embedded model without a disk cache (a cache would time the cache).
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from memtrace_opt.graph import MemoryGraph, Overrides, replay
from memtrace_opt.graph.model import EXTRACTION
from memtrace_opt.lm.base import LMClient
from memtrace_opt.systems.runner import make_rerun, run_conversation

__all__ = ["Variant", "add_draft_acceptance", "add_prefill_decode_split", "differing_outputs",
           "measure_scoped_replay", "measure_variants", "op_kind_stats"]


def op_kind_stats(graph: MemoryGraph) -> dict[str, dict[str, float]]:
    """Per op name: LM calls, prompt and completion tokens, the share of prompt tokens the server reused
    from its KV cache, LM seconds and completion tokens per LM second."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                                             "reused_prompt_tokens": 0, "lm_s": 0.0})
    for op in graph.ops.values():
        for call in op.lm_calls:
            row = out[op.name]
            row["calls"] += 1
            row["prompt_tokens"] += call.prompt_tokens
            row["completion_tokens"] += call.completion_tokens
            row["reused_prompt_tokens"] += call.reused_prompt_tokens
            row["lm_s"] += call.latency_s
    for row in out.values():
        row["lm_s"] = round(row["lm_s"], 3)
        row["tok_s_overall"] = round(row["completion_tokens"] / row["lm_s"], 2) if row["lm_s"] else 0.0
        row["cached_prompt_share"] = (round(row["reused_prompt_tokens"] / row["prompt_tokens"], 3)
                                      if row["prompt_tokens"] else 0.0)
    return dict(out)


def _aligned(graph: MemoryGraph, log: Sequence[Any]) -> list[tuple[str, Any]] | None:
    """``log`` (one entry per computed LM call, in call order) paired with the op name of each of the
    graph's uncached LM calls in execution order; None when the counts differ: a figure read off a
    misaligned log would be wrong, not approximate."""
    calls = [op.name for op in sorted(graph.ops.values(), key=lambda o: o.time) for c in op.lm_calls if not c.cached]
    return list(zip(calls, log)) if len(calls) == len(log) else None


def add_draft_acceptance(ops: dict[str, dict[str, Any]], graph: MemoryGraph,
                         log: Sequence[tuple[int, int]]) -> bool:
    """Add each op kind's drafted tokens, accepted ones and acceptance rate to ``ops`` (``op_kind_stats``'s
    rows) from ``log``, the LM's per-call ``(drafted, accepted)`` in call order. False (nothing added)
    when the log does not line up with the graph's computed calls (:func:`_aligned`)."""
    pairs = _aligned(graph, log)
    if pairs is None:
        return False
    for name, (drafted, accepted) in pairs:
        row = ops[name]
        row["drafted_tokens"] = row.get("drafted_tokens", 0) + drafted
        row["accepted_draft_tokens"] = row.get("accepted_draft_tokens", 0) + accepted
    for row in ops.values():
        if row.get("drafted_tokens"):
            row["draft_acceptance"] = round(row["accepted_draft_tokens"] / row["drafted_tokens"], 3)
    return True


def add_prefill_decode_split(ops: dict[str, dict[str, Any]], graph: MemoryGraph,
                             log: Sequence[tuple[int, float, int, float]]) -> dict[str, Any] | None:
    """Split each op kind's LM time into prefill (prompt tokens computed) and decoding (tokens generated)
    from ``log``, the LM's per-call llama.cpp timings ``(prompt_n, prompt_s, predicted_n, predicted_s)``.

    Why: speculation and batched decoding only shorten decoding. ``decode_share`` bounds what any of them
    can gain (Amdahl: ``1 / (1 - decode_share)`` with decoding made free), and the ratio of prefill to
    decoding tokens/s says how much a batch of drafted tokens costs against one decoded token on this
    machine (near 1: verifying a draft is nearly as dear as generating it). Returns the run's totals
    with those two figures, or None (nothing added) when the log does not line up with the graph.
    """
    pairs = _aligned(graph, log)
    if pairs is None:
        return None
    keys = ("prefill_tokens", "prefill_s", "decode_tokens", "decode_s")
    totals: dict[str, Any] = dict.fromkeys(keys, 0.0)
    for name, entry in pairs:
        row = ops[name]
        for key, value in zip(keys, entry):
            row[key] = row.get(key, 0) + value
            totals[key] += value
    for row in [*ops.values(), totals]:
        if not row.get("decode_s") and not row.get("prefill_s"):
            continue
        row["prefill_s"], row["decode_s"] = round(row["prefill_s"], 3), round(row["decode_s"], 3)
        row["decode_share"] = round(row["decode_s"] / (row["prefill_s"] + row["decode_s"]), 3)
        row["decode_free_bound"] = round(1 / (1 - row["decode_share"]), 2) if row["decode_share"] < 1 else None
    totals["prefill_tokens"], totals["decode_tokens"] = int(totals["prefill_tokens"]), int(totals["decode_tokens"])
    prefill_rate = totals["prefill_tokens"] / totals["prefill_s"] if totals["prefill_s"] else 0.0
    decode_rate = totals["decode_tokens"] / totals["decode_s"] if totals["decode_s"] else 0.0
    totals["prefill_tok_s"], totals["decode_tok_s"] = round(prefill_rate, 1), round(decode_rate, 1)
    totals["prefill_to_decode_speed"] = round(prefill_rate / decode_rate, 2) if decode_rate else None
    return totals


def _ingest_lm_seconds(graph: MemoryGraph) -> float:
    ingest = {s.id for s in graph.sessions.values() if s.kind == "ingest"}
    return sum(c.latency_s for op in graph.ops.values() if op.session in ingest for c in op.lm_calls)


def differing_outputs(a: MemoryGraph, b: MemoryGraph) -> list[str]:
    """Op ids whose output values differ between two runs of the same input (or that only one has)."""
    def outputs(g: MemoryGraph) -> dict[str, Any]:
        return {op.id: {role: g.variables[vid].value for role, vid in op.outputs.items()} for op in g.ops.values()}

    left, right = outputs(a), outputs(b)
    return sorted(k for k in left.keys() | right.keys() if left.get(k) != right.get(k))


@dataclass(frozen=True)
class Variant:
    """One measured run: a label, the speculative-decoding mode of its LM, and system settings over the defaults.

    Why both: a speculative mode must leave every output unchanged (a pure speed lever), a setting
    such as session-level ingestion changes the graph and must report its accuracy beside its speed.
    """

    label: str
    mode: str = "none"
    settings: Mapping[str, Any] = field(default_factory=dict)


def _question_stats(graph: MemoryGraph, results: Sequence[Any]) -> dict[str, Any]:
    """Question-time LM seconds (answer, judge and any question op) and accuracy under the run's judge."""
    ingest = {s.id for s in graph.sessions.values() if s.kind == "ingest"}
    seconds = sum(c.latency_s for op in graph.ops.values() if op.session not in ingest for c in op.lm_calls)
    scores = [r.judge_score for r in results]
    return {"question_lm_s": round(seconds, 2),
            "question_lm_s_per_question": round(seconds / len(results), 3) if results else None,
            "accuracy": round(sum(scores) / len(scores), 4) if scores else None,
            "correct": {r.qa_id: r.judge_score for r in results}}


def _extracted_items(graph: MemoryGraph) -> int:
    """Items (facts, episodes) the extraction ops produced: how much an ingestion setting keeps."""
    total = 0
    for op in graph.ops.values():
        if op.category != EXTRACTION:
            continue
        for vid in op.outputs.values():
            value = graph.variables[vid].value
            total += len(value) if isinstance(value, list) else int(value is not None)
    return total


def measure_variants(system: str, conversation: Any, qas: Sequence[Any], make_lm: Callable[[str], LMClient],
                     variants: Sequence[str | Variant], *, turns: int, judge: str = "deterministic") -> dict[str, Any]:
    """One run per variant (a bare string is a speculative mode with default settings); the first is the
    baseline every ratio is taken against. ``make_lm(mode)`` gives each run a fresh LM, so no run reads
    another's prompt cache; ``judge`` scores the questions (an LLM judge uses the same LM)."""
    runs = [v if isinstance(v, Variant) else Variant(v, v) for v in variants]
    if len({v.label for v in runs}) != len(runs):
        raise ValueError(f"variant labels must differ: {[v.label for v in runs]}")
    rows: dict[str, Any] = {}
    graphs: dict[str, MemoryGraph] = {}
    for variant in runs:
        lm = make_lm(variant.mode)
        started = time.perf_counter()
        run = run_conversation(system, conversation, list(qas), lms={"task": lm, "judge": lm}, judge=judge,
                               settings=dict(variant.settings))
        wall = time.perf_counter() - started
        graphs[variant.label] = run.graph
        ingest_s = _ingest_lm_seconds(run.graph)
        rows[variant.label] = {
            "mode": variant.mode, "settings": dict(variant.settings), "wall_s": round(wall, 2),
            "ingest_lm_s": round(ingest_s, 2), "seconds_per_turn": round(ingest_s / max(1, turns), 3),
            "extracted_per_turn": round(_extracted_items(run.graph) / max(1, turns), 3),
            "failed_ops": sorted(op.id for op in run.graph.ops.values() if op.status == "failed"),
            **_question_stats(run.graph, run.results), "ops": op_kind_stats(run.graph)}
        row = rows[variant.label]
        log = getattr(lm, "draft_log", None)
        if log is not None:
            row["draft_log_matched"] = add_draft_acceptance(row["ops"], run.graph, list(log))
        timings = getattr(lm, "timing_log", None)
        if timings is not None:
            row["prefill_decode"] = add_prefill_decode_split(row["ops"], run.graph, list(timings))
    base = runs[0].label
    for variant in runs:
        diffs = differing_outputs(graphs[base], graphs[variant.label])
        row = rows[variant.label]
        row["identical_outputs"] = not diffs
        row["differing_ops"] = diffs[:10]
        row["speedup_per_turn"] = (round(rows[base]["seconds_per_turn"] / row["seconds_per_turn"], 3)
                                   if row["seconds_per_turn"] else None)
        for name, stats in row["ops"].items():
            before = rows[base]["ops"].get(name, {}).get("lm_s", 0.0)
            stats["speedup"] = round(before / stats["lm_s"], 3) if stats["lm_s"] else None
            stats["completion_tokens_per_call"] = round(stats["completion_tokens"] / stats["calls"], 1)
    return {"system": system, "turns": turns, "questions": len(qas), "judge": judge, "baseline": base,
            "modes": rows, "graph": graphs[base]}


def measure_scoped_replay(system: str, conversation: Any, graph: MemoryGraph, qas: Sequence[Any],
                          changed: Mapping[str, str], lm: LMClient) -> dict[str, Any]:
    """Score ``changed`` prompts on ``qas`` by scoped replay, then by full replay, from ``graph``."""
    rerun = make_rerun(system, conversation, list(qas), graph.meta.get("settings"), "deterministic")
    rows: dict[str, Any] = {}
    answers: dict[str, dict[str, Any]] = {}
    for label, scope in (("scoped", [q.id for q in qas]), ("full", None)):
        started = time.perf_counter()
        result = replay(graph, rerun, overrides=Overrides(prompts=dict(changed)), lms={"task": lm}, scope=scope)
        seconds = time.perf_counter() - started
        rows[label] = {"lm_calls": result.stats.lm_calls, "executed_ops": len(result.stats.executed),
                       "kept_out_of_scope": result.stats.pinned, "seconds": round(seconds, 2)}
        g = result.graph
        answers[label] = {q.id: g.value(g.latest_id(f"answer:{q.id}")) for q in qas}
    full, scoped = rows["full"], rows["scoped"]
    return {
        "questions": [q.id for q in qas], "changed_prompts": sorted(changed), **rows,
        "ratio_lm_calls": round(scoped["lm_calls"] / full["lm_calls"], 3) if full["lm_calls"] else None,
        "ratio_seconds": round(scoped["seconds"] / full["seconds"], 3) if full["seconds"] else None,
        "same_answers": answers["scoped"] == answers["full"],
    }
