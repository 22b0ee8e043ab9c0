"""From a run config to the objects a run is made of: the dataset slice, the split, the judge, the loop.

One place for what ``eval``, ``optimize``, ``attribute`` and the Python API (:mod:`memtrace_opt.api`)
all need, so a config means the same thing to each of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from memtrace_opt.config import RunConfig, load_config
from memtrace_opt.errors import ConfigError

__all__ = ["as_config", "build_context", "dataset_slice", "prepare_run", "split_conversations"]


def as_config(config: str | Path | RunConfig) -> tuple[RunConfig, str]:
    """``(RunConfig, its name for error messages)`` from a path or an already built config."""
    if isinstance(config, RunConfig):
        return config, f"config {config.run_name!r}"
    return load_config(config), str(config)


def prepare_run(config: str | Path | RunConfig, *, out: str | Path | None = None, dataset_path: str | Path | None = None,
                cache_dir: str | Path | None = None) -> tuple[RunConfig, str, Path]:
    """``(config, its name for errors, run dir)`` with the command-line overrides applied, checked before
    any model loads: the run dir is not a file, the system's settings and prompt overrides are valid."""
    from memtrace_opt.systems.registry import get_system
    from memtrace_opt.systems.resolve import resolve_prompts, resolve_settings

    cfg, source = as_config(config)
    if dataset_path is not None:
        path = str(Path(dataset_path).resolve())
        cfg = cfg.model_copy(update={"dataset": cfg.dataset.model_copy(update={"path": path})})
    if cache_dir is not None:
        cfg = cfg.model_copy(update={"cache_dir": Path(cache_dir).resolve()})
    run_dir = Path(out) if out else cfg.run_dir
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(source, "--out" if out else "output_dir/run_name",
                          f"{run_dir} is a file; the run needs a directory there")
    system = get_system(cfg.system.name)
    resolve_settings(system, cfg.system.settings, source=source)
    resolve_prompts(system, cfg.system.prompts, source=source)
    return cfg, source, run_dir


def dataset_slice(cfg: RunConfig) -> Any:
    """The config's dataset, loaded and cut to ``dataset.conversations/max_sessions/max_questions``."""
    from memtrace_opt.data import load_dataset, select

    d = cfg.dataset
    ds = load_dataset(d.name, d.path, audit_path=d.audit_path, include_adversarial=d.include_adversarial)
    return select(ds, d.conversations, d.max_sessions, d.max_questions, d.min_evidence_session)


def split_conversations(cfg: RunConfig, sliced: Any) -> tuple[Any, ...]:
    """The conversations a plain evaluation runs: all of the slice, or with a ``split`` only its
    conversations in split order (every split id must exist: a typo would otherwise evaluate
    everything silently)."""
    if cfg.split is None:
        return tuple(sliced.conversations)
    known = {c.id: c for c in sliced.conversations}
    wanted: list[str] = []
    for role in ("optimize", "validation", "heldout"):
        ids = getattr(cfg.split, role)
        missing = [i for i in ids if i not in known]
        if missing:
            raise ConfigError("config", f"split.{role}", f"conversations {missing} are not in the selected dataset "
                              f"(selected: {sorted(known)})")
        wanted += ids
    return tuple(known[i] for i in wanted)


def build_context(cfg: RunConfig, *, method: str | None, run_dir: Path, tuning_from: str | None,
                  progress: Callable[[str], None] | None = None, injected: Any = None,
                  retest: dict[str, str] | None = None) -> tuple[Any, Any]:
    """``(LoopContext, usage ledger or None)``: everything the closed loop needs, from ``cfg`` (``injected``:
    LM clients that replace the configured models, see :class:`memtrace_opt.lm.run_lms.Injected`)."""
    from memtrace_opt.eval.judge import make_judge
    from memtrace_opt.executors import make_executor
    from memtrace_opt.lm.run_lms import build_run_lms
    from memtrace_opt.loop import LoopContext, LoopPlan
    from memtrace_opt.loop.blaming import make_attributor
    from memtrace_opt.loop.plan import split_dataset
    from memtrace_opt.optimizers.backend import RunnerBackend

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
