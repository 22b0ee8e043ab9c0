"""The closed loop: evaluate → attribute → optimize the blamed prompts → validate, round after round.

Round *r*: run the current best prompts on the round's training questions; blame the failures
(per method, :mod:`.blaming`); optimize the chosen components with GEPA (or MIPROv2) under the
round's share of the budget, selecting on validation; keep the result only if validation accuracy
improves. The loop stops after ``rounds``, when validation has not improved for ``patience``
rounds, when validation is perfect, or when the rollout or LM-call budget is spent. The state is
checkpointed after every step; ``resume=True`` continues a killed run from its last finished round.
Finally seed and best prompts are compared on the held-out questions (:mod:`.final`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from memtrace_opt.errors import ConfigError
from memtrace_opt.eval.judge import DeterministicJudge, Judge
from memtrace_opt.lm.base import LMClient
from memtrace_opt.loop.artifacts import write_prompts
from memtrace_opt.loop.audit import audit_rejected, audit_summary, rejected_candidates
from memtrace_opt.loop.blaming import RoundBlame, round_blame
from memtrace_opt.loop.budget import LLMBudgetStopper, Spend, SpendMeter
from memtrace_opt.loop.checkpoint import LoopState, RoundRecord, load_state, save_state
from memtrace_opt.loop.demo_pools import DEMOS_FILE, load_pools, round_pools, save_pools, testable_pools
from memtrace_opt.loop.final import evaluate_heldout
from memtrace_opt.loop.plan import GEPA_METHODS, LoopData, LoopPlan
from memtrace_opt.loop.pruning import Undo, prune
from memtrace_opt.loop.tuning import TUNING_FILE, tune_settings
from memtrace_opt.optimizers.adapter import Attributor, MemoryPromptAdapter
from memtrace_opt.optimizers.backend import SystemBackend
from memtrace_opt.optimizers.cases import CaseTrace, QACase
from memtrace_opt.optimizers.delta_proposer import DeltaProposer
from memtrace_opt.optimizers.gepa_run import run_gepa
from memtrace_opt.optimizers.graphs import GraphStore
from memtrace_opt.optimizers.miprov2 import run_miprov2
from memtrace_opt.optimizers.proposer import ReflectionProposer
from memtrace_opt.optimizers.selectors import selector_for
from memtrace_opt.rundir import BLAME_FILE, FINAL_FILE, FinalReport, read_object, round_dir, write_json
from memtrace_opt.rundir.schemas import ROUND_OPTIMIZER, ROUND_SCORES, stamp

__all__ = ["LoopContext", "run_loop"]


@dataclass
class _Outcome:
    """What a round's optimizer produced: the candidate, its validation scores, details, a note."""

    candidate: dict[str, str]
    val_score: float
    val_scores: dict[str, float]
    info: dict[str, Any]
    note: str


@dataclass
class LoopContext:
    """What a loop run is made of; the CLI builds it from a config, tests build it by hand."""

    backend: SystemBackend
    data: LoopData
    plan: LoopPlan
    run_dir: Path
    reflection_lm: LMClient
    attributor: Attributor | None = None
    base_prompts: Mapping[str, str] | None = None
    settings: Mapping[str, Any] | None = None
    task_lm: LMClient | None = None
    judge: Judge | None = None
    tuning_from: Path | None = None
    progress: Callable[[str], None] | None = None
    #: Prompts (another run's best) to compare with the seed on the held-out set, with method ``none``:
    #: re-testing optimized prompts on fresh data without optimizing again.
    retest: Mapping[str, str] | None = None

    def say(self, message: str) -> None:
        """Tell the user where a long run is (the CLI prints it; tests leave it silent)."""
        if self.progress is not None:
            self.progress(message)


