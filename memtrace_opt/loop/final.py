"""The end of a loop run: seed vs best prompts on the held-out questions, and the files that say so.

Both prompt sets are evaluated on exactly the same held-out questions with the same settings, so
``compare`` can pair them question by question. The best prompts are evaluated by replaying the
seed run's graphs: a changed QA prompt re-runs only answering and judging. The run dir also gets
the best run's graphs, ``results.json`` and ``summary.json`` (the layout of an ``eval`` run, so
``trace show`` and ``report`` read it), the final prompts and their diffs against the seed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from memtrace_opt import rundir as rd
from memtrace_opt.data.model import QA
from memtrace_opt.eval.metrics import bleu1, token_f1
from memtrace_opt.eval.results import QAResult, summarize
from memtrace_opt.loop.artifacts import write_prompts
from memtrace_opt.optimizers.adapter import MemoryPromptAdapter
from memtrace_opt.optimizers.cases import CaseTrace, QACase
from memtrace_opt.rundir import FinalReport
from memtrace_opt.rundir.schemas import FINAL, stamp

__all__ = ["evaluate_heldout", "qa_result"]


def qa_result(trace: CaseTrace, qa: QA) -> QAResult:
    """A results.json record of one evaluated case."""
    return QAResult(
        qa_id=qa.id, conversation=trace.case.conversation_id, category=qa.category, question=qa.question,
        gold=trace.gold, prediction=trace.prediction, judge_score=int(trace.score > 0),
        f1=token_f1(trace.prediction, trace.gold), bleu1=bleu1(trace.prediction, trace.gold),
        flags=tuple(sorted(qa.flags)), judge_label=trace.verdict,
    )


def evaluate_heldout(
    adapter: MemoryPromptAdapter,
    cases: Sequence[QACase],
    *,
    seed: Mapping[str, str],
    best: Mapping[str, str],
    run_dir: Path,
    info: Mapping[str, Any],
) -> FinalReport:
    """Score seed and best prompts on ``cases``; write prompts/, graphs and results; return final.json's content."""
    seed_traces = adapter.run(cases, seed)
    best_traces = adapter.run(cases, best)
    qas = {(c.id, q.id): q for c in adapter.conversations.values() for q in c.qa}
    rows = [_row(s, b, qas[(s.case.conversation_id, s.case.qa_id)]) for s, b in zip(seed_traces, best_traces)]
    changed = write_prompts(run_dir / "prompts", dict(best), dict(seed))
    results = [qa_result(b, qas[(b.case.conversation_id, b.case.qa_id)]) for b in best_traces]
    _write_run_layout(run_dir, best_traces, results)
    n = len(rows)
    return stamp(FINAL, {
        **dict(info), "n": n, "changed_components": changed,
        "seed_accuracy": sum(r["seed_score"] for r in rows) / n if n else 0.0,
        "best_accuracy": sum(r["best_score"] for r in rows) / n if n else 0.0,
        "cases": rows,
    })


def _row(seed: CaseTrace, best: CaseTrace, qa: QA) -> dict[str, Any]:
    return {"qa_id": qa.id, "conversation": seed.case.conversation_id, "category": qa.category,
            "question": qa.question, "gold": seed.gold, "seed_prediction": seed.prediction,
            "seed_score": seed.score, "best_prediction": best.prediction, "best_score": best.score}


def _write_run_layout(run_dir: Path, traces: Sequence[CaseTrace], results: Sequence[QAResult]) -> None:
    graphs = {t.case.conversation_id: t.graph for t in traces}
    for cid, graph in graphs.items():
        rd.write_graph(run_dir, cid, graph)
    rd.write_results(run_dir, results, list(graphs))
    rd.write_summary(run_dir, {"prompts": "best", **summarize(results)})
