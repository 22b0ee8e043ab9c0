"""The loop's state on disk: ``RUN_DIR/checkpoint.json``, rewritten atomically after every step.

A killed run resumes from it without redoing a finished round: the state holds the current best
prompts, the validation score to beat, the rounds done (with their blame and scores), the rounds
without improvement, the spend so far and, once finished, the held-out result. Work inside an
unfinished round is redone on resume; the LM disk cache makes that cheap.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from memtrace_opt.errors import ConfigError, DatasetError
from memtrace_opt.loop.budget import Spend
from memtrace_opt.rundir import CHECKPOINT_FILE, CheckpointFile, write_json
from memtrace_opt.rundir.schemas import CHECKPOINT, read_checkpoint, stamp

__all__ = ["LoopState", "RoundRecord", "load_state", "save_state"]


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
    #: Per component, the failures it is charged with as a later link of a compound failure's chain.
    chained: dict[str, int] = field(default_factory=dict)


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

    def to_dict(self) -> CheckpointFile:
        return stamp(CHECKPOINT, asdict(self))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoopState:
        fields = {k: v for k, v in data.items() if k != "format"}
        fields["rounds"] = [RoundRecord(**r) for r in fields.get("rounds", [])]
        return cls(**fields)


def save_state(run_dir: Path, state: LoopState) -> Path:
    """Write the checkpoint atomically (a kill mid-write leaves the previous one intact)."""
    return write_json(run_dir / CHECKPOINT_FILE, state.to_dict())


def load_state(run_dir: Path) -> LoopState | None:
    """The checkpoint of ``run_dir``, or None when there is none; a corrupt one is a ConfigError."""
    path = run_dir / CHECKPOINT_FILE
    if not path.exists():
        return None
    try:
        return LoopState.from_dict(read_checkpoint(path))
    except DatasetError as err:
        problem = f"{err.item}: {err.message}" if err.item else err.message
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        problem = str(err)
    raise ConfigError(str(path), None, f"unreadable checkpoint ({problem}); remove it or use another --out")