def run_loop(ctx: LoopContext, *, resume: bool = False) -> LoopState:
    """Run (or resume) the loop to the end; returns the final state (``state.final`` holds held-out scores)."""
    state = _open_state(ctx, resume)
    if state.status == "done":
        return state
    plan = ctx.plan
    proposer = f"{'/'.join(plan.deltas)} deltas" if plan.uses_delta else "whole-prompt rewrites"
    ctx.say(f"method {plan.method} ({proposer if plan.method in GEPA_METHODS else 'no GEPA'}) · budget "
            f"{plan.max_metric_calls} rollouts" + (f", {plan.max_llm_calls} LM calls" if plan.max_llm_calls else "")
            + f" over {plan.rounds} round(s) · seed {plan.seed}")
    meter = SpendMeter(state.spent())
    with meter.observe():
        _tune(ctx, state, meter)
        backend = ctx.backend.with_settings(state.settings)
        adapter = MemoryPromptAdapter(
            backend, ctx.data.optimize + ctx.data.validation, base_prompts=_base_prompts(ctx),
            mode=_mode(ctx.plan.method),
            attributor=ctx.attributor, store=GraphStore(per_conversation=6),
            scoped_replay=ctx.plan.scoped_replay, full_conversations={c.id for c in ctx.data.validation},
        )
        meter.count_rollouts(adapter)
        if state.baseline_val is None:
            ctx.say(f"baseline: seed prompts on {len(ctx.data.validation_cases())} validation questions")
            _baseline(ctx, state, adapter, meter)
        ctx.say(f"baseline validation accuracy {100 * (state.baseline_val or 0):.1f}%")
        while state.status == "running":
            reason = _stop_reason(ctx, state, meter.total())
            if reason:
                state.stop_reason, state.status = reason, "optimized"
                break
            ctx.say(f"round {state.next_round}/{ctx.plan.rounds}: run, attribute failures, optimize blamed prompts")
            record = _run_round(ctx, state, adapter, meter)
            blamed = ", ".join(f"{c} {n}" for c, n in record.blamed.items()) or "nothing"
            if record.chained:
                blamed += " (compound, also at fault once that is fixed: " + ", ".join(
                    f"{c} {n}" for c, n in record.chained.items()) + ")"
            ctx.say(f"round {record.index}: {record.failures} failures, blamed {blamed}, "
                    f"unoptimizable {record.unoptimizable} → validation {100 * record.val_score:.1f}%"
                    f" ({'kept' if record.improved else 'not kept'})")
            _finish_round(ctx, state, record, meter)
        _checkpoint(ctx, state, meter)
        ctx.say(f"final: seed vs best prompts on {len(ctx.data.heldout_cases())} held-out questions")
        _final(ctx, state, backend, meter)
    return state


# -- state ------------------------------------------------------------------------------------------
def _base_prompts(ctx: LoopContext) -> dict[str, str]:
    return {**ctx.backend.default_prompts(), **dict(ctx.base_prompts or {})}


def _mode(method: str) -> str:
    return method if method in GEPA_METHODS else "answer_feedback"


def _open_state(ctx: LoopContext, resume: bool) -> LoopState:
    prompts = _base_prompts(ctx)
    targets = ctx.plan.resolve_targets(prompts)
    if ctx.plan.method == "attributed" and ctx.attributor is None:
        raise ConfigError("config", "optimizer.method", "the attributed method needs an attributor")
    existing = load_state(ctx.run_dir)
    if existing is not None and not resume:
        raise ConfigError(str(ctx.run_dir), None, "a loop checkpoint exists here: rerun without --no-resume to continue it, "
                          "or choose another --out")
    seed = {t: prompts[t] for t in targets}
    if existing is not None:
        _check_compatible(ctx, existing, seed)
        return existing
    ctx.plan.check_budget(len(ctx.data.validation_cases()))
    best = dict(seed)
    if ctx.retest is not None:
        if ctx.plan.method != "none":
            raise ConfigError("--prompts-from", None, "re-testing another run's prompts needs --method none "
                              "(the loop would otherwise optimize from the seed)")
        unknown = sorted(set(ctx.retest) - set(seed))
        if unknown:
            raise ConfigError("--prompts-from", None, f"prompt components {unknown} are not targets of this system "
                              f"({sorted(seed)})")
        best.update(ctx.retest)
    state = LoopState(plan=ctx.plan.fingerprint(), system=ctx.backend.system, settings=dict(ctx.settings or {}),
                      seed_candidate=seed, best_candidate=best)
    save_state(ctx.run_dir, state)
    return state


