"""The attribution benchmark: cases with ground truth, methods run on them, accuracy and cost.

Cases come from fault injection (:mod:`.inject`, exact ground truth), from real failures whose
evidence lineage is unambiguous (labelled by a strict, token-only trace: no grey-zone content
decision and a single failing fact — note that this labeller shares tracing's logic, so tracing's
score on these cases is optimistic; they are reported apart under ``by_source``), and from the
dataset audit (a gold answer flagged wrong is an AnnotationError).

Metrics per method, overall and per system, error type and source: error-type accuracy, op-id exact
accuracy, failed attributions, LM calls, tokens and seconds per case. The cases export as a
MemTraceBench-style directory: one folder per system, one graph file per distinct graph, its
annotations in ``meta["annotations"]``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.attribution.content import Holding, TokenJudge
from memtrace_opt.attribution.counterfactual import CounterfactualAttributor
from memtrace_opt.attribution.evidence import evidence_recall_at_k, pseudo_evidence
from memtrace_opt.attribution.failures import FailureCase
from memtrace_opt.attribution.tracing import TracingAttributor
from memtrace_opt.bench.inject import InjectedCase
from memtrace_opt.graph import MemoryGraph, Overrides, queries
from memtrace_opt.graph.io_json import save_json
from memtrace_opt.graph.replay import Rerun

__all__ = ["Attributor", "BenchCase", "annotation", "bench_payload", "evidence_recall", "export_bench",
           "label_real_failures", "run_methods", "score"]


class Attributor(Protocol):
    """An attribution method: ``attribute(graph, case) -> BlameSignal``."""

    name: str

    def attribute(self, graph: MemoryGraph, case: FailureCase) -> BlameSignal: ...


@dataclass
class BenchCase:
    """One benchmark case: the graph and failed case, and the ground truth (type, op, where it came from).

    ``rerun`` re-drives the case's conversation and ``overrides`` re-apply its injected fault, so a
    counterfactual method replays the faulty run, not the clean one.
    """

    system: str
    error_type: str
    op_id: str | None
    case: FailureCase
    graph: MemoryGraph
    source: str
    note: str = ""
    kind: str = ""
    rerun: Rerun | None = None
    overrides: Overrides = field(default_factory=Overrides)

    @classmethod
    def from_injected(cls, ic: InjectedCase, injection_overrides: Overrides, rerun: Rerun | None) -> "BenchCase":
        return cls(ic.system, ic.error_type, ic.op_id, ic.case, ic.graph, "injected", ic.note, ic.kind, rerun,
                   injection_overrides)


class _StrictJudge:
    """The token test without a grey zone: counts the inconclusive verdicts (then says "does not hold")."""

    def __init__(self) -> None:
        self.tokens = TokenJudge(decide=False)
        self.grey = 0

    def holds(self, fact: Any, value: Any) -> Holding:
        verdict = self.tokens.holds(fact, value)
        if verdict.holds is None:
            self.grey += 1
            return Holding(False, verdict.score, verdict.reason)
        return verdict


def label_real_failures(graph: MemoryGraph, cases: Iterable[FailureCase], *, system: str,
                        rerun: Rerun | None = None) -> tuple[list[BenchCase], dict[str, str]]:
    """Ground truth for real failures: audit-flagged gold → AnnotationError; else an unambiguous lineage."""
    labelled, skipped = [], {}
    for case in cases:
        if not case.failed:
            continue
        if "audit_wrong_gold" in case.flags:
            labelled.append(BenchCase(system, "AnnotationError", None, case, graph, "audit",
                                      "gold flagged wrong by the dataset audit", rerun=rerun))
            continue
        if not case.evidence_vars(graph):
            skipped[case.case_id] = "no annotated evidence"
            continue
        judge = _StrictJudge()
        result = TracingAttributor(judge=judge, evidence="annotated", embed=None).trace(graph, case)
        if judge.grey or len(result.candidates) != 1:
            skipped[case.case_id] = f"ambiguous lineage ({judge.grey} grey verdicts, {len(result.candidates)} candidates)"
            continue
        top = result.candidates[0]
        labelled.append(BenchCase(system, top.error_type, top.op_id, case, graph, "lineage", top.reason, rerun=rerun))
    return labelled, skipped


def _attribute(method: Any, bc: BenchCase, lms: Mapping[str, Any] | None) -> BlameSignal:
    """Run ``method`` on one case; a counterfactual method is re-bound to the case's rerun and fault."""
    if isinstance(method, CounterfactualAttributor):
        if bc.rerun is None:
            method = method.tracing
        else:
            method = replace(method, rerun=bc.rerun, base=bc.overrides, lms=lms or method.lms)
    try:
        signal: BlameSignal = method.attribute(bc.graph, bc.case)
        return signal
    except Exception as err:  # a method that crashes on one case: a recorded failed attribution
        return BlameSignal(bc.case.case_id, bc.case.question, bc.case.gold, bc.case.prediction, None, None, None,
                           f"attribution raised {type(err).__name__}: {err}", method=getattr(method, "name", "?"),
                           confidence=0.0)


