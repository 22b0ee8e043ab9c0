"""Run a memory system on conversations, traced end to end: ingest, answer, judge, score.

One driver (:func:`drive`) serves the first run, replay (:func:`make_rerun`) and whole-dataset
evaluation (:func:`evaluate_system`), so a replayed graph is built by exactly the code that built
the original. Judging happens inside the graph (op ``eval.judge``), so "which questions failed"
is read off the graph and a replay re-judges only the answers that changed.

Typical use::

    run = run_conversation("rag", conv, lms={"task": lm, "judge": judge_lm})
    failed = [r.qa_id for r in run.results if r.judge_score == 0]
    again = replay(run.graph, rerun_for(run.graph, conv), overrides=Overrides(prompts={...}), lms=...)
    results_from_graph(again.graph, conv.id, conv.scored_qa())
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from memtrace_opt import rundir as rd
from memtrace_opt.errors import ConfigError, GraphError
from memtrace_opt.eval.metrics import bleu1, token_f1
from memtrace_opt.eval.results import QAResult, summarize
from memtrace_opt.systems.executor import ConversationJob, Executor, LocalExecutor
from memtrace_opt.graph import MemoryGraph, Memo, Overrides, TraceStats, Tracer, Variable
from memtrace_opt.graph.outcome import JudgedOutcome, graph_label, outcome_from, read_judged_outcome
from memtrace_opt.lm.base import LMClient
from memtrace_opt.systems.base import MemorySystem, SystemSettings
from memtrace_opt.systems.judge_op import judge_answer
from memtrace_opt.systems.registry import get_system

__all__ = [
    "ConversationRun", "EvaluationRun", "drive", "evaluate_system", "graph_stats", "make_rerun", "resolve_prompts",
    "resolve_settings", "rerun_for", "results_from_graph", "run_conversation",
]


@dataclass
class ConversationRun:
    """One conversation's run: its graph, one result per question, and what it cost."""

    conversation_id: str
    graph: MemoryGraph
    results: list[QAResult]
    stats: TraceStats = field(default_factory=TraceStats)
    wall_s: float = 0.0


def resolve_settings(
    system: type[MemorySystem], settings: Mapping[str, Any] | SystemSettings | None, *, source: str = "settings"
) -> SystemSettings:
    """Validate settings against the system's model; a bad key or value is a ConfigError naming ``source``
    (the config file, when there is one) and the dotted field."""
    if isinstance(settings, SystemSettings):
        return settings
    try:
        return system.settings_model(**dict(settings or {}))
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        where = ".".join(["system", "settings", *map(str, first["loc"])])
        raise ConfigError(source, where, f"{first['msg']} (system {system.name!r})") from None


def resolve_prompts(
    system: type[MemorySystem], prompts: Mapping[str, str] | None, *, source: str = "prompts"
) -> dict[str, str]:
    """The system's full prompt set with ``prompts`` overriding; an unknown component is a ConfigError."""
    full = system.prompts()
    unknown = sorted(set(prompts or {}) - set(full))
    if unknown:
        raise ConfigError(source, f"system.prompts.{unknown[0]}",
                          f"system {system.name!r} has no prompt component {unknown[0]!r}; known: {sorted(full)}")
    return {**full, **dict(prompts or {})}


def drive(
    tracer: Tracer,
    system: type[MemorySystem],
    conversation: Any,
    qas: Sequence[Any],
    settings: SystemSettings,
    *,
    judge: str = "llm",
    use_audit: bool = False,
    on_question: Callable[[Any], None] | None = None,
) -> list[tuple[Any, Variable, Variable]]:
    """Ingest ``conversation``, answer and judge each of ``qas``; ``[(qa, answer var, judgement var)]``.

    This is the whole run's control flow, shared by first runs and replays.
    """
    instance = system(tracer, settings)
    instance.ingest(conversation)
    out = []
    for qa in qas:
        answer = instance.answer(qa)
        question = instance.questions.get(qa.id)
        if question is None:
            raise GraphError(f"system {system.name!r}: answer() made no question variable for {qa.id!r}")
        gold = qa.gold(use_audit=use_audit) if hasattr(qa, "gold") else qa.answer
        judgement = judge_answer(tracer, qa, question, answer, judge=judge, gold=gold)
        out.append((qa, answer, judgement))
        if on_question is not None:
            on_question(qa)
    return out