def _check_compatible(ctx: LoopContext, existing: LoopState, seed: dict[str, str]) -> None:
    """Refuse to resume a checkpoint made with another plan, system or seed prompts."""
    problem = None
    if existing.plan != json.loads(json.dumps(ctx.plan.fingerprint())):
        problem = f"another optimizer plan ({existing.plan})"
    elif existing.system != ctx.backend.system:
        problem = f"another system ({existing.system})"
    elif existing.seed_candidate != seed:
        problem = "other seed prompts"
    elif ctx.retest is not None and existing.best_candidate != {**seed, **ctx.retest}:
        problem = "other prompts to re-test (--prompts-from)"
    if problem:
        raise ConfigError(str(ctx.run_dir), "checkpoint.json", f"the checkpoint was written with {problem}; "
                          "use another --out")


def _checkpoint(ctx: LoopContext, state: LoopState, meter: SpendMeter) -> None:
    state.spend = meter.total().to_dict()
    save_state(ctx.run_dir, state)


# -- tuning and baseline ----------------------------------------------------------------------------
def _tune(ctx: LoopContext, state: LoopState, meter: SpendMeter) -> None:
    """Settle the system settings once: reuse another run's tuning, tune, or keep the config's."""
    if state.tuning is not None:
        return
    if ctx.tuning_from is not None:
        tuned: Mapping[str, Any] = read_object(Path(ctx.tuning_from) / TUNING_FILE)
        state.settings = {**state.settings, **tuned["best_params"]}
        state.tuning = {"from": str(ctx.tuning_from), **tuned}
    elif ctx.plan.tuning_trials > 0:
        result = tune_settings(
            lambda s: _accuracy(_adapter_for(ctx, s, meter), ctx.data.train_cases(1, "all"), state.seed_candidate),
            ctx.plan.tuning_space, trials=ctx.plan.tuning_trials, storage=ctx.run_dir / "tuning.sqlite",
            seed=ctx.plan.seed, base=state.settings, should_stop=lambda: bool(_budget_spent(ctx, meter.total())),
        )
        state.settings = {**state.settings, **result.best_params}
        state.tuning = result.to_dict()
        write_json(ctx.run_dir / TUNING_FILE, result.to_dict())
    else:
        state.tuning = {"best_params": {}, "note": "tuning disabled"}
    _checkpoint(ctx, state, meter)


def _adapter_for(ctx: LoopContext, settings: Mapping[str, Any], meter: SpendMeter) -> MemoryPromptAdapter:
    """A fresh adapter for one tuning trial; its rollouts count toward the run's spend."""
    adapter = MemoryPromptAdapter(ctx.backend.with_settings(settings), ctx.data.optimize,
                                  base_prompts=_base_prompts(ctx), mode="answer_feedback")
    meter.count_rollouts(adapter)
    return adapter


def _accuracy(adapter: MemoryPromptAdapter, cases: list[QACase], candidate: Mapping[str, str]) -> float:
    traces = adapter.run(cases, candidate)
    return sum(t.score for t in traces) / len(traces) if traces else 0.0


def _baseline(ctx: LoopContext, state: LoopState, adapter: MemoryPromptAdapter, meter: SpendMeter) -> None:
    """Round 0: the seed prompts' validation accuracy, the score every round must beat."""
    traces = adapter.run(ctx.data.validation_cases(), state.seed_candidate)
    state.baseline_val = state.best_val = _mean(traces)
    write_json(round_dir(ctx.run_dir, 0) / "scores.json", stamp(ROUND_SCORES, {"validation": _scores(traces)}))
    write_prompts(round_dir(ctx.run_dir, 0) / "prompts", state.seed_candidate)
    _checkpoint(ctx, state, meter)


# -- rounds -----------------------------------------------------------------------------------------
def _budget_spent(ctx: LoopContext, spend: Spend) -> str | None:
    if spend.rollouts >= ctx.plan.max_metric_calls:
        return "rollout budget spent"
    if ctx.plan.max_llm_calls is not None and spend.llm_calls >= ctx.plan.max_llm_calls:
        return "LM-call budget spent"
    return None


