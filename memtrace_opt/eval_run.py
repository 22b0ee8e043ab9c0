"""Evaluate a config's memory system on its dataset slice, traced, and write the run directory.

Library code behind ``memtrace-opt eval`` and :func:`memtrace_opt.evaluate`. The run directory is
written conversation by conversation (see :mod:`memtrace_opt.run_dir`), so an interrupted run
resumes where it stopped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memtrace_opt.config import RunConfig
from memtrace_opt.lm.run_lms import Injected, build_run_lms

__all__ = ["run_eval"]


def run_eval(config: str | Path | RunConfig, *, resume: bool = True, out: str | None = None,
             dataset_path: str | None = None, progress: bool = True, force: bool = False,
             injected: Injected | None = None) -> Any:
    """Evaluate ``config``'s system on its dataset slice (its split's conversations when it has one) and
    write the run dir; the EvaluationRun. ``injected`` replaces the configured models."""
    from memtrace_opt import run_dir as rd
    from memtrace_opt.assemble import dataset_slice, prepare_run, split_conversations
    from memtrace_opt.executors import make_executor, refuse_ray_with_injected
    from memtrace_opt.run_lock import run_lock
    from memtrace_opt.systems.evaluate import evaluate_system

    cfg, source, run_dir = prepare_run(config, out=out, dataset_path=dataset_path)
    conversations = split_conversations(cfg, dataset_slice(cfg))  # bad data fails before the run dir exists
    refuse_ray_with_injected(cfg, injected, source)
    with run_lock(run_dir, "eval"):
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
