"""Attribute a finished run's failures: load its graphs and dataset, build the method, write ``blame.json``.

Library code behind ``memtrace-opt attribute``, ``optimize``'s held-out attribution and
:func:`memtrace_opt.attribute`: reads the run's graphs (and, through its saved config, the dataset's
evidence annotations and audit flags), attributes each failed question with the chosen method,
verifies tracing's blame by counterfactual replay when the config (or the caller) says so, and
writes ``RUN_DIR/blame.json`` (``{"signals": [BlameSignal dicts], "aggregate": {...}}``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Callable

from memtrace_opt.attribution.methods import make_attribution_method, pick_embed
from memtrace_opt.errors import ConfigError, DatasetError
from memtrace_opt.lm.run_lms import Injected, build_run_lms

__all__ = ["attribute_run", "blame_counts", "build_lms", "load_conversations", "load_run"]


def build_lms(cfg: Any, cache_dir: Path, injected: Injected | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(lms by role, resources)``: the injected ones, or built from ``cfg.models`` (attribution uses reflection)."""
    if cfg is None and injected is None:
        raise ConfigError("config.yaml", None, "an LM is needed (counterfactual replay or an LLM method) but the run "
                                               "directory has no config.yaml naming models; use --no-counterfactual")
    run = build_run_lms(cfg, cache_dir, injected)
    return run.lms, run.resources


def load_conversations(cfg: Any) -> dict[str, Any]:
    """The run's conversations by id (from its dataset config)."""
    from memtrace_opt.assemble import dataset_slice

    return {c.id: c for c in dataset_slice(cfg).conversations}


def load_run(run_dir: Path) -> tuple[Any, list[Any], dict[str, Any], list[str]]:
    """``(config or None, graphs, conversations by id, notes)`` of a run directory."""
    from memtrace_opt import rundir as rd
    from memtrace_opt.graph.io_json import load_json

    paths = rd.list_graphs(run_dir)
    if not paths:
        raise DatasetError(str(run_dir), None, "no graphs/*.jsonl.gz: run `memtrace-opt eval` first")
    notes: list[str] = []
    cfg, conversations = None, {}
    if (run_dir / rd.CONFIG_FILE).exists():
        cfg = rd.read_config(run_dir)
        conversations = load_conversations(cfg)
    else:
        notes.append("no config.yaml: no dataset annotations, evidence is pseudo-evidence")
    return cfg, [load_json(p) for p in paths], conversations, notes


def attribute_run(run_dir: str | Path, *, method: str = "tracing", counterfactual: bool | None = None,
                  evidence: str | None = None, embed: Any = "default", llm_content: bool = False,
                  progress: Callable[[str], None] | None = None, injected: Injected | None = None) -> dict[str, Any]:
    """Attribute every failed question of the run; writes and returns the ``blame.json`` payload.

    ``counterfactual`` and ``evidence`` default to the run config's ``attribution`` section (the one
    place they are set for eval, attribute and optimize alike); a run without a config verifies by
    replay and reads annotated evidence where there is some (``auto``). ``progress`` hears one line
    per conversation (replays take minutes on a CPU model). ``injected`` replaces the configured models.
    """
    from memtrace_opt import rundir as rd
    from memtrace_opt.attribution.aggregate import aggregate
    from memtrace_opt.attribution.counterfactual import CounterfactualAttributor
    from memtrace_opt.attribution.failures import collect_failures
    from memtrace_opt.rundir.schemas import BLAME, stamp

    root = Path(run_dir)
    cfg, graphs, conversations, notes = load_run(root)
    section = getattr(cfg, "attribution", None)
    if counterfactual is None:
        counterfactual = bool(getattr(section, "counterfactual", True))
    if evidence is None:
        evidence = str(getattr(section, "evidence", "auto"))
    needs_lm = counterfactual or llm_content or method != "tracing"
    lms, resources = build_lms(cfg, root, injected) if needs_lm else ({}, dict(injected.resources) if injected else {})
    base = make_attribution_method(method, lms, evidence=evidence, embed=pick_embed(embed, resources),
                                   llm_content=llm_content, variants=False)
    signals, by_case = [], {}
    failures: list[tuple[str, str]] = []
    for graph in graphs:
        conv_id = str(graph.meta.get("conversation_id") or graph.meta.get("conversation") or "")
        conv = conversations.get(conv_id)
        attributor = base
        if counterfactual and method == "tracing":
            rerun = _rerun(graph, conv, resources, notes)
            if rerun is not None:
                attributor = CounterfactualAttributor(base, rerun, {k: v for k, v in lms.items() if v is not None})
        cases = collect_failures(graph, conv.qa if conv is not None else None)
        if progress is not None:
            progress(f"attributing {conv_id}: {len(cases)} failed question(s)"
                     + (", verifying by replay" if attributor is not base else ""))
        for case in cases:
            signal = attributor.attribute(graph, case)
            signals.append(signal)
            by_case[signal.case_id] = graph
        failures += getattr(attributor, "verification_failures", [])
    for case_id, why in failures:
        print(f"memtrace-opt: error: counterfactual verification of {case_id} failed: {why}", file=sys.stderr)
    payload = stamp(BLAME, {"method": base.name, "counterfactual": counterfactual and method == "tracing",
                            "evidence": evidence, "notes": notes, "verification_failed": len(failures),
                            "signals": [s.to_dict() for s in signals],
                            "aggregate": aggregate(signals, by_case, op_settings=_op_settings(graphs))})
    rd.write_json(root / "blame.json", payload)
    return payload


def _op_settings(graphs: Sequence[Any]) -> Mapping[str, tuple[str, ...]]:
    """The run's system's ``op_settings`` (empty for a run of an unknown system or with no graph)."""
    from memtrace_opt.systems.registry import get_system

    names = {str(g.meta.get("system")) for g in graphs if g.meta.get("system")}
    if len(names) != 1:
        return {}
    try:
        return get_system(names.pop()).op_settings
    except ConfigError:
        return {}  # a third-party system not importable here: blame still works, without setting hints


def _rerun(graph: Any, conv: Any, resources: Mapping[str, Any], notes: list[str]) -> Any:
    """The run's driver for replay, or None (with a note) when the conversation is unknown."""
    from memtrace_opt.systems.runner import make_rerun

    if conv is None:
        notes.append(f"{graph.meta.get('conversation_id')}: conversation not in the dataset; no counterfactual check")
        return None
    wanted = list(graph.meta.get("qa_ids") or [])
    qas = [q for q in conv.qa if q.id in set(wanted)] if wanted else None
    return make_rerun(str(graph.meta["system"]), conv, qas, graph.meta.get("settings"),
                      str(graph.meta.get("judge", "llm")), use_audit=bool(graph.meta.get("use_audit")),
                      resources=resources)


def blame_counts(payload: Mapping[str, Any]) -> str:
    """``"8 AnnotationError, 61 ResponseError"``: how many failures each error type got ("no failures")."""
    counts: dict[str, int] = {}
    for signal in payload["signals"]:
        kind = signal["error_type"] or "unattributed"
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "no failures"