def _stop_reason(ctx: LoopContext, state: LoopState, spend: Spend) -> str | None:
    plan = ctx.plan
    if plan.method == "none":
        return "method none: no optimization"
    if state.next_round > plan.rounds:
        return f"all {plan.rounds} rounds done"
    if plan.patience > 0 and state.stale >= plan.patience:
        return f"validation accuracy did not improve for {state.stale} round(s)"
    if state.best_val >= 1.0:
        return "validation accuracy is perfect"
    spent = _budget_spent(ctx, spend)
    if spent:
        return spent
    if plan.method in GEPA_METHODS and _round_budget(ctx, state, spend) < plan.gepa_round_floor(
            len(ctx.data.validation_cases())):
        return "rollout budget too small for another GEPA round"
    return None


def _round_budget(ctx: LoopContext, state: LoopState, spend: Spend) -> int:
    rounds_left = ctx.plan.rounds - state.next_round + 1
    return max(0, ctx.plan.max_metric_calls - spend.rollouts) // max(1, rounds_left)


def _run_round(ctx: LoopContext, state: LoopState, adapter: MemoryPromptAdapter, meter: SpendMeter) -> RoundRecord:
    r, before = state.next_round, meter.total()
    train = ctx.data.train_cases(r, ctx.plan.round_data)
    current = dict(state.best_candidate)
    traces = adapter.run(train, current)
    blame = round_blame(ctx.plan.method, traces, list(state.seed_candidate), ctx.attributor, adapter.conversations)
    if ctx.plan.method == "attributed":
        adapter.remember_blame(current, blame.signals)
    rdir = round_dir(ctx.run_dir, r)
    write_json(rdir / BLAME_FILE, blame.to_dict())
    out = _optimize(ctx, state, adapter, blame, train, rdir, meter, traces)
    if ctx.plan.prune and out.val_score > state.best_val + 1e-9 and out.candidate != current:
        out = _prune(ctx, adapter, current, out)
    write_prompts(rdir / "prompts", out.candidate, state.seed_candidate)
    write_json(rdir / "scores.json", stamp(ROUND_SCORES, {"train": _scores(traces), "validation": out.val_scores}))
    write_json(rdir / "optimizer.json", stamp(ROUND_OPTIMIZER, out.info))
    return RoundRecord(
        index=r, train_conversations=sorted({c.conversation_id for c in train}), failures=blame.failures,
        cases=len(traces), blamed={c: e["count"] for c, e in blame.summary["components"].items() if e["count"]},
        chained={c: e["chained"] for c, e in blame.summary["components"].items() if e.get("chained")},
        unoptimizable=blame.summary["unoptimizable"]["count"], optimized=blame.components,
        val_score=out.val_score, improved=out.val_score > state.best_val + 1e-9, candidate=out.candidate,
        spend=(meter.total() - before).to_dict(), note=out.note,
        optimizer={k: v for k, v in out.info.items() if k != "proposals"},
    )


def _optimize(ctx: LoopContext, state: LoopState, adapter: MemoryPromptAdapter, blame: RoundBlame,
              train: list[QACase], rdir: Path, meter: SpendMeter, traces: list[CaseTrace]) -> _Outcome:
    """Run the round's optimizer (GEPA or MIPROv2) on the components the blame step chose."""
    current = dict(state.best_candidate)
    if not blame.failures:
        return _Outcome(current, state.best_val, {}, {}, "no training failures")
    if not blame.components:
        return _Outcome(current, state.best_val, {}, {}, "no failure was blamed on a target prompt")
    val = ctx.data.validation_cases()
    if ctx.plan.method == "miprov2":
        return _mipro(ctx, state, adapter, train, val)
    proposer = _proposer(ctx, state, blame, traces, rdir, train)
    proposer.on_proposal = lambda p: ctx.say(
        f"  proposal {len(proposer.log)} ({p.mode}, {p.component}): "
        + (p.reason if p.accepted else f"none: {p.reason}")[:160] + (" → GEPA scores it on a minibatch" if p.accepted else ""))
    outcome = run_gepa(
        adapter, seed_candidate=current, trainset=train, valset=val,
        selector=selector_for(ctx.plan.method, blame.components), proposer=proposer,
        max_metric_calls=_round_budget(ctx, state, meter.total()), minibatch_size=ctx.plan.minibatch_size,
        stoppers=[LLMBudgetStopper(meter, ctx.plan.max_llm_calls)], run_dir=rdir / "gepa",
        seed=ctx.plan.seed + state.next_round, accept_ties=ctx.plan.acceptance == "equal",
    )
    info = outcome.to_dict()
    info["scoped_rollouts"] = adapter.scoped_rollouts
    if isinstance(proposer, DeltaProposer):
        info["rules"] = proposer.rules_log
        info["lines"] = proposer.lines_log
    return _Outcome(outcome.best_candidate, outcome.best_score, outcome.val_scores, info, "gepa")


