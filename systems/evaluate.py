"""Evaluate a memory system on many conversations, checkpointing each graph and the results as it ends.

The driver (:mod:`memtrace_opt.systems.runner`) runs one conversation; this module runs a whole
dataset slice on an executor (local threads or Ray), resumes a run directory's finished
conversations instead of re-running them, and writes the run's results, summary and usage.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memtrace_opt import rundir as rd
from memtrace_opt.eval.results import QAResult, summarize
from memtrace_opt.systems.executor import ConversationJob, Executor, LocalExecutor
from memtrace_opt.graph.usage import graph_stats, merge_graph_stats
from memtrace_opt.lm.base import LMClient
from memtrace_opt.systems.base import SystemSettings
from memtrace_opt.systems.runner import ConversationRun, run_conversation

__all__ = ["EvaluationRun", "evaluate_system"]


@dataclass
class EvaluationRun:
    """A whole evaluation: results of every question, the summary and usage written to the run dir."""

    run_dir: Any
    results: list[QAResult]
    summary: dict[str, Any]
    usage: dict[str, Any]
    resumed: list[str] = field(default_factory=list)
    wall_s: float = 0.0


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
    merged = merge_graph_stats(stats)
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
