"""Where a campaign stands, read from its checkpoints and caches (nothing is run): ``campaign status``.

A sealed campaign's run dirs stay out of git, so its standing in numbers is committed as
``state/progress.json`` and read where a fresh clone has no run dirs yet.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memtrace_opt.atomic import atomic_write_bytes
from memtrace_opt.campaign.cache import cache_totals
from memtrace_opt.campaign.estimate import estimate_config
from memtrace_opt.campaign.spec import PROGRESS_FILE, RUNS_DIR, STATE_DIR, Campaign, load_campaign
from memtrace_opt.errors import ConfigError
from memtrace_opt.loop import load_state

__all__ = ["DONE", "CampaignProgress", "MethodProgress", "campaign_progress", "save_progress"]

#: A checkpoint's status once the held-out comparison is written ("running": rounds; "optimized": held-out pending).
DONE = "done"


@dataclass
class MethodProgress:
    """Where one method stands: ``not started``, ``running`` (``round`` rounds done of ``rounds``) or ``finished``."""

    method: str
    status: str
    round: int = 0
    rounds: int = 0
    heldout_accuracy: float | None = None
    seed_accuracy: float | None = None
    llm_calls: int = 0
    #: The checkpoint's own status (``running``, ``optimized``: rounds over, held-out pending; ``done``).
    phase: str = ""

    def text(self) -> str:
        if self.status == "finished":
            return f"{self.method}: finished, held-out {100 * (self.heldout_accuracy or 0):.1f}%"
        if self.status == "running" and (self.round >= self.rounds or self.phase == "optimized"):
            return f"{self.method}: held-out comparison"
        if self.status == "running":
            return f"{self.method}: round {min(self.round + 1, self.rounds)} of {self.rounds}"
        return f"{self.method}: not started"


@dataclass
class CampaignProgress:
    """A campaign's standing, from its committed files and working cache (nothing is run)."""

    name: str
    methods: list[MethodProgress] = field(default_factory=list)
    cached_entries: int = 0
    lm_seconds: float = 0.0
    #: ``(low, high)`` LM seconds still to spend, from the campaign's ``costs:`` (None: no costs given).
    lm_seconds_left: tuple[float, float] | None = None

    @property
    def finished(self) -> int:
        return sum(m.status == "finished" for m in self.methods)

    @property
    def remaining(self) -> int:
        return len(self.methods) - self.finished

    @property
    def llm_calls(self) -> int:
        return sum(m.llm_calls for m in self.methods)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "finished": self.finished, "remaining": self.remaining, "llm_calls": self.llm_calls}

    def __str__(self) -> str:
        running = [m.text() for m in self.methods if m.status == "running"]
        hours = self.lm_seconds / 3600
        spent = f"{hours:.1f} h" if hours >= 0.1 else f"{self.lm_seconds:.0f} s"
        if self.lm_seconds_left is None:
            left = "LM time left unknown (add costs: to campaign.yaml)"
        else:
            low, high = (s / 3600 for s in self.lm_seconds_left)
            left = f"{low:.1f} to {high:.1f} h LM time left (estimate)"
        return (f"campaign {self.name}: {self.finished}/{len(self.methods)} methods finished"
                f"{f' ({running[0]})' if running else ''}, {self.cached_entries:,} LM answers stored, "
                f"{spent} LM time spent, {left}")


def campaign_progress(folder: str | Path) -> CampaignProgress:
    """Read each method's checkpoint and the cache: status per method and totals, for ``campaign status``."""
    camp = load_campaign(folder)
    out = CampaignProgress(camp.name)
    saved = _saved_progress(camp)
    for method in camp.methods:
        state = load_state(camp.folder / RUNS_DIR / method)
        if state is None:
            out.methods.append(saved.get(method, MethodProgress(method, "not started")))
            continue
        final = state.final or {}
        finished = state.status == DONE
        out.methods.append(MethodProgress(
            method, "finished" if finished else "running", round=len(state.rounds),
            rounds=int(state.plan.get("rounds", 0)), heldout_accuracy=final.get("best_accuracy") if finished else None,
            seed_accuracy=final.get("seed_accuracy") if finished else None,
            llm_calls=int(state.spend.get("llm_calls", 0)), phase=state.status))
    out.cached_entries, out.lm_seconds = cache_totals(camp.folder)
    if camp.costs is not None:
        out.lm_seconds_left = _time_left(camp, out.methods)
    return out


def _saved_progress(camp: Campaign) -> dict[str, MethodProgress]:
    """A sealed campaign's committed standing per method (a fresh clone has no run dirs to read)."""
    path = camp.folder / STATE_DIR / PROGRESS_FILE
    if camp.sealed_to is None or not path.exists():
        return {}
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))["methods"]
        return {r["method"]: MethodProgress(**r) for r in rows}
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ConfigError(str(path), None, f"unreadable campaign progress ({err}); restore it from git") from None


def _time_left(camp: Campaign, methods: list[MethodProgress]) -> tuple[float, float]:
    """``(low, high)`` LM seconds left: each method's estimate (:func:`memtrace_opt.campaign.estimate.estimate_config`)
    times the share of its work not done. A running method has done ``round`` of its ``rounds + 1`` parts
    (the rounds, then the held-out comparison); past its rounds only the held-out passes remain.

    The seed's ingestion is paid once per campaign, not once per method: the first method makes those LM
    calls and every later one reads them from the shared cache, so a later method's estimate is counted
    without the part of its seed ingestion the first method's covers."""
    assert camp.costs is not None
    rows = {r["method"]: r for r in estimate_config(camp.config, camp.costs, methods=camp.methods,
                                                    row=camp.costs_row)["methods"]}
    shared = rows[camp.methods[0]]["seed_ingestion_s"]
    low = high = 0.0
    for m in methods:
        r = rows[m.method]
        if m.status == "finished":
            continue
        if m.status == "running" and (m.phase == "optimized" or m.round >= m.rounds):
            low, high = low + r["heldout_s"], high + r["heldout_s"]
            continue
        cached = min(shared, r["seed_ingestion_s"]) if m.method != camp.methods[0] else 0.0
        share = 1.0 - (m.round / (m.rounds + 1) if m.status == "running" else 0.0)
        low, high = low + share * (r["low_s"] - cached), high + share * (r["high_s"] - cached)
    return low, high


def save_progress(camp: Campaign) -> None:
    """``state/progress.json`` for a sealed campaign: its standing in numbers, for a clone without run dirs."""
    if camp.sealed_to is None:
        return
    data = json.dumps(campaign_progress(camp.folder).to_dict(), indent=1, sort_keys=True) + "\n"
    atomic_write_bytes(camp.folder / STATE_DIR / PROGRESS_FILE, data.encode("utf-8"))