def _prune(ctx: LoopContext, adapter: MemoryPromptAdapter, parent: dict[str, str], out: _Outcome) -> _Outcome:
    """Undo the winner's learned deltas that validation does not pay for (:mod:`.pruning`)."""
    val = ctx.data.validation_cases()

    def evaluate(candidate: dict[str, str]) -> tuple[float, dict[str, float]]:
        traces = adapter.run(val, candidate)
        return _mean(traces), _scores(traces)

    def on_step(number: int, total: int, undo: Undo, step: dict[str, Any] | None) -> None:
        head = f"  undo {number}/{total}: {undo.kind} of {undo.component}"
        if step is None:
            ctx.say(f"{head} ({undo.detail[:80]}) → validation on {len(val)} questions")
        else:
            ctx.say(f"{head}: validation {100 * step['val_score']:.1f}% "
                    f"({'undo kept' if step['kept'] else 'delta kept'})")

    ctx.say(f"pruning: undo each learned delta, keep the undo if validation stays ≥ {100 * out.val_score:.1f}%")
    result = prune(parent, out.candidate, out.val_score, out.val_scores, evaluate, on_step)
    info = {**out.info, "pruning": result.log}
    return _Outcome(result.candidate, result.score, result.scores, info, out.note)


def _proposer(ctx: LoopContext, state: LoopState, blame: RoundBlame, traces: list[CaseTrace],
              rdir: Path, train: Sequence[QACase]) -> ReflectionProposer | DeltaProposer:
    """Whole-prompt rewrites, or demo/rule deltas drawn from the demo pools mined so far (this round's saved first)."""
    if not ctx.plan.uses_delta:
        return ReflectionProposer(ctx.reflection_lm)
    save_pools(rdir / DEMOS_FILE, round_pools(ctx.plan.method, traces, blame.signals, blame.components))
    mined = {c: p for c, p in load_pools(ctx.run_dir, state.next_round).items() if c in blame.components}
    pools, untestable = testable_pools(mined, {c.conversation_id for c in train},
                                       {c.conversation_id for c in ctx.data.validation_cases()},
                                       accept_ties=ctx.plan.acceptance == "equal")
    ctx.say("demo pools: " + (", ".join(f"{c} {len(p)}" for c, p in pools.items()) or "empty")
            + (f" ({untestable} left out: cut from the only conversations a candidate is scored on, which never "
               f"see their own demos)" if untestable else ""))
    return DeltaProposer(pools, ctx.reflection_lm, budget_tokens=ctx.plan.demo_tokens, max_demos=ctx.plan.max_demos,
                         seed=ctx.plan.seed + state.next_round, kinds=ctx.plan.deltas,
                         failure_outputs=_failure_outputs(traces, blame),
                         failure_cases=_failure_cases(traces, blame), demo_selection=ctx.plan.demo_selection)


def _charged_failures(traces: list[CaseTrace], blame: RoundBlame) -> dict[str, list[CaseTrace]]:
    """Per component the round optimizes, the failures charged to it (attributed: blamed on it, or on a
    link of its compound failure's chain; the ablation: every failure, as its summary spreads them)."""
    groups = blame.summary.get("components", {})
    by_id = {t.case.qa_id: t for t in traces if t.failed}
    charged = {c: [*g.get("case_ids", []), *g.get("chained_case_ids", [])] for c, g in groups.items()}
    return {c: [by_id[i] for i in dict.fromkeys(charged.get(c, [])) if i in by_id] for c in blame.components}


def _failure_outputs(traces: list[CaseTrace], blame: RoundBlame) -> dict[str, list[str]]:
    """The wrong answers of each component's charged failures: the line-blame evidence of the round."""
    return {c: [t.prediction for t in ts] for c, ts in _charged_failures(traces, blame).items()}


def _failure_cases(traces: list[CaseTrace], blame: RoundBlame) -> dict[str, list[tuple[str, str]]]:
    """``(question, gold)`` of each component's charged failures: what a covering demo set is fitted to."""
    return {c: [(t.question, t.gold) for t in ts] for c, ts in _charged_failures(traces, blame).items()}


