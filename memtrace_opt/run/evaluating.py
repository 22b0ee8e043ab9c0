"""Evaluate a config's memory system on its dataset slice, traced, and write the run directory.

``memtrace-opt eval`` and :func:`memtrace_opt.evaluate` are this function. The run directory is written
conversation by conversation (see :mod:`memtrace_opt.rundir`), so an interrupted run resumes where it
stopped.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from memtrace_opt import rundir as rd
from memtrace_opt.config import RunConfig
from memtrace_opt.lm.base import LMClient
from memtrace_opt.run.assemble import dataset_slice, prepare_run, split_conversations
from memtrace_opt.run.executors import make_executor, refuse_ray_with_injected
from memtrace_opt.run.lms import Injected, build_run_lms
from memtrace_opt.systems.evaluate import EvaluationRun, evaluate_system

__all__ = ["evaluate"]


def evaluate(config: str | Path | RunConfig, *, out: str | Path | None = None, resume: bool = True,
             dataset_path: str | Path | None = None, lms: Mapping[str, LMClient] | None = None,
             resources: Mapping[str, object] | None = None, progress: bool = False,
             force: bool = False) -> EvaluationRun:
    """Run ``config``'s system on its dataset slice (its split's conversations when it has one) and write the
    run dir; the EvaluationRun (``run_dir``, ``results``, ``summary``, ``resumed``).

    ``resume`` skips conversations already finished there (a run dir of a different config is refused unless
    ``force``, which records the change); ``resume=False`` clears the previous results first. ``lms`` (clients
    by role) and ``resources`` (e.g. an embedder) replace the configured models; ``progress`` shows a bar.
    """
    injected = Injected.of(lms, resources)
    cfg, source, run_dir = prepare_run(config, out=out, dataset_path=dataset_path)
    conversations = split_conversations(cfg, dataset_slice(cfg))  # bad data fails before the run dir exists
    refuse_ray_with_injected(cfg, injected, source)
    with rd.run_lock(run_dir, "eval"):
        if resume:
            rd.check_same_config(run_dir, cfg, source, "use --no-resume to overwrite it or --out for a new directory",
                                 force=force)
        else:
            rd.clear_results(run_dir)
        run = build_run_lms(cfg, run_dir, injected)
        rd.write_config(run_dir, cfg)
        return evaluate_system(
            cfg.system.name, conversations, lms=run.lms, run_dir=run_dir, prompts=cfg.system.prompts,
            settings=cfg.system.settings, judge=cfg.eval.judge, dataset=cfg.dataset.name, run_id=cfg.run_name,
            resume=resume, ledger=run.ledger, resources=run.resources, progress=progress,
            executor=make_executor(cfg, run_dir, ledger=run.ledger),
        )
