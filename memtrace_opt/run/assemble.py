"""From a run config to what a run is made of: the checked config, its run dir, the dataset slice, the split.

One place for what ``evaluate``, ``optimize``, ``attribute`` and the campaigns all need, so a config
means the same thing to each of them, and every check that needs no model runs before one loads.
"""

from __future__ import annotations

from pathlib import Path

from memtrace_opt.config import RunConfig, load_config
from memtrace_opt.data import load_dataset, select
from memtrace_opt.data.model import Conversation, Dataset
from memtrace_opt.errors import ConfigError
from memtrace_opt.systems.registry import get_system
from memtrace_opt.systems.resolve import resolve_prompts, resolve_settings

__all__ = ["as_config", "dataset_slice", "load_conversations", "prepare_run", "split_conversations"]


def as_config(config: str | Path | RunConfig) -> tuple[RunConfig, str]:
    """``(RunConfig, its name for error messages)`` from a path or an already built config."""
    if isinstance(config, RunConfig):
        return config, f"config {config.run_name!r}"
    return load_config(config), str(config)


def prepare_run(config: str | Path | RunConfig, *, out: str | Path | None = None, dataset_path: str | Path | None = None,
                cache_dir: str | Path | None = None) -> tuple[RunConfig, str, Path]:
    """``(config, its name for errors, run dir)`` with the command-line overrides applied, checked before
    any model loads: the run dir is not a file, the system's settings and prompt overrides are valid."""
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


def dataset_slice(cfg: RunConfig) -> Dataset:
    """The config's dataset, loaded and cut to ``dataset.conversations/max_sessions/max_questions``."""
    d = cfg.dataset
    ds = load_dataset(d.name, d.path, audit_path=d.audit_path, include_adversarial=d.include_adversarial)
    return select(ds, d.conversations, d.max_sessions, d.max_questions, d.min_evidence_session)


def load_conversations(cfg: RunConfig) -> dict[str, Conversation]:
    """The config's conversations by id (its dataset slice): what attribution reads evidence and audit flags from."""
    return {c.id: c for c in dataset_slice(cfg).conversations}


def split_conversations(cfg: RunConfig, sliced: Dataset) -> tuple[Conversation, ...]:
    """The conversations a plain evaluation runs: all of the slice, or with a ``split`` only its
    conversations in split order (every split id must exist: a typo would otherwise evaluate
    everything silently)."""
    if cfg.split is None:
        return tuple(sliced.conversations)
    known = {c.id: c for c in sliced.conversations}
    wanted: list[str] = []
    for role in ("optimize", "validation", "heldout"):
        ids: list[str] = getattr(cfg.split, role)
        missing = [i for i in ids if i not in known]
        if missing:
            raise ConfigError("config", f"split.{role}", f"conversations {missing} are not in the selected dataset "
                              f"(selected: {sorted(known)})")
        wanted += ids
    return tuple(known[i] for i in wanted)
