"""The LMs a run uses: built from the config's ``models`` section, or injected (tests, the Python API's ``lms=``).

One place for both, so every command (eval, optimize, attribute, bench-attribution) builds the same
roles with the same cache and usage accounting, and a test can hand all of them scripted LMs at once.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping

__all__ = ["RunLMs", "build_run_lms", "injected", "injected_resources", "is_injected"]

_INJECTED: dict[str, Any] | None = None


@contextmanager
def injected(lms: Mapping[str, Any], resources: Mapping[str, Any] | None = None) -> Iterator[None]:
    """Run commands with these LM clients (by role: ``task``, ``judge``, ``reflection``, ...) and resources
    (e.g. a test embedder) instead of building the configured ones."""
    global _INJECTED
    previous, _INJECTED = _INJECTED, {"lms": dict(lms), "resources": dict(resources or {})}
    try:
        yield
    finally:
        _INJECTED = previous


def is_injected() -> bool:
    """Whether a test injected LMs (then no config is needed to build them)."""
    return _INJECTED is not None


def injected_resources() -> dict[str, Any]:
    """Resources a test injected (empty when none)."""
    return dict((_INJECTED or {}).get("resources") or {})


class RunLMs:
    """LM clients by role, the usage ledger that counts them (None when injected) and shared resources."""

    def __init__(self, lms: dict[str, Any], ledger: Any, resources: dict[str, Any]) -> None:
        self.lms, self.ledger, self.resources = lms, ledger, resources


def build_run_lms(cfg: Any, cache_dir: Path) -> RunLMs:
    """Injected LMs, or task/judge/reflection built from ``cfg.models`` with a disk cache in ``cache_dir``.

    ``attribution`` is an alias of the reflection role: the attribution agent is the run's strongest
    configured model's job, like reflection.
    """
    if _INJECTED is not None:
        lms = dict(_INJECTED["lms"])
        lms.setdefault("reflection", lms.get("task"))
        lms.setdefault("attribution", lms.get("reflection"))
        return RunLMs(lms, None, dict(_INJECTED["resources"]))
    from memtrace_opt.lm.factory import build_roles
    from memtrace_opt.lm.usage import UsageLedger

    ledger = UsageLedger()
    roles = build_roles(cfg.models.task, cfg.models.judge, cfg.models.reflection,
                        cache_dir=cfg.cache_dir or cache_dir, ledger=ledger)
    lms = {"task": roles.task, "judge": roles.judge, "reflection": roles.reflection, "attribution": roles.reflection}
    return RunLMs(lms, ledger, {})
