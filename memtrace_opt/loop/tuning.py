"""Tune a system's non-prompt settings (top_k, chunk size, thresholds) once, before prompt optimization.

An Optuna study (seeded TPE) maximizes the seed prompts' accuracy on the training questions over
``tuning.space``. The study lives in SQLite in the run dir, so a killed tuning resumes with the
trials it already finished; the result is saved to ``tuning.json`` and reused by every method
(``memtrace-opt optimize --tuning-from RUN_DIR``), so methods differ only in their prompts.

Space syntax (``tuning.space`` in the config)::

    top_k: [5, 10, 20]                      # categorical
    chunk_tokens: {low: 128, high: 512, step: 64}    # int range (ints given)
    threshold: {low: 0.1, high: 0.9}        # float range
    mode: {choices: [a, b]}                 # categorical, explicit
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from memtrace_opt.errors import ConfigError

__all__ = ["TUNING_FILE", "TuningResult", "suggest", "tune_settings"]

TUNING_FILE = "tuning.json"


@dataclass(frozen=True)
class TuningResult:
    """Best settings found, their score, and every finished trial."""

    best_params: dict[str, Any]
    best_value: float
    trials: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"best_params": self.best_params, "best_value": self.best_value, "trials": self.trials}


def suggest(trial: Any, name: str, spec: Any) -> Any:
    """One parameter of a trial, from its space entry (see module docstring)."""
    if isinstance(spec, list):
        return trial.suggest_categorical(name, spec)
    if isinstance(spec, Mapping) and "choices" in spec:
        return trial.suggest_categorical(name, list(spec["choices"]))
    if isinstance(spec, Mapping) and {"low", "high"} <= set(spec):
        low, high = spec["low"], spec["high"]
        if all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high, spec.get("step", 1))):
            return trial.suggest_int(name, low, high, step=spec.get("step", 1), log=bool(spec.get("log", False)))
        return trial.suggest_float(name, float(low), float(high), log=bool(spec.get("log", False)))
    raise ConfigError("config", f"tuning.space.{name}",
                      "expected a list of choices, {choices: [...]}, or {low, high[, step, log]}")


def tune_settings(
    objective: Callable[[dict[str, Any]], float],
    space: Mapping[str, Any],
    *,
    trials: int,
    storage: Path,
    seed: int = 0,
    base: Mapping[str, Any] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> TuningResult:
    """Run (or resume) the study until ``trials`` trials finished; ``objective(settings) -> accuracy``.

    ``base`` settings are tried first (trial 0), so tuning never returns something worse than the
    config's own settings on the training questions. ``should_stop`` (the budget) ends it early.
    """
    import optuna

    if not space:
        raise ConfigError("config", "tuning.space", "tuning is enabled but the space is empty")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage.parent.mkdir(parents=True, exist_ok=True)
    study = optuna.create_study(
        study_name="settings", storage=f"sqlite:///{storage}", load_if_exists=True, direction="maximize",
        sampler=optuna.samplers.TPESampler(seed=seed),
    )
    finished = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not study.trials and base is not None:
        start = {k: base[k] for k in space if k in base}
        if start:
            study.enqueue_trial(start)

    def run(trial: Any) -> float:
        params = {name: suggest(trial, name, spec) for name, spec in space.items()}
        return float(objective({**dict(base or {}), **params}))

    def stop_on_budget(study_: Any, _trial: Any) -> None:
        if should_stop():
            study_.stop()

    remaining = max(0, trials - len(finished))
    if remaining and not should_stop():
        study.optimize(run, n_trials=remaining, callbacks=[stop_on_budget], gc_after_trial=False)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not done:
        raise ConfigError("config", "tuning", "no tuning trial finished (budget spent before the first)")
    best = study.best_trial
    if best.value is None:  # a completed single-objective trial always has one
        raise ConfigError("config", "tuning", f"best tuning trial #{best.number} has no value")
    return TuningResult(dict(best.params), float(best.value),
                        [{"number": t.number, "params": dict(t.params), "value": t.value} for t in done])
