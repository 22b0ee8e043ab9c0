"""Run (or resume) a config's closed loop, then blame the final prompts' held-out failures.

``memtrace-opt optimize`` and :func:`memtrace_opt.optimize` are this function, step for step: build
the loop from the config (:func:`build_context`), run it (evaluate → attribute → optimize the blamed
prompts → validate, round after round, then the held-out comparison; :mod:`memtrace_opt.loop`),
record the LM usage, and attribute the held-out failures of the final prompts (``blame.json``), so
the run's report says why each one failed. The run dir is checkpointed after every step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from memtrace_opt import rundir as rd
from memtrace_opt.config import RunConfig
from memtrace_opt.errors import ConfigError
from memtrace_opt.eval.judge import make_judge
from memtrace_opt.lm.base import LMClient
from memtrace_opt.lm.usage import UsageLedger
from memtrace_opt.loop import LoopContext, LoopPlan, LoopState, run_loop
from memtrace_opt.loop.blaming import make_attributor
from memtrace_opt.loop.compare import HeldoutEffect, heldout_effect, load_final
from memtrace_opt.loop.plan import split_dataset
from memtrace_opt.loop.tuning import TUNING_FILE
from memtrace_opt.optimizers.backend import RunnerBackend
from memtrace_opt.run.assemble import dataset_slice, prepare_run
from memtrace_opt.run.attributing import attribute
from memtrace_opt.run.executors import make_executor, refuse_ray_with_injected
from memtrace_opt.run.lms import Injected, build_run_lms

__all__ = ["OptimizeRun", "build_context", "optimize", "read_prompts"]


@dataclass(frozen=True)
class OptimizeRun:
    """A finished loop run: its final state (``state.final`` holds the held-out comparison), its run dir,
    the held-out effect of the best prompts (None without held-out questions) and the blame of their
    held-out failures (None when not attributed)."""

    state: LoopState
    run_dir: Path
    effect: HeldoutEffect | None = None
    heldout_blame: rd.BlameReport | None = None


def read_prompts(run_dir: str | Path) -> dict[str, str]:
    """A finished run's best prompts by component (``RUN_DIR/prompts/<component>.txt``)."""
    folder = Path(run_dir) / rd.PROMPTS_DIR
    found = {p.stem: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.txt"))}
    if not found:
        raise ConfigError(str(run_dir), "prompts", "no prompts/*.txt here: --prompts-from needs a finished optimize run")
    return found


def optimize(config: str | Path | RunConfig, *, method: str | None = None, out: str | Path | None = None,
             resume: bool = True, tuning_from: str | Path | None = None, dataset_path: str | Path | None = None,
             cache_dir: str | Path | None = None, force: bool = False, prompts_from: str | Path | None = None,
             attribute_heldout: bool = True, progress: Callable[[str], None] | None = None,
             lms: Mapping[str, LMClient] | None = None, resources: Mapping[str, object] | None = None) -> OptimizeRun:
    """Run (or resume) the loop of ``config``, then attribute the final prompts' held-out failures.

    ``method`` runs a baseline instead of the config's; ``resume`` continues the run checkpointed in the
    run dir (a changed config is refused unless ``force``, which records it); ``tuning_from`` reuses
    another run's tuned settings; ``prompts_from`` (with method ``none``) compares another finished
    run's best prompts with the seed on this config's held-out set. ``attribute_heldout=False`` skips the
    held-out attribution. ``progress`` gets the loop's progress lines (None: silent); ``lms`` and
    ``resources`` replace the configured models.
    """
    injected = Injected.of(lms, resources)
    cfg, source, run_dir = prepare_run(config, out=out, dataset_path=dataset_path, cache_dir=cache_dir)
    refuse_ray_with_injected(cfg, injected, source)
    if tuning_from is not None and not (Path(tuning_from) / TUNING_FILE).exists():
        raise ConfigError(str(tuning_from), None, "no tuning.json here: --tuning-from needs a run dir that tuned "
                                                  "settings")
    with rd.run_lock(run_dir, "optimize"):
        changed = rd.check_same_config(run_dir, cfg, source, "choose another --out for the changed config",
                                       force=force) if resume else []
        retest = read_prompts(prompts_from) if prompts_from else None
        ctx, ledger = build_context(cfg, method=method, run_dir=run_dir, tuning_from=tuning_from, progress=progress,
                                    injected=injected, retest=retest)
        if not resume or changed or not (run_dir / rd.CONFIG_FILE).exists():
            rd.write_config(run_dir, cfg)
        state = run_loop(ctx, resume=resume)
        if ledger is not None:
            rd.write_usage(run_dir, {"ledger": ledger.to_dict(), "loop": state.spend})
    effect = heldout_effect(load_final(run_dir)) if (state.final or {}).get("n") else None
    blame = attribute(run_dir, progress=progress, lms=lms, resources=resources) if attribute_heldout else None
    return OptimizeRun(state, run_dir, effect, blame)


def build_context(cfg: RunConfig, *, method: str | None, run_dir: Path, tuning_from: str | Path | None = None,
                  progress: Callable[[str], None] | None = None, injected: Injected | None = None,
                  retest: Mapping[str, str] | None = None) -> tuple[LoopContext, UsageLedger | None]:
    """``(LoopContext, usage ledger or None)``: everything the closed loop needs, from ``cfg`` (``injected``:
    LM clients that replace the configured models)."""
    plan = LoopPlan.from_config(cfg, method=method)
    data = split_dataset(dataset_slice(cfg), cfg.split)
    run = build_run_lms(cfg, run_dir, injected)
    lms = run.lms
    backend = RunnerBackend(cfg.system.name, lms={"task": lms["task"], "judge": lms["judge"]},
                            settings=cfg.system.settings, judge=cfg.eval.judge, resources=run.resources,
                            executor=make_executor(cfg, run_dir, ledger=run.ledger))
    ctx = LoopContext(
        backend=backend, data=data, plan=plan, run_dir=run_dir, reflection_lm=lms["reflection"],
        attributor=make_attributor(cfg.attribution, lms={"task": lms["task"], "judge": lms["judge"]},
                                   resources=run.resources) if plan.method == "attributed" else None,
        base_prompts=cfg.system.prompts, settings=cfg.system.settings, task_lm=lms["task"],
        judge=make_judge(cfg.eval.judge, lms["judge"]),
        tuning_from=Path(tuning_from) if tuning_from else None, progress=progress, retest=retest,
    )
    return ctx, run.ledger