def _result(conversation_id: str, qa: Any, outcome: JudgedOutcome) -> QAResult:
    """One question's result: its judged outcome, and the dataset's category and flags."""
    gold = outcome.gold or ""
    return QAResult(
        qa_id=qa.id, conversation=conversation_id, category=qa.category, question=qa.question, gold=gold,
        prediction=outcome.prediction, judge_score=outcome.score, f1=token_f1(outcome.prediction, gold),
        bleu1=bleu1(outcome.prediction, gold), flags=tuple(sorted(qa.flags)), judge_label=outcome.label,
        judge_reason=outcome.reason,
    )


def results_from_graph(graph: MemoryGraph, conversation_id: str, qas: Sequence[Any]) -> list[QAResult]:
    """Per-question results read off a (recorded or replayed) graph's answer, gold and judgement variables.

    A question the graph holds no judged outcome (or gold) for raises MissingOutcomeError: the runner
    asked for it, so its absence is a defect, never a 0.
    """
    return [_result(conversation_id, qa, read_judged_outcome(graph, qa.id, require_gold=True)) for qa in qas]


def run_conversation(
    system_name: str,
    conversation: Any,
    qas: Sequence[Any] | None = None,
    *,
    lms: Mapping[str, LMClient],
    prompts: Mapping[str, str] | None = None,
    settings: Mapping[str, Any] | SystemSettings | None = None,
    judge: str = "llm",
    use_audit: bool = False,
    run_id: str | None = None,
    dataset: str | None = None,
    resources: Mapping[str, Any] | None = None,
    memo: Memo | None = None,
    overrides: Overrides | None = None,
    enabled: bool = True,
    on_question: Callable[[Any], None] | None = None,
) -> ConversationRun:
    """Run ``system_name`` on one conversation and its questions (default: the scored ones).

    ``lms`` needs ``"task"`` and, for ``judge="llm"``, ``"judge"``. ``resources`` seeds the
    systems' resource dict (e.g. ``{"embedder": fake}`` in tests). The graph's ``meta`` records
    everything needed to re-drive it: run id, system, settings, the full prompt set, conversation,
    question ids, dataset and judge.
    """
    system = get_system(system_name)
    cfg = resolve_settings(system, settings)
    full_prompts = resolve_prompts(system, prompts)
    qas = list(conversation.scored_qa() if qas is None else qas)
    meta = {
        "run_id": run_id or uuid.uuid4().hex[:12], "system": system.name, "settings": cfg.model_dump(mode="json"),
        "prompts": full_prompts, "conversation_id": conversation.id, "qa_ids": [q.id for q in qas],
        "speakers": list(getattr(conversation, "speakers", ()) or ()),
        "dataset": dataset, "judge": judge, "use_audit": use_audit,
    }
    tracer = Tracer(MemoryGraph(meta), lms=lms, prompts=full_prompts, resources=dict(resources or {}), memo=memo,
                    overrides=overrides, enabled=enabled)
    start = time.perf_counter()
    judged = drive(tracer, system, conversation, qas, cfg, judge=judge, use_audit=use_audit, on_question=on_question)
    wall = time.perf_counter() - start
    tracer.graph.meta["wall_s"] = round(wall, 3)
    # read off the variables themselves: with enabled=False the graph records none of them
    source = graph_label(tracer.graph)
    results = [_result(conversation.id, qa, outcome_from(qa.id, ans, jud, _gold(qa, use_audit), source=source))
               for qa, ans, jud in judged]
    return ConversationRun(conversation.id, tracer.graph, results, tracer.stats, wall)


def _gold(qa: Any, use_audit: bool) -> str:
    return qa.gold(use_audit=use_audit) if hasattr(qa, "gold") else qa.answer


def make_rerun(
    system_name: str,
    conversation: Any,
    qas: Sequence[Any] | None = None,
    settings: Mapping[str, Any] | SystemSettings | None = None,
    judge: str = "llm",
    *,
    use_audit: bool = False,
    resources: Mapping[str, Any] | None = None,
) -> Callable[[Tracer], None]:
    """The run's driver as a ``rerun`` callable for :func:`memtrace_opt.graph.replay`.

    ``resources`` seeds the replay tracer's resources the same way :func:`run_conversation` did
    (pass the same fake embedder a test used), each rerun starting from a fresh copy.
    """
    system = get_system(system_name)
    cfg = resolve_settings(system, settings)
    qas = list(conversation.scored_qa() if qas is None else qas)

    def rerun(tracer: Tracer) -> None:
        tracer.resources = {**dict(resources or {}), **dict(tracer.resources or {})}
        drive(tracer, system, conversation, qas, cfg, judge=judge, use_audit=use_audit)

    return rerun


