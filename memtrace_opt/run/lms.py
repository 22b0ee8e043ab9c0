"""The LMs a run uses: built from the config's ``models`` section, or injected (tests, the Python API's ``lms=``).

One place for both, so every run (eval, optimize, attribute, a Ray worker, bench-attribution) builds the
same roles with the same cache and usage accounting, and a test can hand all of them scripted LMs at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from memtrace_opt.config import RunConfig
from memtrace_opt.lm.base import LMClient
from memtrace_opt.lm.factory import build_roles
from memtrace_opt.lm.usage import UsageLedger

__all__ = ["Injected", "RunLMs", "build_run_lms"]


@dataclass(frozen=True)
class Injected:
    """LM clients by role (``task``, ``judge``, ``reflection``, ...) and resources (e.g. an embedder) a caller
    hands to a run instead of the configured models: the Python API's ``lms=``, the CLI's ``main(injected=)``.

    Passed down explicitly, never kept in a module global, so two runs in one process cannot see each
    other's clients.
    """

    lms: Mapping[str, LMClient]
    resources: Mapping[str, object] = field(default_factory=dict)

    @classmethod
    def of(cls, lms: Mapping[str, LMClient] | None,
           resources: Mapping[str, object] | None = None) -> Injected | None:
        """An injection, or None when no clients are given (then the config's models are built)."""
        return None if lms is None else cls(dict(lms), dict(resources or {}))


@dataclass(frozen=True)
class RunLMs:
    """LM clients by role, the usage ledger that counts them (None when injected) and shared resources."""

    lms: dict[str, LMClient]
    ledger: UsageLedger | None
    resources: dict[str, object]


def build_run_lms(cfg: RunConfig | None, cache_dir: Path, injected: Injected | None = None) -> RunLMs:
    """The ``injected`` LMs, or task/judge/reflection built from ``cfg.models`` with a disk cache in ``cache_dir``.

    ``attribution`` is an alias of the reflection role: the attribution agent is the run's strongest
    configured model's job, like reflection. ``cfg`` may be None only with ``injected``.
    """
    if injected is not None:
        lms = dict(injected.lms)
        for role, fallback in (("reflection", "task"), ("attribution", "reflection")):
            if role not in lms and fallback in lms:
                lms[role] = lms[fallback]
        return RunLMs(lms, None, dict(injected.resources))
    if cfg is None:
        raise ValueError("build_run_lms: a config or injected LMs are needed")
    ledger = UsageLedger()
    roles = build_roles(cfg.models.task, cfg.models.judge, cfg.models.reflection,
                        cache_dir=cfg.cache_dir or cache_dir, ledger=ledger)
    lms = {"task": roles.task, "judge": roles.judge, "reflection": roles.reflection, "attribution": roles.reflection}
    return RunLMs(lms, ledger, {})
