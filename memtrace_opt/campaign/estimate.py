"""How long a run will take, before it starts: a config's LM time from measured per-unit costs.

Why: on a 2-core CPU one Mem0 held-out pass can take hours, and a session ends whatever runs. An
experiment must be sized (and split into resumable campaign parts) from numbers measured on the
machine that will run it, not guessed. The costs come from a ``bench-lm`` result (one of its rows:
LM seconds per ingested turn, per question at question time, items it was measured on), and the
work from the config itself: the conversations of each split role cut as the run cuts them, the
rollout budget, the minibatch size, the rounds and the targets.

The model of the loop (:mod:`memtrace_opt.loop.driver`), per method:

- **seed ingestion**: every conversation of the run is ingested once under the seed prompts (the LM
  cache serves every later pass under the seed);
- **rollouts**: ``max_metric_calls`` counts every question answered under a candidate, the validation
  baseline included; each round gets an equal share of what the baseline left, spends its training pass
  and GEPA's seed validation, then a minibatch per proposal, and validates at most one accepted
  candidate. A budget whose share cannot pay for a round is refused, as the loop refuses it;
- **re-ingestion**: a candidate that changes an ingestion prompt re-ingests what its questions read.
  A minibatch's conversation is replayed scoped (``scoped_ratio`` of a full ingest, 0.5 measured on a
  12-session slice) and a validation pass re-ingests every validation conversation. This is the
  ``high`` figure (every candidate edits an ingestion prompt); ``low`` assumes none does;
- **reflection**: one reflection call per proposal (``reflection_s`` each), a proposal per two
  minibatch evaluations;
- **pruning** (``optimizer.prune``, on by default): after a round keeps a candidate, one validation pass
  per learned delta of the winner, re-ingesting the validation conversations when the delta is in an
  ingestion prompt. The ``high`` figure counts one delta per proposal of the round, as many passes as the
  budget the rounds left can pay (pruning's answers are rollouts too); ``low`` assumes none is kept;
- **held-out**: the seed and the best prompt set on every held-out question (re-ingesting the
  held-out conversations under the best set in the ``high`` figure), plus ``audit_candidates`` passes.

Method ``none`` is the validation baseline and one held-out pass under the seed. Every figure is LM seconds; wall time adds
the embedding and store work (small next to the LM on this CPU).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from memtrace_opt.errors import ConfigError
from memtrace_opt.loop.plan import METHODS, LoopPlan, split_dataset
from memtrace_opt.run.assemble import dataset_slice, prepare_run
from memtrace_opt.systems.registry import get_system

__all__ = ["MeasuredCosts", "MethodEstimate", "estimate_config", "estimate_run", "read_costs"]

#: The one prompt every system reads at question time; any other target is an ingestion prompt.
ANSWER_PROMPT = "question_answering"


@dataclass(frozen=True)
class MeasuredCosts:
    """Per-unit LM seconds measured on this machine (a ``bench-lm`` row)."""

    seconds_per_turn: float
    seconds_per_question: float
    source: str
    reflection_s: float = 30.0
    scoped_ratio: float = 0.5


@dataclass(frozen=True)
class MethodEstimate:
    """One method's LM seconds, by part; ``low``/``high`` differ in re-ingestion and pruning."""

    method: str
    seed_ingestion_s: float
    rollout_s: float
    reingestion_s: float
    reflection_s: float
    heldout_s: float
    pruning_s: float = 0.0

    @property
    def low_s(self) -> float:
        return self.seed_ingestion_s + self.rollout_s + self.reflection_s + self.heldout_s

    @property
    def high_s(self) -> float:
        return self.low_s + self.reingestion_s + self.pruning_s

    def to_dict(self) -> dict[str, Any]:
        return {**{k: round(v, 1) if isinstance(v, float) else v for k, v in asdict(self).items()},
                "low_s": round(self.low_s, 1), "high_s": round(self.high_s, 1)}