def rerun_for(graph: MemoryGraph, conversation: Any, *, resources: Mapping[str, Any] | None = None
              ) -> Callable[[Tracer], None]:
    """:func:`make_rerun` with everything read from a graph recorded by :func:`run_conversation`:
    system, settings, judge, audit choice and the questions (``meta["qa_ids"]``, in order)."""
    meta = graph.meta
    missing = [k for k in ("system", "settings", "qa_ids") if k not in meta]
    if missing:
        raise GraphError(f"graph meta lacks {missing}: it was not recorded by run_conversation")
    if meta.get("conversation_id") not in (None, conversation.id):
        raise GraphError(f"graph is of conversation {meta['conversation_id']!r}, not {conversation.id!r}")
    by_id = {qa.id: qa for qa in conversation.qa}
    unknown = [q for q in meta["qa_ids"] if q not in by_id]
    if unknown:
        raise GraphError(f"graph questions {unknown[:3]} are not in conversation {conversation.id!r}")
    return make_rerun(meta["system"], conversation, [by_id[q] for q in meta["qa_ids"]], meta["settings"],
                      meta.get("judge", "llm"), use_audit=meta.get("use_audit", False), resources=resources)


# -- many conversations -------------------------------------------------------------------------
@dataclass
class EvaluationRun:
    """A whole evaluation: results of every question, the summary and usage written to the run dir."""

    run_dir: Any
    results: list[QAResult]
    summary: dict[str, Any]
    usage: dict[str, Any]
    resumed: list[str] = field(default_factory=list)
    wall_s: float = 0.0


def graph_stats(graph: MemoryGraph) -> dict[str, Any]:
    """What one conversation's graph cost and where it failed: LM usage per op name, failed ops."""
    by_op: dict[str, dict[str, Any]] = {}
    failed: dict[str, int] = {}
    for op in graph.ops.values():
        row = by_op.setdefault(op.name, {"ops": 0, "lm_calls": 0, "cached_calls": 0, "prompt_tokens": 0,
                                         "completion_tokens": 0, "latency_s": 0.0})
        row["ops"] += 1
        for call in op.lm_calls:
            if op.reused or call.cached:
                row["cached_calls"] += 1
                continue
            row["lm_calls"] += 1
            row["prompt_tokens"] += call.prompt_tokens
            row["completion_tokens"] += call.completion_tokens
            row["latency_s"] = round(row["latency_s"] + call.latency_s, 4)
        if op.status == "failed":
            failed[op.name] = failed.get(op.name, 0) + 1
    return {"ops": len(graph.ops), "variables": len(graph.variables), "by_op": by_op, "failed_ops": failed,
            "wall_s": graph.meta.get("wall_s", 0.0)}


