"""A round's failures → blame → the components to optimize, per method.

- ``attributed``: the attributor blames each failure on its earliest decisive faulty op; the round
  optimizes the target components that op used (prompt-less blame, e.g. vector retrieval, is
  counted as unoptimizable and optimizes nothing).
- ``unattributed``: every failure is a ResponseError meant for every target (the ablation).
- ``answer_feedback``: no blame; every target is eligible, one per GEPA step.
- ``miprov2``: no blame; only the targets MIPROv2 can express (the QA prompt).

Also the bridge to :mod:`memtrace_opt.attribution`: :class:`GraphAttributor` runs an attribution
method over a conversation graph's failed questions (the adapter's ``Attributor`` contract).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.data.model import QA, Conversation
from memtrace_opt.graph import MemoryGraph
from memtrace_opt.loop.artifacts import blame_summary
from memtrace_opt.optimizers.adapter import Attributor
from memtrace_opt.optimizers.cases import CaseTrace
from memtrace_opt.optimizers.feedback import unattributed_signal
from memtrace_opt.optimizers.miprov2 import MIPRO_COMPONENTS

__all__ = ["GraphAttributor", "RoundBlame", "make_attributor", "round_blame"]


@dataclass
class RoundBlame:
    """What attribution said about a round's failures, and what the round will optimize."""

    signals: dict[str, BlameSignal]
    summary: dict[str, Any]
    components: list[str]
    failures: int
    unattributed_cases: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"failures": self.failures, "components": self.components, "summary": self.summary,
                "not_attributed": self.unattributed_cases,
                "signals": {qa: s.to_dict() for qa, s in self.signals.items()}}


def round_blame(method: str, traces: Sequence[CaseTrace], targets: Sequence[str],
                attributor: Attributor | None, conversations: Mapping[str, Conversation]) -> RoundBlame:
    """Blame the failed ``traces`` the way ``method`` does and pick the components to optimize."""
    failed = [t for t in traces if t.failed]
    if not failed:
        return RoundBlame({}, blame_summary([]), [], 0)
    if method == "attributed":
        from memtrace_opt.attribution.aggregate import aggregate

        assert attributor is not None
        signals = _attribute(failed, attributor, conversations)
        graphs = {s.case_id: t.graph for t in failed if (s := signals.get(t.case.qa_id)) is not None}
        summary = aggregate(list(signals.values()), graphs)
        counts = {c: e["count"] for c, e in summary["components"].items() if c in targets}
        ordered = sorted(counts, key=lambda c: (-counts[c], list(targets).index(c)))
        missing = [t.case.qa_id for t in failed if t.case.qa_id not in signals]
        return RoundBlame(signals, summary, ordered, len(failed), missing)
    if method == "unattributed":
        signals = {t.case.qa_id: unattributed_signal(t) for t in failed}
        return RoundBlame(signals, blame_summary(list(signals.values()), targets), list(targets), len(failed))
    eligible = [c for c in targets if method != "miprov2" or c in MIPRO_COMPONENTS]
    return RoundBlame({}, blame_summary([]), eligible, len(failed))


def _attribute(failed: Sequence[CaseTrace], attributor: Attributor,
               conversations: Mapping[str, Conversation]) -> dict[str, BlameSignal]:
    by_conv: dict[str, list[CaseTrace]] = defaultdict(list)
    for t in failed:
        by_conv[t.case.conversation_id].append(t)
    out: dict[str, BlameSignal] = {}
    for cid, group in by_conv.items():
        conv = conversations[cid]
        qas = [q for q in conv.qa if q.id in {t.case.qa_id for t in group}]
        out.update(attributor(group[0].graph, conv, qas))
    return out


class GraphAttributor:
    """The adapter's ``Attributor`` over an attribution method with ``attribute(graph, case)``."""

    def __init__(self, method: Any) -> None:
        self.method = method

    def __repr__(self) -> str:
        return f"GraphAttributor({self.method!r})"

    def __call__(self, graph: MemoryGraph, conversation: Conversation, qas: Sequence[QA]) -> dict[str, BlameSignal]:
        from memtrace_opt.attribution.failures import collect_failures

        wanted = {q.id for q in qas}
        cases = [c for c in collect_failures(graph, qas) if c.qa_id in wanted]
        return {case.qa_id: self.method.attribute(graph, case) for case in cases}


def make_attributor(cfg: Any | None = None) -> GraphAttributor:
    """The attribution method of the config's ``attribution`` section (tracing by default).

    Only ``tracing`` is wired here; it uses deterministic content checks, so the loop's attribution
    makes no LM calls. Other methods of :mod:`memtrace_opt.attribution` need an LM and are for
    benchmarking attribution, not for driving the optimizer.
    """
    from memtrace_opt.attribution.tracing import TracingAttributor

    method = getattr(cfg, "method", "tracing")
    if method != "tracing":
        from memtrace_opt.errors import ConfigError

        raise ConfigError("config", "attribution.method",
                          f"the optimization loop attributes with 'tracing' only, not {method!r}")
    evidence = getattr(cfg, "evidence", "annotated")
    return GraphAttributor(TracingAttributor(evidence=evidence,
                                             max_frontier=getattr(cfg, "max_frontier", 16)))
