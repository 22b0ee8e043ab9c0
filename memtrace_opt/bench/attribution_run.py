"""One attribution-benchmark run: systems run on config slices, cases built, every method scored, files written.

Behind ``memtrace-opt bench-attribution``. Runs each chosen memory system on the configs' dataset
slices, builds cases with ground truth (fault injection into correct answers, unambiguous real
failures, audit-flagged gold answers; :class:`~memtrace_opt.bench.cases.CaseBuilder`), runs every
method on the same cases with the same LM (:func:`~memtrace_opt.bench.attribution.run_methods`), and
writes the JSON payload (``{"rows": [...]}``, one row per method with per-system/type/source
breakdowns) and a MemTraceBench-style directory of the cases.

With the embedded 1.5B model on two cores every system run and every LLM method is slow (see
NOTES.md §5): size ``max_cases`` and the dataset slice accordingly, or point ``models`` at a server.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Sequence

from memtrace_opt import rundir as rd
from memtrace_opt.attribution.evidence import default_embed
from memtrace_opt.attribution.methods import make_attribution_method, pick_embed
from memtrace_opt.bench.attribution import bench_payload, evidence_recall, export_bench, run_methods
from memtrace_opt.bench.cases import CaseBuilder
from memtrace_opt.bench.choices import ALL_METHODS
from memtrace_opt.bench.inject_hard import HARD_KINDS
from memtrace_opt.config import load_config
from memtrace_opt.run.assemble import load_conversations
from memtrace_opt.run.attributing import build_lms
from memtrace_opt.systems.runner import make_rerun, run_conversation

__all__ = ["bench_methods", "run_attribution_bench"]


def bench_methods(names: list[str], lms: dict[str, Any], evidence: str, embed: Any,
                  max_replay_calls: int | None = None) -> dict[str, Any]:
    """The benchmark's methods by name, each from :func:`~memtrace_opt.attribution.methods.make_attribution_method`
    (``tracing+cf`` is tracing verified by counterfactual replay, re-bound to each case's rerun; ``tracing+llm``
    is tracing with the LLM content judge)."""
    return {name: make_attribution_method(name, lms, evidence=evidence, embed=embed, max_replay_calls=max_replay_calls)
            for name in names}


def _settings(cfg: Any, system: str) -> dict[str, Any]:
    """The config's settings for its own system; only ``top_k`` carries over to the others."""
    if system == cfg.system.name:
        return dict(cfg.system.settings)
    top_k = cfg.system.settings.get("top_k")
    return {"top_k": top_k} if top_k is not None else {}


def run_attribution_bench(
    config: str | Sequence[str], *, systems: list[str] | None = None, methods: list[str] | None = None,
    max_cases: int = 100, max_real: int = 50, real: bool = True, evidence: str = "annotated", out: str | None = None,
    export: str | None = None, embed: Any = "default", focus: bool = True, max_replay_calls: int | None = None,
    suite: str = "easy", progress: Callable[[str], None] | None = None, injected: Any = None,
) -> dict[str, Any]:
    """Build the cases, run the methods, write the JSON and the benchmark directory; returns the payload.

    Several configs pool their cases (a small dataset alone offers too few correct answers to inject
    into): the first config gives the models, cache, run directory and systems' settings; every
    config gives its dataset slice and judge. ``focus`` replays each injection on ingestion plus the
    case's own question (False: the whole conversation, every question re-answered).
    ``max_replay_calls`` caps the LM calls of each injection and counterfactual replay (a Mem0
    ingestion fault re-decides every later memory update); a capped injection is a counted skip.
    ``suite``: ``easy`` (evidence dropped, one case per error type) or ``hard`` (the subtler classes
    of :mod:`memtrace_opt.bench.inject_hard`, reported per class in ``by_class``). ``progress`` gets
    progress lines (None: silent); ``injected`` replaces the configured models.
    """
    say = progress or _silent
    configs = [config] if isinstance(config, str) else list(config)
    cfgs = [load_config(c) for c in configs]
    cfg = cfgs[0]
    systems = systems or [cfg.system.name]
    run_dir = cfg.run_dir
    lms, resources = build_lms(cfg, run_dir, injected)
    per_system = 5 if suite == "easy" else len(HARD_KINDS)
    builder = CaseBuilder(per_type=max(1, math.ceil(max_cases / (len(systems) * per_system))),
                          max_real=max_real if real else 0, max_replay_calls=max_replay_calls, suite=suite)
    for slice_cfg in cfgs:
        _add_slice(builder, slice_cfg, cfg, systems, lms, resources, real=real, focus=focus, say=say)
    embed_fn = pick_embed(embed, resources)
    chosen = bench_methods(methods or list(ALL_METHODS), lms, evidence, embed_fn, max_replay_calls)
    say(f"{len(builder.cases)} cases; running {', '.join(chosen)}")
    results = run_methods(builder.cases, chosen, lms=lms,
                          progress=lambda name, i: say(f"{name}: {i}/{len(builder.cases)} cases"))
    payload = bench_payload(results, skipped=builder.skipped_summary())
    payload["pseudo_evidence_recall"] = evidence_recall(builder.cases, default_embed if embed_fn == "default" else embed_fn)
    payload["config"] = {"systems": systems, "max_cases": max_cases, "evidence": evidence,
                         "focused_replay": focus, "max_replay_calls": max_replay_calls, "suite": suite,
                         "datasets": [_slice_label(c) for c in cfgs], "judges": [c.eval.judge for c in cfgs]}
    export_dir = Path(export) if export else run_dir / "attribution_bench"
    payload["exported"] = [str(p) for p in export_bench(builder.cases, export_dir)]
    payload["out"] = str(Path(out) if out else run_dir / "attribution_bench.json")
    rd.write_json(Path(payload["out"]), payload)
    return payload


def _add_slice(builder: CaseBuilder, slice_cfg: Any, main_cfg: Any, systems: list[str], lms: dict[str, Any],
               resources: dict[str, Any], *, real: bool, focus: bool, say: Callable[[str], None]) -> None:
    """Run every system on one config's conversations and add their cases (until the quotas are met)."""
    conversations = list(load_conversations(slice_cfg).values())
    judge = slice_cfg.eval.judge
    for system in systems:
        settings = _settings(main_cfg, system)
        prompts = dict(main_cfg.system.prompts) if system == main_cfg.system.name else None
        for conv in conversations:
            if builder.full([system]):
                break
            qas = list(conv.scored_qa())
            say(f"running {system} on {conv.id}")
            run = run_conversation(system, conv, qas, lms=lms, prompts=prompts, settings=settings, judge=judge,
                                   resources=resources)

            def rerun_for(subset: Sequence[Any], system: str = system, conv: Any = conv,
                          settings: dict[str, Any] = settings) -> Any:
                return make_rerun(system, conv, subset, settings, judge, resources=resources)

            builder.add_run(run.graph, qas, rerun_for(qas), lms, system=system, real=real,
                            focus=rerun_for if focus else None)


def _silent(message: str) -> None:
    """The progress callback of a quiet run."""


def _slice_label(cfg: Any) -> str:
    """``dataset[conversations, sessions]``: what one config contributed, for the JSON."""
    d = cfg.dataset
    parts = [",".join(d.conversations) if d.conversations else "all"]
    if d.max_sessions:
        parts.append(f"{d.max_sessions} sessions")
    return f"{d.name}[{'; '.join(parts)}]"
