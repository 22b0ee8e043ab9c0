"""memtrace-opt: trace why an LLM memory system answered wrong, blame the faulty operation, fix its prompt.

A run flows trace → graph → attribute → optimize → report: a system (``systems/``) runs traced into a
memory evolution graph (:mod:`.graph`), each failed question is blamed on an operation
(:mod:`.attribution`), the loop optimizes the blamed prompts (:mod:`.loop`, ``optimizers/``), and the
report shows it (:mod:`.report`). :mod:`.run` drives those steps from a config and writes the run
directory (:mod:`.rundir`); the CLI (:mod:`.cli`, ``commands/``) is a thin layer over :mod:`.run`.

The public API, by layer (imports flow downward):

- data and evaluation: :func:`load_dataset`, :func:`dataset_stats`, :func:`select`, :class:`RunConfig`,
  :func:`load_config`, :func:`token_f1`, :func:`bleu1`, :func:`bootstrap_ci`, :func:`paired_bootstrap`;
- LM layer: :class:`LMClient`, :class:`LMResult`, :func:`build_lm`, :func:`build_roles`, :func:`as_dspy_lm`;
- graph: :class:`MemoryGraph`, :class:`Tracer`, :func:`operation`, :class:`New`, :class:`Next`,
  :class:`End`, :class:`Overrides`, :func:`replay`, :func:`save_json`, :func:`load_json`, :func:`validate`;
- systems: :class:`MemorySystem`, :func:`get_system`, :func:`system_names`, :func:`run_conversation`,
  :func:`make_rerun`, :func:`published_prompts` (the seed ``system.seed: published`` starts from);
- attribution: :class:`BlameSignal`;
- runs (:mod:`memtrace_opt.run`): :func:`evaluate`, :func:`attribute`, :func:`optimize`, :func:`compare` (over a
  config file or a RunConfig; typed results; ``lms=`` replaces the configured models;
  :mod:`memtrace_opt.testing` has a ScriptedLM);
- campaigns: :func:`run_campaign`, :func:`campaign_progress` (stop anywhere, continue on another clone);
- prompts: :func:`compose_prompt`, :func:`split_prompt` (the rules and worked examples the optimizer adds);
- report: :func:`render_report`.

Names resolve lazily on first use, so ``import memtrace_opt`` loads no model, no torch and no mem0.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # data, config, evaluation
    "load_dataset": "memtrace_opt.data",
    "dataset_stats": "memtrace_opt.data",
    "select": "memtrace_opt.data",
    "RunConfig": "memtrace_opt.config",
    "load_config": "memtrace_opt.config",
    "list_examples": "memtrace_opt.examples",
    "write_example": "memtrace_opt.examples",
    "token_f1": "memtrace_opt.eval.metrics",
    "bleu1": "memtrace_opt.eval.metrics",
    "bootstrap_ci": "memtrace_opt.eval.metrics",
    "paired_bootstrap": "memtrace_opt.eval.metrics",
    # the Python API (the CLI is a thin layer over it)
    "evaluate": "memtrace_opt.run",
    "attribute": "memtrace_opt.run",
    "optimize": "memtrace_opt.run",
    "compare": "memtrace_opt.run",
    # campaigns: experiments continued from committed state on any clone
    "run_campaign": "memtrace_opt.campaign",
    "campaign_progress": "memtrace_opt.campaign",
    "CampaignProgress": "memtrace_opt.campaign",
    # prompt components as instruction + learned rules + worked examples
    "compose_prompt": "memtrace_opt.graph.prompt_parts",
    "split_prompt": "memtrace_opt.graph.prompt_parts",
    # LM layer
    "LMClient": "memtrace_opt.lm.base",
    "LMResult": "memtrace_opt.lm.base",
    "ModelConfig": "memtrace_opt.lm.config",
    "build_lm": "memtrace_opt.lm.factory",
    "build_roles": "memtrace_opt.lm.factory",
    "as_dspy_lm": "memtrace_opt.lm.dspy_bridge",
    # graph
    "MemoryGraph": "memtrace_opt.graph",
    "Tracer": "memtrace_opt.graph",
    "operation": "memtrace_opt.graph",
    "New": "memtrace_opt.graph",
    "Next": "memtrace_opt.graph",
    "End": "memtrace_opt.graph",
    "Overrides": "memtrace_opt.graph",
    "replay": "memtrace_opt.graph",
    "save_json": "memtrace_opt.graph.io_json",
    "load_json": "memtrace_opt.graph.io_json",
    "validate": "memtrace_opt.graph.validate",
    # systems
    "MemorySystem": "memtrace_opt.systems.base",
    "get_system": "memtrace_opt.systems.registry",
    "system_names": "memtrace_opt.systems.registry",
    "run_conversation": "memtrace_opt.systems.runner",
    "make_rerun": "memtrace_opt.systems.runner",
    "published_prompts": "memtrace_opt.systems.published",
    # attribution and report
    "BlameSignal": "memtrace_opt.attribution.blame",
    "ChainedFault": "memtrace_opt.attribution.blame",
    "render_report": "memtrace_opt.report",
    # errors
    "MemtraceError": "memtrace_opt.errors",
    "ConfigError": "memtrace_opt.errors",
    "DatasetError": "memtrace_opt.errors",
    "GraphError": "memtrace_opt.errors",
    "LMError": "memtrace_opt.errors",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'memtrace_opt' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
