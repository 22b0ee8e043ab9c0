"""The Python API: evaluate, attribute, optimize and compare from a script or a notebook.

Each function takes what the matching CLI command takes — a config file *or* a
:class:`~memtrace_opt.config.RunConfig` built in code — and returns the result object instead of
printing a table; the CLI commands are thin layers over the same functions. ``lms`` (clients by
role: ``task``, ``judge``, ``reflection``) and ``resources`` (e.g. an embedder) replace the models
the config names, which is how a user tests a system without a model::

    from memtrace_opt import evaluate, attribute
    from memtrace_opt.testing import ScriptedLM

    run = evaluate("my_memory.yaml", lms={"task": ScriptedLM([], default="Paris"), "judge": ScriptedLM([])})
    blame = attribute(run.run_dir, lms=...)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memtrace_opt.config import RunConfig
from memtrace_opt.lm.run_lms import Injected

__all__ = ["attribute", "compare", "evaluate", "optimize"]


def evaluate(config: str | Path | RunConfig, *, out: str | Path | None = None, resume: bool = True,
             dataset_path: str | Path | None = None, lms: Mapping[str, Any] | None = None,
             resources: Mapping[str, Any] | None = None, progress: bool = False, force: bool = False) -> Any:
    """Run the config's memory system on its dataset slice; an ``EvaluationRun`` (``run_dir``, ``results``,
    ``summary``). Same as ``memtrace-opt eval``."""
    from memtrace_opt.eval_run import run_eval

    return run_eval(config, resume=resume, out=None if out is None else str(out),
                    dataset_path=None if dataset_path is None else str(dataset_path), progress=progress,
                    force=force, injected=Injected.of(lms, resources))


def attribute(run_dir: str | Path, *, method: str = "tracing", counterfactual: bool | None = None,
              evidence: str | None = None, lms: Mapping[str, Any] | None = None,
              resources: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Blame every failed question of an evaluated run; the ``blame.json`` payload (also written there).
    Same as ``memtrace-opt attribute``: ``counterfactual`` and ``evidence`` default to the run config's."""
    from memtrace_opt.blame_run import attribute_run

    return attribute_run(run_dir, method=method, counterfactual=counterfactual, evidence=evidence,
                         injected=Injected.of(lms, resources))


def optimize(config: str | Path | RunConfig, *, method: str | None = None, out: str | Path | None = None,
             resume: bool = True, lms: Mapping[str, Any] | None = None, resources: Mapping[str, Any] | None = None,
             tuning_from: str | Path | None = None, cache_dir: str | Path | None = None,
             force: bool = False) -> Any:
    """Run (or resume) the closed loop; the final ``LoopState`` (``state.final`` holds the held-out
    comparison, the run dir the rounds, prompts and report files). Same as ``memtrace-opt optimize``
    (which resumes by default too)."""
    from memtrace_opt.optimize_run import run_optimize

    state, _ = run_optimize(config, method=method, resume=resume, out=None if out is None else str(out),
                            tuning_from=None if tuning_from is None else str(tuning_from),
                            cache_dir=None if cache_dir is None else str(cache_dir), force=force,
                            injected=Injected.of(lms, resources))
    return state


def compare(run_dirs: Sequence[str | Path]) -> list[Any]:
    """Held-out accuracy of finished ``optimize`` runs, with paired-bootstrap gain, CI and p-value per run
    (``CompareRow``). Same as ``memtrace-opt compare``."""
    from memtrace_opt.loop.compare import compare_runs

    return compare_runs(list(run_dirs))
