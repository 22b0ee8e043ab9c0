"""Run a memory system on one conversation, traced end to end: ingest, answer, judge, score.

One driver (:func:`drive`) serves the first run, replay (:func:`make_rerun`) and whole-dataset
evaluation (:func:`memtrace_opt.systems.evaluate.evaluate_system`), so a replayed graph is built by
exactly the code that built the original. Judging happens inside the graph (op ``eval.judge``), so
"which questions failed" is read off the graph and a replay re-judges only the answers that changed.
Checking a config's settings and prompts lives in :mod:`.resolve`, a graph's usage figures in
:mod:`memtrace_opt.graph.usage`.

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

from memtrace_opt.errors import GraphError
from memtrace_opt.eval.metrics import bleu1, token_f1
from memtrace_opt.eval.results import QAResult
from memtrace_opt.graph import MemoryGraph, Memo, Overrides, TraceStats, Tracer, Variable
from memtrace_opt.graph.outcome import JudgedOutcome, graph_label, outcome_from, read_judged_outcome
from memtrace_opt.lm.base import LMClient
from memtrace_opt.systems.base import MemorySystem, SystemSettings
from memtrace_opt.systems.judge_op import judge_answer
from memtrace_opt.systems.registry import get_system
from memtrace_opt.systems.resolve import resolve_prompts, resolve_settings

__all__ = ["ConversationRun", "drive", "make_rerun", "rerun_for", "results_from_graph", "run_conversation"]


@dataclass
class ConversationRun:
    """One conversation's run: its graph, one result per question, and what it cost."""

    conversation_id: str
    graph: MemoryGraph
    results: list[QAResult]
    stats: TraceStats = field(default_factory=TraceStats)
    wall_s: float = 0.0


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
