"""Run (or resume) a config's closed loop and write its run directory.

Library code behind ``memtrace-opt optimize`` and :func:`memtrace_opt.optimize`: evaluate →
attribute → optimize the blamed prompts → validate, round after round, then the held-out comparison
(:mod:`memtrace_opt.loop`). The run dir is checkpointed after every step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from memtrace_opt.config import RunConfig
from memtrace_opt.errors import ConfigError
from memtrace_opt.lm.run_lms import Injected

__all__ = ["read_prompts", "run_optimize"]


def read_prompts(run_dir: str) -> dict[str, str]:
    """A finished run's best prompts by component (``RUN_DIR/prompts/<component>.txt``)."""
    found = {p.stem: p.read_text(encoding="utf-8") for p in sorted((Path(run_dir) / "prompts").glob("*.txt"))}
    if not found:
        raise ConfigError(run_dir, "prompts", "no prompts/*.txt here: --prompts-from needs a finished optimize run")
    return found


def run_optimize(config: str | Path | RunConfig, *, method: str | None = None, resume: bool = True,
                 out: str | None = None, tuning_from: str | None = None, dataset_path: str | None = None,
                 cache_dir: str | None = None, force: bool = False,
                 progress: Callable[[str], None] | None = None,
                 injected: Injected | None = None, prompts_from: str | None = None) -> tuple[Any, Path]:
    """Run (or resume) the loop of ``config``; returns ``(final LoopState, run dir)``. ``progress`` gets the
    loop's progress lines (None: silent); ``injected`` replaces the configured models. ``prompts_from``: a
    finished run whose best prompts (``prompts/*.txt``) are compared with the seed (with method ``none``)."""
    from memtrace_opt import rundir as rd
    from memtrace_opt.assemble import build_context, prepare_run
    from memtrace_opt.executors import refuse_ray_with_injected
    from memtrace_opt.loop import run_loop
    from memtrace_opt.rundir.lock import run_lock

    cfg, source, run_dir = prepare_run(config, out=out, dataset_path=dataset_path, cache_dir=cache_dir)
    refuse_ray_with_injected(cfg, injected, source)
    if tuning_from is not None and not (Path(tuning_from) / "tuning.json").exists():
        raise ConfigError(tuning_from, None, "no tuning.json here: --tuning-from needs a run dir that tuned settings")
    with run_lock(run_dir, "optimize"):
        changed = rd.check_same_config(run_dir, cfg, source, "choose another --out for the changed config",
                                       force=force) if resume else []
        ctx, ledger = build_context(cfg, method=method, run_dir=run_dir, tuning_from=tuning_from, progress=progress,
                                     injected=injected, retest=read_prompts(prompts_from) if prompts_from else None)
        if not resume or changed or not (run_dir / rd.CONFIG_FILE).exists():
            rd.write_config(run_dir, cfg)
        state = run_loop(ctx, resume=resume)
        if ledger is not None:
            rd.write_usage(run_dir, {"ledger": ledger.to_dict(), "loop": state.spend})
    return state, run_dir
