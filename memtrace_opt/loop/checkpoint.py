"""The loop's state on disk: ``RUN_DIR/checkpoint.json``, rewritten atomically after every step.

A killed run resumes from it without redoing a finished round: the state holds the current best
prompts, the validation score to beat, the rounds done (with their blame and scores), the rounds
without improvement, the spend so far and, once finished, the held-out result. Work inside an
unfinished round is redone on resume; the LM disk cache makes that cheap.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memtrace_opt.atomic import atomic_write_text
from memtrace_opt.errors import ConfigError
from memtrace_opt.loop.budget import Spend

__all__ = ["CHECKPOINT_FILE", "CHECKPOINT_FORMAT", "LoopState", "RoundRecord", "load_state", "save_state"]

CHECKPOINT_FILE = "checkpoint.json"
CHECKPOINT_FORMAT = "memtrace-loop/1"


@dataclass
class RoundRecord:
    """One finished round: what it trained on, what was blamed, what it produced, what it cost."""

    index: int
    train_conversations: list[str]
    failures: int
    cases: int
    blamed: dict[str, int]
    unoptimizable: int
    optimized: list[str]
    val_score: float
    improved: bool
    candidate: dict[str, str]
    spend: dict[str, Any]
    note: str = ""
    optimizer: dict[str, Any] = field(default_factory=dict)


@dataclass
class LoopState:
    """Everything a resumed run needs (see module docstring)."""

    plan: dict[str, Any]
    system: str
    settings: dict[str, Any]
    seed_candidate: dict[str, str]
    best_candidate: dict[str, str]
    best_val: float = 0.0
    best_round: int = 0
    baseline_val: float | None = None
    stale: int = 0
    rounds: list[RoundRecord] = field(default_factory=list)
    spend: dict[str, Any] = field(default_factory=dict)
    tuning: dict[str, Any] | None = None
    stop_reason: str | None = None
    status: str = "running"
    final: dict[str, Any] | None = None

    @property
    def next_round(self) -> int:
        return len(self.rounds) + 1

    def spent(self) -> Spend:
        return Spend.from_dict(self.spend)

    def to_dict(self) -> dict[str, Any]:
        return {"format": CHECKPOINT_FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoopState:
        data = {k: v for k, v in data.items() if k != "format"}
        data["rounds"] = [RoundRecord(**r) for r in data.get("rounds", [])]
        return cls(**data)


def save_state(run_dir: Path, state: LoopState) -> Path:
    """Write the checkpoint atomically (a kill mid-write leaves the previous one intact)."""
    return atomic_write_text(run_dir / CHECKPOINT_FILE, json.dumps(state.to_dict(), indent=2, ensure_ascii=False))


def _check_fields(data: dict[str, Any]) -> None:
    """The fields the loop does arithmetic or lookups on have the types it expects (ValueError naming one)."""
    spend = data.get("spend", {})
    if not isinstance(spend, dict) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                              for v in spend.values()):
        raise ValueError("spend must map names to numbers")
    for name in ("seed_candidate", "best_candidate"):
        value = data.get(name, {})
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise ValueError(f"{name} must map prompt components to text")
    if not isinstance(data.get("rounds", []), list) or not all(isinstance(r, dict) for r in data.get("rounds", [])):
        raise ValueError("rounds must be a list of objects")
    if data.get("status", "running") not in ("running", "optimized", "done"):
        raise ValueError(f"status {data.get('status')!r} is not running, optimized or done")


def load_state(run_dir: Path) -> LoopState | None:
    """The checkpoint of ``run_dir``, or None when there is none; a corrupt one is a ConfigError."""
    path = run_dir / CHECKPOINT_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        if data.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"format {data.get('format')!r} is not {CHECKPOINT_FORMAT!r}")
        _check_fields(data)
        return LoopState.from_dict(data)
    except (ValueError, TypeError, KeyError, AttributeError, UnicodeDecodeError) as err:
        raise ConfigError(str(path), None, f"unreadable checkpoint ({err}); remove it or use another --out") from None