def run_methods(cases: Sequence[BenchCase], methods: Mapping[str, Any], *, lms: Mapping[str, Any] | None = None,
                progress: Callable[[str, int], None] | None = None) -> dict[str, list[tuple[BenchCase, BlameSignal]]]:
    """Every method on every case: ``{method name: [(case, blame), ...]}``."""
    out: dict[str, list[tuple[BenchCase, BlameSignal]]] = {}
    for name, method in methods.items():
        out[name] = []
        for i, bc in enumerate(cases):
            out[name].append((bc, _attribute(method, bc, lms)))
            if progress is not None:
                progress(name, i + 1)
    return out


def score(pairs: Sequence[tuple[BenchCase, BlameSignal]]) -> dict[str, Any]:
    """Accuracy and cost of one method on ``pairs``."""
    n = len(pairs)
    if n == 0:
        return {"n": 0}
    type_ok = sum(b.error_type == c.error_type for c, b in pairs)
    op_ok = sum(c.op_id is not None and b.op_id == c.op_id for c, b in pairs)
    op_n = sum(c.op_id is not None for c, _ in pairs)
    both = sum(b.error_type == c.error_type and b.op_id == c.op_id for c, b in pairs)
    return {
        "n": n,
        "type_accuracy": round(type_ok / n, 4),
        "op_accuracy": round(op_ok / op_n, 4) if op_n else None,
        "joint_accuracy": round(both / n, 4),
        "failed": sum(b.error_type is None for _, b in pairs),
        "llm_calls_per_case": round(sum(b.cost.llm_calls for _, b in pairs) / n, 3),
        "tokens_per_case": round(sum(b.cost.prompt_tokens + b.cost.completion_tokens for _, b in pairs) / n, 1),
        "seconds_per_case": round(sum(b.cost.seconds for _, b in pairs) / n, 4),
        "replays_per_case": round(sum(b.cost.replays for _, b in pairs) / n, 3),
    }


def _by(pairs: Sequence[tuple[BenchCase, BlameSignal]], key: Callable[[BenchCase], str]) -> dict[str, Any]:
    groups: dict[str, list[tuple[BenchCase, BlameSignal]]] = defaultdict(list)
    for c, b in pairs:
        groups[key(c)].append((c, b))
    return {k: score(v) for k, v in sorted(groups.items())}


def bench_payload(results: Mapping[str, Sequence[tuple[BenchCase, BlameSignal]]], *,
                  skipped: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The benchmark JSON: one row per method with per-system, per-type, per-source and per-class
    (injection kind: the harder suite's classes) breakdowns."""
    rows = [{"method": name, **score(pairs), "by_system": _by(pairs, lambda c: c.system),
             "by_type": _by(pairs, lambda c: c.error_type), "by_source": _by(pairs, lambda c: c.source),
             "by_class": _by(pairs, lambda c: c.kind or c.source)}
            for name, pairs in results.items()]
    first = next(iter(results.values()), [])
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for c, _ in first:
        counts[c.system][c.error_type] += 1
    return {"rows": rows, "cases": len(first), "case_counts": {s: dict(t) for s, t in counts.items()},
            "skipped": dict(skipped or {})}


def evidence_recall(cases: Sequence[BenchCase], embed: Any, *, k: int = 8) -> dict[str, Any]:
    """Mean recall@k of pseudo-evidence against the annotated evidence, over cases that have some."""
    recalls = [evidence_recall_at_k(pseudo_evidence(bc.graph, bc.case.question, bc.case.gold, top=k, embed=embed),
                                    bc.case.evidence, k)
               for bc in cases if bc.case.evidence_vars(bc.graph)]
    return {"k": k, "n": len(recalls), "mean": round(sum(recalls) / len(recalls), 4) if recalls else None}


def annotation(bc: BenchCase) -> dict[str, Any]:
    """One MemTraceBench-style annotation of a case."""
    return {"query_id": bc.case.qa_id, "query": bc.case.question, "golden_answers": [bc.case.gold],
            "prediction": bc.case.prediction, "source_evidence_ids": list(bc.case.evidence),
            "final_error_type": bc.error_type, "final_op_id": bc.op_id, "reason": bc.note,
            "source": bc.source, "injection": bc.kind or None}


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def export_bench(cases: Sequence[BenchCase], out_dir: str | Path) -> list[Path]:
    """Write one graph file per distinct graph under ``out_dir/<system>/``, annotations in its meta."""
    groups: dict[int, list[BenchCase]] = defaultdict(list)
    for bc in cases:
        groups[id(bc.graph)].append(bc)
    paths = []
    for n, group in enumerate(groups.values()):
        first = group[0]
        graph = first.graph
        conv = str(graph.meta.get("conversation_id") or graph.meta.get("conversation") or "graph")
        label = f"{first.error_type}-{first.case.qa_id}" if first.source == "injected" else "run"
        name = _UNSAFE.sub("_", f"{conv}__{label}__{n:03d}") + ".jsonl.gz"
        keep = set(graph.variables) | set(graph.ops)
        copy = queries.subgraph(graph, keep, meta={**graph.meta, "annotations": [annotation(bc) for bc in group]})
        paths.append(save_json(copy, Path(out_dir) / _UNSAFE.sub("_", first.system or "system") / name))
    return paths