def read_costs(path: str | Path, row: str | None = None, *, reflection_s: float = 30.0,
               scoped_ratio: float | None = None) -> MeasuredCosts:
    """The costs of ``row`` (default: the baseline) of a ``bench-lm --json`` file; a ConfigError naming the
    file and the missing field otherwise. The file's own scoped-replay ratio is used when it has one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        runs = data["speculation"]
        label = row or runs["baseline"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ConfigError(str(path), "speculation", f"not a bench-lm --json result ({err})") from None
    if label not in runs.get("modes", {}):
        raise ConfigError(str(path), f"speculation.modes.{label}", f"no such row; rows: {sorted(runs.get('modes', {}))}")
    measured = runs["modes"][label]
    per_question = measured.get("question_lm_s_per_question")
    if per_question is None:
        raise ConfigError(str(path), f"speculation.modes.{label}.question_lm_s_per_question",
                          "missing: measure with a bench-lm that reports question-time seconds")
    ratio = scoped_ratio if scoped_ratio is not None else (data.get("scoped_replay") or {}).get("ratio_seconds") or 0.5
    return MeasuredCosts(float(measured["seconds_per_turn"]), float(per_question), f"{path}#{label}",
                         reflection_s=reflection_s, scoped_ratio=float(ratio))


def _turns(conv: Any) -> int:
    return sum(len(s.turns) for s in conv.sessions)


def _questions(convs: Sequence[Any]) -> int:
    return sum(len(c.scored_qa()) for c in convs)


def estimate_run(cfg: Any, data: Any, costs: MeasuredCosts, methods: Sequence[str],
                 ingestion_targets: bool) -> dict[str, Any]:
    """The estimate per method for the loop data ``data`` (a :class:`~memtrace_opt.loop.plan.LoopData`) of
    ``cfg``; ``ingestion_targets``: whether the loop may change an ingestion prompt at all."""
    opt = cfg.optimizer
    # The loop validates on the optimize split when no validation conversation is set (LoopData.validation_cases).
    convs = {"optimize": data.optimize, "validation": data.validation or data.optimize, "heldout": data.heldout}
    ingest = {role: sum(_turns(c) for c in convs[role]) * costs.seconds_per_turn for role in convs}
    questions = {role: _questions(convs[role]) for role in convs}
    for method in methods:  # the loop would refuse these before any LM call: so does the estimate
        LoopPlan.from_config(cfg, method=method).check_budget(questions["validation"])
    per_train_conv = ingest["optimize"] / max(1, len(data.optimize))
    # Per round (the loop's arithmetic): an equal share of what the baseline left; GEPA spends the round's
    # training pass and its own seed validation first, then two minibatch evaluations per proposal (the
    # parent's is cached: one new evaluation each).
    rounds, val_q = max(1, opt.rounds), questions["validation"]
    train_q = questions["optimize"] / max(1, len(data.optimize))
    spare = max(0.0, (opt.max_metric_calls - val_q) / rounds - val_q - train_q)
    proposals = rounds * max(1, int(spare // (2 * max(1, opt.minibatch_size))))  # = new minibatch evaluations
    kept = rounds  # at most one validation pass of an accepted candidate per round
    answered = min(opt.max_metric_calls, val_q + rounds * train_q + proposals * opt.minibatch_size + kept * val_q)
    # Pruning: one validation pass per learned delta (a delta per proposal at most), paid from what is left.
    pruning_passes = 0
    if opt.prune:
        pruning_passes = min(kept * (proposals // rounds), int(max(0, opt.max_metric_calls - answered) // max(1, val_q)))
    rows = []
    for method in methods:
        heldout_q = questions["heldout"] * costs.seconds_per_question
        if method == "none":  # the validation baseline, then the seed's held-out pass
            own = ingest["validation"] if data.validation else ingest["optimize"]
            rows.append(MethodEstimate(method, own + ingest["heldout"],
                                       questions["validation"] * costs.seconds_per_question, 0.0, 0.0, heldout_q))
            continue
        passes = 2 + opt.audit_candidates
        reingest = 0.0
        if ingestion_targets:
            reingest = (proposals * per_train_conv * costs.scoped_ratio + kept * ingest["validation"]
                        + (1 + opt.audit_candidates) * ingest["heldout"])
        pruning = pruning_passes * (val_q * costs.seconds_per_question
                                    + (ingest["validation"] if ingestion_targets else 0.0))
        rows.append(MethodEstimate(
            method, ingest["optimize"] + ingest["heldout"] + (ingest["validation"] if data.validation else 0.0),
            answered * costs.seconds_per_question, reingest,
            proposals * costs.reflection_s, passes * heldout_q, pruning))
    total_low = sum(r.low_s for r in rows)
    total_high = sum(r.high_s for r in rows)
    return {
        "config": cfg.run_name, "system": cfg.system.name, "costs": asdict(costs),
        "work": {role: {"conversations": len(convs[role]), "turns": sum(_turns(c) for c in convs[role]),
                        "questions": questions[role]} for role in convs},
        "budget": {"max_metric_calls": opt.max_metric_calls, "minibatch_size": opt.minibatch_size,
                   "rounds": opt.rounds, "audit_candidates": opt.audit_candidates,
                   "ingestion_targets": ingestion_targets, "pruning_passes_high": pruning_passes},
        "methods": [r.to_dict() for r in rows],
        "total_low_s": round(total_low, 1), "total_high_s": round(total_high, 1),
        "total_low_h": round(total_low / 3600, 2), "total_high_h": round(total_high / 3600, 2),
    }


def estimate_config(config: str | Path, costs_path: str | Path, *, methods: Sequence[str] = (), row: str | None = None,
                    reflection_s: float = 30.0, scoped_ratio: float | None = None,
                    dataset_path: str | None = None) -> dict[str, Any]:
    """The estimate of the run config file ``config`` (every method of ``methods``; default: the config's
    own) from the bench-lm result ``costs_path``: what ``memtrace-opt estimate`` and a campaign's progress
    line report."""
    cfg, _source, _ = prepare_run(config, dataset_path=dataset_path)
    wanted = tuple(methods) or (cfg.optimizer.method,)
    bad = [m for m in wanted if m not in METHODS]
    if bad:
        raise ConfigError("--method", None, f"unknown method {bad[0]!r}; choose from {METHODS}")
    costs = read_costs(costs_path, row, reflection_s=reflection_s, scoped_ratio=scoped_ratio)
    data = split_dataset(dataset_slice(cfg), cfg.split)
    targets = LoopPlan.from_config(cfg, method=wanted[0]).resolve_targets(get_system(cfg.system.name).prompts())
    return estimate_run(cfg, data, costs, wanted, ingestion_targets=any(t != ANSWER_PROMPT for t in targets))