def _mipro(ctx: LoopContext, state: LoopState, adapter: MemoryPromptAdapter, train: list[QACase],
           val: list[QACase]) -> _Outcome:
    if ctx.task_lm is None:
        raise ConfigError("config", "optimizer.method", "miprov2 needs the task LM")
    outcome = run_miprov2(adapter, candidate=dict(state.best_candidate), trainset=train, valset=val,
                          task_lm=ctx.task_lm, prompt_lm=ctx.reflection_lm, judge=ctx.judge or DeterministicJudge(),
                          num_candidates=ctx.plan.mipro_candidates, num_trials=ctx.plan.mipro_trials,
                          seed=ctx.plan.seed + state.next_round)
    adapter.rollouts += outcome.metric_calls
    traces = adapter.run(val, outcome.best_candidate)
    return _Outcome(outcome.best_candidate, _mean(traces), _scores(traces), outcome.to_dict(), "miprov2")


def _finish_round(ctx: LoopContext, state: LoopState, record: RoundRecord, meter: SpendMeter) -> None:
    """Accept the round's candidate if validation improved; count a stale round otherwise; checkpoint."""
    state.rounds.append(record)
    if record.improved:
        state.best_candidate, state.best_val, state.best_round, state.stale = (
            dict(record.candidate), record.val_score, record.index, 0)
    else:
        state.stale += 1
    _checkpoint(ctx, state, meter)


# -- final --------------------------------------------------------------------------------------------
def _final(ctx: LoopContext, state: LoopState, backend: SystemBackend, meter: SpendMeter) -> None:
    heldout = MemoryPromptAdapter(backend, ctx.data.heldout, base_prompts=_base_prompts(ctx), mode="answer_feedback")
    meter.count_rollouts(heldout)
    info = {"method": ctx.plan.method, "system": state.system, "settings": state.settings,
            "rounds": len(state.rounds), "best_round": state.best_round, "stop_reason": state.stop_reason,
            "baseline_val": state.baseline_val, "best_val": state.best_val,
            "heldout_conversations": [c.id for c in ctx.data.heldout],
            "budget": {"rollouts": ctx.plan.max_metric_calls, "llm_calls": ctx.plan.max_llm_calls}}
    optimization = meter.total()
    final = evaluate_heldout(heldout, ctx.data.heldout_cases(), seed=state.seed_candidate,
                             best=state.best_candidate, run_dir=ctx.run_dir, info=info)
    state.spend = final["spend"] = meter.total().to_dict()
    final["optimization_spend"] = optimization.to_dict()
    _audit(ctx, state, heldout, final, meter)
    write_json(ctx.run_dir / FINAL_FILE, final)
    state.final = {k: v for k, v in final.items() if k not in ("cases", "audit")}
    if final.get("audit"):
        state.final["audit"] = audit_summary(final["audit"])
    state.status = "done"
    save_state(ctx.run_dir, state)


def _audit(ctx: LoopContext, state: LoopState, heldout: MemoryPromptAdapter, final: FinalReport,
           meter: SpendMeter) -> None:
    """Score the candidates validation rejected on held-out too (:mod:`.audit`); its cost is kept apart
    from ``spend``, which stays the method's own (equal budgets across methods)."""
    entries = rejected_candidates(state.rounds, seed=state.seed_candidate, best=state.best_candidate,
                                  limit=ctx.plan.audit_candidates)
    if not entries:
        return
    ctx.say(f"audit: {len(entries)} candidate(s) validation rejected, on the held-out questions "
            "(a check on selection, not a choice)")
    before = meter.total()
    final["audit"] = audit_rejected(heldout, ctx.data.heldout_cases(), seed=state.seed_candidate,
                                    seed_scores={c["qa_id"]: c["seed_score"] for c in final["cases"]},
                                    entries=entries)
    final["audit_spend"] = (meter.total() - before).to_dict()


def _mean(traces: list[CaseTrace]) -> float:
    return sum(t.score for t in traces) / len(traces) if traces else 0.0


def _scores(traces: list[CaseTrace]) -> dict[str, float]:
    return {t.case.qa_id: t.score for t in traces}

