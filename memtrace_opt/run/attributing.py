"""Attribute a finished run's failures: load its graphs and dataset, build the method, write ``blame.json``.

``memtrace-opt attribute``, ``optimize``'s held-out attribution and :func:`memtrace_opt.attribute` are
this function: it reads the run's graphs (and, through its saved config, the dataset's evidence
annotations and audit flags), attributes each failed question with the chosen method, verifies
tracing's blame by counterfactual replay when the config (or the caller) says so, and writes
``RUN_DIR/blame.json`` (a :class:`~memtrace_opt.rundir.BlameReport`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from memtrace_opt import rundir as rd
from memtrace_opt.attribution.aggregate import aggregate
from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.attribution.counterfactual import CounterfactualAttributor
from memtrace_opt.attribution.failures import collect_failures
from memtrace_opt.attribution.methods import AttributionMethod, EmbedChoice, make_attribution_method, pick_embed
from memtrace_opt.attribution.tracing import TracingAttributor
from memtrace_opt.config import RunConfig
from memtrace_opt.data.model import Conversation
from memtrace_opt.errors import ConfigError, DatasetError
from memtrace_opt.graph.io_json import load_json
from memtrace_opt.graph.model import MemoryGraph
from memtrace_opt.graph.replay import Rerun
from memtrace_opt.lm.base import LMClient
from memtrace_opt.run.assemble import load_conversations
from memtrace_opt.run.lms import Injected, RunLMs, build_run_lms
from memtrace_opt.systems.registry import get_system
from memtrace_opt.systems.runner import make_rerun

__all__ = ["EVIDENCE_MODES", "LoadedRun", "attribute", "build_lms", "load_run"]

EVIDENCE_MODES = ("annotated", "pseudo", "auto")


@dataclass
class LoadedRun:
    """A run directory as attribution reads it: its config (None without config.yaml), its graphs, the
    dataset's conversations by id, and notes on what was missing."""

    cfg: RunConfig | None
    graphs: list[MemoryGraph]
    conversations: dict[str, Conversation]
    notes: list[str] = field(default_factory=list)


def build_lms(cfg: RunConfig | None, cache_dir: Path,
              injected: Injected | None = None) -> tuple[dict[str, LMClient], dict[str, object]]:
    """``(lms by role, resources)`` for attribution: the injected ones, or built from ``cfg.models`` (attribution
    uses the reflection model); a ConfigError when there is neither."""
    if cfg is None and injected is None:
        raise ConfigError("config.yaml", None, "an LM is needed (counterfactual replay or an LLM method) but the run "
                                               "directory has no config.yaml naming models; use --no-counterfactual")
    run = build_run_lms(cfg, cache_dir, injected)
    return run.lms, run.resources


def load_run(run_dir: Path) -> LoadedRun:
    """What attribution needs of a run directory (DatasetError when it holds no graphs)."""
    paths = rd.list_graphs(run_dir)
    if not paths:
        raise DatasetError(str(run_dir), None, "no graphs/*.jsonl.gz: run `memtrace-opt eval` first")
    loaded = LoadedRun(None, [], {})
    if (run_dir / rd.CONFIG_FILE).exists():
        loaded.cfg = rd.read_config(run_dir)
        loaded.conversations = load_conversations(loaded.cfg)
    else:
        loaded.notes.append("no config.yaml: no dataset annotations, evidence is pseudo-evidence")
    loaded.graphs = [load_json(p) for p in paths]
    return loaded