def _merge_stats(stats: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    by_op: dict[str, dict[str, Any]] = {}
    failed: dict[str, int] = {}
    for s in stats:
        for name, row in s.get("by_op", {}).items():
            acc = by_op.setdefault(name, {k: 0 for k in row})
            for k, v in row.items():
                acc[k] = round(acc.get(k, 0) + v, 4)
        for name, n in s.get("failed_ops", {}).items():
            failed[name] = failed.get(name, 0) + n
    totals = {k: round(sum(row[k] for row in by_op.values()), 4)
              for k in ("lm_calls", "cached_calls", "prompt_tokens", "completion_tokens", "latency_s")}
    return {"totals": totals, "by_op": by_op, "failed_ops": failed,
            "wall_s": round(sum(float(s.get("wall_s", 0.0)) for s in stats), 3)}


def evaluate_system(
    system_name: str,
    conversations: Sequence[Any],
    *,
    lms: Mapping[str, LMClient],
    run_dir: Any,
    prompts: Mapping[str, str] | None = None,
    settings: Mapping[str, Any] | SystemSettings | None = None,
    judge: str = "llm",
    use_audit: bool = False,
    dataset: str | None = None,
    run_id: str | None = None,
    resume: bool = True,
    ledger: Any = None,
    resources: Mapping[str, Any] | None = None,
    progress: bool = True,
    workers: int = 1,
    executor: Executor | None = None,
) -> EvaluationRun:
    """Run every conversation (its scored questions), checkpointing each graph and the results as it ends.

    ``executor`` decides where conversations run (:mod:`memtrace_opt.systems.executor`; a Ray one ignores
    ``lms`` and ``resources`` and builds its own from the config it was given); ``workers`` is short for
    ``LocalExecutor(workers)``: > 1 runs conversations concurrently on a bounded thread pool (a served
    model with as many slots decodes them in one batch; the in-process model serializes its calls, so
    it gains nothing there). Each conversation has its own tracer, so graphs, ids and results are those
    of a serial run, merged in the conversations' order, whatever the executor.

    With ``resume`` a conversation listed as done in ``results.json`` whose graph file exists is not
    re-run; its results and stats are read back. ``ledger`` (a UsageLedger) adds per-role LM usage
    of this invocation to ``usage.json``; per-op usage always comes from the graphs.
    """
    if executor is not None and workers != 1:
        raise ValueError("evaluate_system: give workers or an executor, not both")
    executor = executor if executor is not None else LocalExecutor(workers)
    run_id = run_id or uuid.uuid4().hex[:12]
    job = ConversationJob(system_name, prompts, settings, judge, use_audit, run_id, dataset)
    done = set(rd.done_conversations(run_dir)) if resume else set()
    old_results = rd.read_results(run_dir) if done else []
    old_stats = rd.read_conversation_stats(run_dir) if done else {}
    by_conv: dict[str, list[QAResult]] = {}
    stats: dict[str, dict[str, Any]] = {}
    resumed: list[str] = []
    order = [c.id for c in conversations]
    start = time.perf_counter()

    def checkpoint() -> list[QAResult]:
        """Results of the finished conversations in the config's order (the same file whatever the workers)."""
        merged = [r for cid in order if cid in by_conv for r in by_conv[cid]]
        rd.write_results(run_dir, merged, {cid: stats[cid] for cid in order if cid in stats})
        return merged

    with _progress(progress, sum(len(c.scored_qa()) for c in conversations)) as advance:
        todo = []
        for conv in conversations:
            if conv.id in done:
                by_conv[conv.id] = [r for r in old_results if r.conversation == conv.id]
                stats[conv.id] = old_stats.get(conv.id, {})
                resumed.append(conv.id)
                advance(conv.id, len(conv.scored_qa()))
            else:
                todo.append(conv)

        def one(conv: Any) -> ConversationRun:
            return run_conversation(system_name, conv, lms=lms, prompts=prompts, settings=settings, judge=judge,
                                    use_audit=use_audit, run_id=run_id, dataset=dataset, resources=resources,
                                    on_question=lambda qa, cid=conv.id: advance(cid, 1))

        for conv_id, run in executor.each_finished(one, todo, job):
            if not executor.reports_questions:  # it ran elsewhere: the bar moves when it ends
                advance(conv_id, len(run.results))
            rd.write_graph(run_dir, conv_id, run.graph)
            by_conv[conv_id] = list(run.results)
            stats[conv_id] = graph_stats(run.graph)
            checkpoint()
    results = checkpoint()
    head = {"run_id": run_id, "system": system_name, "dataset": dataset, "judge": judge,
            "conversations": [c.id for c in conversations]}
    summary, usage = _write_totals(run_dir, head, results, list(stats.values()), ledger)
    return EvaluationRun(run_dir, results, summary, usage, resumed, time.perf_counter() - start)


def _write_totals(run_dir: Any, head: dict[str, Any], results: list[QAResult], stats: list[dict[str, Any]],
                  ledger: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Write ``summary.json`` (scores, usage totals, failed ops, wall time) and ``usage.json``."""
    merged = _merge_stats(stats)
    usage = {"run_id": head["run_id"], "graphs": merged["totals"], "by_op": merged["by_op"],
             "ledger": ledger.to_dict() if ledger is not None else None}
    summary = {**head, **summarize(results), "lm_usage": merged["totals"], "failed_ops": merged["failed_ops"],
               "failed_ops_total": sum(merged["failed_ops"].values()), "wall_s": merged["wall_s"]}
    rd.write_usage(run_dir, usage)
    rd.write_summary(run_dir, summary)
    return summary, usage


class _progress:
    """A rich progress bar over questions (a no-op when disabled), as a context manager."""

    def __init__(self, enabled: bool, total: int) -> None:
        self.enabled, self.total = enabled, total
        self._bar: Any = None

    def __enter__(self) -> Callable[[str, int], None]:
        if not self.enabled:
            return lambda conv, n: None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TimeElapsedColumn(), transient=True)
        self._bar.start()
        task = self._bar.add_task("questions", total=self.total)
        return lambda conv, n: self._bar.update(task, advance=n, description=f"{conv}")

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.stop()
