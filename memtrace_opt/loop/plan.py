"""What a closed-loop run will do, resolved once from the run config: method, budgets, data split.

The loop reads nothing else from the config, so tests build a :class:`LoopPlan` directly. Two
choices the config does not spell out have documented defaults here:

- ``targets``: the prompt components the loop may change — ``optimizer.targets`` when the config
  has it, else every prompt of the system (for Mem0 that is exactly the reference's three:
  fact extraction, memory-update decision, question answering).
- ``round_data``: ``rotate`` (the reference protocol: round *r* trains on optimize conversation
  *r* mod *n*) or ``all`` (every round trains on every optimize conversation).

Budgets are for the whole run: ``max_metric_calls`` rollouts (one question evaluated under one
candidate) and ``max_llm_calls`` LM calls of every role, cached or not, so a resumed run spends
exactly what an uninterrupted one would. Each round gets an equal share of what is left.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence, cast

from memtrace_opt.data.model import Conversation, Dataset
from memtrace_opt.errors import ConfigError
from memtrace_opt.optimizers.cases import QACase, cases_of

__all__ = ["METHODS", "GEPA_METHODS", "LoopData", "LoopPlan", "split_dataset"]

METHODS: tuple[str, ...] = ("attributed", "unattributed", "answer_feedback", "miprov2", "none")
GEPA_METHODS: tuple[str, ...] = ("attributed", "unattributed", "answer_feedback")


def _cases_of(conversations: Sequence[Conversation]) -> list[QACase]:
    # memtrace_opt.optimizers is mapped from optimizers/ at install time, a layout mypy cannot
    # resolve, so cases_of reads as untyped here; its declared return type is list[QACase].
    return cast(list[QACase], cases_of(conversations))


@dataclass(frozen=True)
class LoopPlan:
    """Everything the loop needs to know besides the system and the data."""

    method: str = "attributed"
    rounds: int = 3
    patience: int = 1
    max_metric_calls: int = 200
    max_llm_calls: int | None = None
    minibatch_size: int = 4
    targets: tuple[str, ...] | None = None
    round_data: str = "rotate"
    seed: int = 0
    tuning_trials: int = 0
    tuning_space: Mapping[str, Any] = field(default_factory=dict)
    mipro_candidates: int = 4
    mipro_trials: int = 6
    proposer: str = "delta"
    demo_tokens: int = 400
    max_demos: int = 4
    acceptance: str = "strict"
    deltas: tuple[str, ...] = ("demos", "rules", "lines")
    demo_selection: str = "random"
    scoped_replay: bool = True
    prune: bool = True
    #: Rejected candidates scored on held-out after the final comparison (not in the fingerprint: it
    #: changes no decision, so a resumed run may ask for more or fewer).
    audit_candidates: int = 0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError("config", "optimizer.method", f"unknown method {self.method!r}; expected one of {METHODS}")
        if self.acceptance not in ("strict", "equal"):
            raise ConfigError("config", "optimizer.acceptance", f"expected strict or equal, got {self.acceptance!r}")
        if self.proposer not in ("delta", "rewrite"):
            raise ConfigError("config", "optimizer.proposer", f"expected delta or rewrite, got {self.proposer!r}")
        unknown = [d for d in self.deltas if d not in ("demos", "rules", "lines")]
        if unknown or not self.deltas:
            raise ConfigError("config", "optimizer.deltas", f"expected a non-empty list of demos, rules, lines; "
                              f"got {list(self.deltas)}")
        if self.demo_selection not in ("coverage", "random"):
            raise ConfigError("config", "optimizer.demo_selection",
                              f"expected coverage or random, got {self.demo_selection!r}")
        if self.round_data not in ("rotate", "all"):
            raise ConfigError("config", "optimizer.round_data", f"expected rotate or all, got {self.round_data!r}")

    @classmethod
    def from_config(cls, cfg: Any, *, method: str | None = None) -> LoopPlan:
        """The plan of a :class:`memtrace_opt.config.RunConfig` (``method`` overrides the config's)."""
        opt, tuning = cfg.optimizer, cfg.tuning
        targets = getattr(opt, "targets", None)
        return cls(
            method=method or opt.method, rounds=opt.rounds, patience=opt.patience,
            max_metric_calls=opt.max_metric_calls, max_llm_calls=opt.max_llm_calls,
            minibatch_size=opt.minibatch_size, targets=tuple(targets) if targets else None,
            round_data=getattr(opt, "round_data", "rotate"), seed=cfg.seed,
            tuning_trials=tuning.trials if tuning.enabled else 0, tuning_space=dict(tuning.space),
            proposer=getattr(opt, "proposer", "delta"), demo_tokens=getattr(opt, "demo_tokens", 400),
            max_demos=getattr(opt, "max_demos", 4), acceptance=getattr(opt, "acceptance", "strict"),
            deltas=tuple(getattr(opt, "deltas", ("demos", "rules", "lines"))),
            demo_selection=getattr(opt, "demo_selection", "random"),
            scoped_replay=getattr(opt, "scoped_replay", True), prune=getattr(opt, "prune", True),
            audit_candidates=getattr(opt, "audit_candidates", 0),
        )

    @property
    def uses_delta(self) -> bool:
        """Whether rounds edit prompts by demo/rule deltas (else whole rewrites; answer_feedback always rewrites)."""
        return self.proposer == "delta" and self.method in ("attributed", "unattributed")

    def gepa_round_floor(self, validation_questions: int) -> int:
        """Rollouts a GEPA round needs at least: GEPA's own validation of its seed, then one minibatch
        evaluated twice (parent and child). A round whose share of the budget is smaller does not start."""
        return validation_questions + 2 * self.minibatch_size

    def first_round_floor(self, validation_questions: int) -> int:
        """The smallest ``max_metric_calls`` with which round 1 starts: the round-0 validation baseline,
        then a round floor for each of the ``rounds`` (round 1 gets an equal share of what is left)."""
        return validation_questions + self.rounds * self.gepa_round_floor(validation_questions)

    def check_budget(self, validation_questions: int) -> None:
        """Refuse, before any LM call, a GEPA plan whose budget cannot pay for its first round: such a run
        would spend its baseline and stop, reporting the seed as the optimized prompts."""
        if self.method not in GEPA_METHODS:
            return
        floor = self.first_round_floor(validation_questions)
        if self.max_metric_calls < floor:
            raise ConfigError("config", "optimizer.max_metric_calls", (
                f"{self.max_metric_calls} rollouts cannot pay for one GEPA round: the validation baseline takes "
                f"{validation_questions}, and each of the {self.rounds} rounds needs at least "
                f"{self.gepa_round_floor(validation_questions)} ({validation_questions} validation + 2 x minibatch "
                f"{self.minibatch_size}); set at least {floor}, or fewer rounds or validation questions"))

    def resolve_targets(self, prompts: Mapping[str, str]) -> tuple[str, ...]:
        """The target components, checked against the system's prompt set."""
        if self.targets is None:
            return tuple(prompts)
        unknown = [t for t in self.targets if t not in prompts]
        if unknown:
            raise ConfigError("config", "optimizer.targets", f"unknown prompt components {unknown}; "
                              f"the system has {sorted(prompts)}")
        return self.targets

    def fingerprint(self) -> dict[str, Any]:
        """The fields a resumed run must share with the checkpointed one (``demo_selection`` only when not
        the default, so checkpoints written before the field existed still resume)."""
        return {"method": self.method, "rounds": self.rounds, "targets": self.targets,
                "round_data": self.round_data, "seed": self.seed, "max_metric_calls": self.max_metric_calls,
                "max_llm_calls": self.max_llm_calls, "minibatch_size": self.minibatch_size,
                "proposer": self.proposer, "demo_tokens": self.demo_tokens, "max_demos": self.max_demos,
                "acceptance": self.acceptance, "deltas": list(self.deltas),
                "scoped_replay": self.scoped_replay, "prune": self.prune,
                **({} if self.demo_selection == "random" else {"demo_selection": self.demo_selection})}


@dataclass(frozen=True)
class LoopData:
    """Conversations per role: optimize (training), validation (selection), heldout (final report)."""

    optimize: tuple[Conversation, ...]
    validation: tuple[Conversation, ...]
    heldout: tuple[Conversation, ...]

    def train_cases(self, round_index: int, round_data: str) -> list[QACase]:
        """Round ``round_index``'s (1-based) training questions."""
        if round_data == "all" or not self.optimize:
            return _cases_of(self.optimize)
        return _cases_of([self.optimize[(round_index - 1) % len(self.optimize)]])

    def validation_cases(self) -> list[QACase]:
        """Validation questions; the optimize split's when no validation conversation is set."""
        return _cases_of(self.validation or self.optimize)

    def heldout_cases(self) -> list[QACase]:
        return _cases_of(self.heldout)


@dataclass(frozen=True)
class _Split:
    optimize: Sequence[str]
    validation: Sequence[str]
    heldout: Sequence[str]


def split_dataset(ds: Dataset, split: Any | None) -> LoopData:
    """The conversations of each role.

    Without a split: the first conversation is optimized (and validated) on, the rest are held out.
    """
    convs = {c.id: c for c in ds.conversations}
    if split is None:
        ordered = tuple(ds.conversations)
        split = _Split([c.id for c in ordered[:1]], [], [c.id for c in ordered[1:]])

    def pick(role: str, ids: Sequence[str]) -> tuple[Conversation, ...]:
        missing = [i for i in ids if i not in convs]
        if missing:
            raise ConfigError("config", f"split.{role}", f"conversations {missing} are not in the selected "
                              f"dataset (selected: {sorted(convs)})")
        return tuple(convs[i] for i in ids)

    data = LoopData(pick("optimize", split.optimize), pick("validation", split.validation),
                    pick("heldout", split.heldout))
    if not data.optimize:
        raise ConfigError("config", "split.optimize", "no optimize conversation: the loop needs training questions")
    if not data.heldout:
        raise ConfigError("config", "split.heldout", "no heldout conversation: the final comparison needs one")
    return data