def attribute(run_dir: str | Path, *, method: str = "tracing", counterfactual: bool | None = None,
              evidence: str | None = None, embed: EmbedChoice = "default", llm_content: bool = False,
              progress: Callable[[str], None] | None = None, lms: Mapping[str, LMClient] | None = None,
              resources: Mapping[str, object] | None = None) -> rd.BlameReport:
    """Attribute every failed question of the run; writes ``blame.json`` and returns it as a BlameReport.

    ``counterfactual`` and ``evidence`` default to the run config's ``attribution`` section (the one
    place they are set for eval, attribute and optimize alike); a run without a config verifies by
    replay and reads annotated evidence where there is some (``auto``). ``progress`` hears one line
    per conversation (replays take minutes on a CPU model). ``lms`` (clients by role) and
    ``resources`` replace the configured models.
    """
    if evidence is not None and evidence not in EVIDENCE_MODES:
        raise ConfigError("--evidence", None, f"expected annotated, pseudo or auto, got {evidence!r}")
    injected = Injected.of(lms, resources)
    root = Path(run_dir)
    run = load_run(root)
    section = run.cfg.attribution if run.cfg is not None else None
    if counterfactual is None:
        counterfactual = bool(section.counterfactual) if section is not None else True
    if evidence is None:
        evidence = str(section.evidence) if section is not None else "auto"
    needs_lm = counterfactual or llm_content or method != "tracing"
    roles, found = build_lms(run.cfg, root, injected) if needs_lm else ({}, dict(resources or {}))
    base = make_attribution_method(method, roles, evidence=evidence, embed=pick_embed(embed, found),
                                   llm_content=llm_content, variants=False)
    verify = counterfactual and method == "tracing"
    signals, failures, by_case = _attribute_graphs(run, base, RunLMs(roles, None, found), verify, progress)
    for case_id, why in failures:
        print(f"memtrace-opt: error: counterfactual verification of {case_id} failed: {why}", file=sys.stderr)
    report = rd.BlameReport(method=base.name, counterfactual=verify, evidence=evidence,
                            signals=tuple(signals), notes=tuple(run.notes), verification_failed=len(failures),
                            aggregate=aggregate(signals, by_case, op_settings=_op_settings(run.graphs)))
    rd.write_blame(root, report)
    return report


def _attribute_graphs(run: LoadedRun, base: AttributionMethod, built: RunLMs, verify: bool,
                      progress: Callable[[str], None] | None
                      ) -> tuple[list[BlameSignal], list[tuple[str, str]], dict[str, MemoryGraph]]:
    """``(signals, failed verifications, graph of each case)`` over every graph of the run."""
    signals: list[BlameSignal] = []
    by_case: dict[str, MemoryGraph] = {}
    failures: list[tuple[str, str]] = []
    for graph in run.graphs:
        conv_id = str(graph.meta.get("conversation_id") or graph.meta.get("conversation") or "")
        conv = run.conversations.get(conv_id)
        attributor: AttributionMethod = base
        rerun = _rerun(graph, conv, built.resources, run.notes) if verify else None
        if rerun is not None and isinstance(base, TracingAttributor):
            attributor = CounterfactualAttributor(base, rerun, built.lms)
        cases = collect_failures(graph, conv.qa if conv is not None else None)
        if progress is not None:
            progress(f"attributing {conv_id}: {len(cases)} failed question(s)"
                     + (", verifying by replay" if attributor is not base else ""))
        for case in cases:
            signal = attributor.attribute(graph, case)
            signals.append(signal)
            by_case[signal.case_id] = graph
        failures += getattr(attributor, "verification_failures", [])
    return signals, failures, by_case


def _op_settings(graphs: Sequence[MemoryGraph]) -> Mapping[str, tuple[str, ...]]:
    """The run's system's ``op_settings`` (empty for a run of an unknown system or with no graph)."""
    names = {str(g.meta.get("system")) for g in graphs if g.meta.get("system")}
    if len(names) != 1:
        return {}
    try:
        op_settings: Mapping[str, tuple[str, ...]] = get_system(names.pop()).op_settings
    except ConfigError:
        return {}  # a third-party system not importable here: blame still works, without setting hints
    return op_settings


def _rerun(graph: MemoryGraph, conv: Conversation | None, resources: Mapping[str, object],
           notes: list[str]) -> Rerun | None:
    """The run's driver for replay, or None (with a note) when the conversation is unknown."""
    if conv is None:
        notes.append(f"{graph.meta.get('conversation_id')}: conversation not in the dataset; no counterfactual check")
        return None
    wanted = list(graph.meta.get("qa_ids") or [])
    qas = [q for q in conv.qa if q.id in set(wanted)] if wanted else None
    rerun: Rerun = make_rerun(str(graph.meta["system"]), conv, qas, graph.meta.get("settings"),
                              str(graph.meta.get("judge", "llm")), use_audit=bool(graph.meta.get("use_audit")),
                              resources=resources)
    return rerun
