"""A round's failures → blame → the components to optimize, per method.

- ``attributed``: the attributor blames each failure on its earliest decisive faulty op; the round
  optimizes the target components that op used (prompt-less blame, e.g. vector retrieval, is
  counted as unoptimizable and optimizes nothing), and those of a compound failure's chain: the
  ops still at fault once the earliest is fixed.
- ``unattributed``: every failure is a ResponseError meant for every target (the ablation).
- ``answer_feedback``: no blame; every target is eligible, one per GEPA step.
- ``miprov2``: no blame; only the targets MIPROv2 can express (the QA prompt).

Also the bridge to :mod:`memtrace_opt.attribution`: :class:`GraphAttributor` runs an attribution
method over a conversation graph's failed questions (the adapter's ``Attributor`` contract).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.attribution.methods import make_attribution_method
from memtrace_opt.data.model import QA, Conversation
from memtrace_opt.errors import ConfigError
from memtrace_opt.graph import MemoryGraph
from memtrace_opt.loop.artifacts import blame_summary
from memtrace_opt.optimizers.adapter import Attributor
from memtrace_opt.optimizers.cases import CaseTrace
from memtrace_opt.optimizers.feedback import unattributed_signal
from memtrace_opt.optimizers.miprov2 import MIPRO_COMPONENTS
from memtrace_opt.rundir import BlameFile
from memtrace_opt.rundir.schemas import BLAME, stamp

__all__ = ["GraphAttributor", "RoundBlame", "make_attributor", "round_blame"]


@dataclass
class RoundBlame:
    """What attribution said about a round's failures, and what the round will optimize.

    ``signals`` are keyed by question id; ``summary`` is the grouped blame (``aggregate``'s shape).
    """

    signals: dict[str, BlameSignal]
    summary: dict[str, Any]
    components: list[str]
    failures: int
    unattributed_cases: list[str] = field(default_factory=list)
    verification_failed: int = 0

    def to_dict(self) -> BlameFile:
        """The round's ``blame.json``: a run's blame shape (``memtrace-blame/2``) plus the round's fields."""
        return stamp(BLAME, {"failures": self.failures, "components": self.components,
                             "not_attributed": self.unattributed_cases, "verification_failed": self.verification_failed,
                             "signals": [s.to_dict() for s in self.signals.values()], "aggregate": self.summary})


def round_blame(method: str, traces: Sequence[CaseTrace], targets: Sequence[str],
                attributor: Attributor | None, conversations: Mapping[str, Conversation]) -> RoundBlame:
    """Blame the failed ``traces`` the way ``method`` does and pick the components to optimize."""
    failed = [t for t in traces if t.failed]
    if not failed:
        return RoundBlame({}, blame_summary([]), [], 0)
    if method == "attributed":
        from memtrace_opt.attribution.aggregate import aggregate

        assert attributor is not None
        before = len(getattr(attributor, "verification_failures", []))
        signals = _attribute(failed, attributor, conversations)
        graphs = {s.case_id: t.graph for t in failed if (s := signals.get(t.case.qa_id)) is not None}
        summary = aggregate(list(signals.values()), graphs)
        counts = {c: e["count"] + e["chained"] for c, e in summary["components"].items() if c in targets}
        ordered = sorted(counts, key=lambda c: (-counts[c], list(targets).index(c)))
        missing = [t.case.qa_id for t in failed if t.case.qa_id not in signals]
        unverified = len(getattr(attributor, "verification_failures", [])) - before
        return RoundBlame(signals, summary, ordered, len(failed), missing, unverified)
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
    """The adapter's ``Attributor`` over an attribution method with ``attribute(graph, case)``.

    With ``verify_lms`` (the task and judge LMs), each blame is checked by counterfactual replay
    of the conversation's graph (:class:`~memtrace_opt.attribution.counterfactual.CounterfactualAttributor`,
    grey-zone arbiter included), as ``attribution.counterfactual`` asks. A verification whose replay
    fails is printed as an error line and counted in ``verification_failures``, never dropped.
    """

    def __init__(self, method: Any, *, verify_lms: Mapping[str, Any] | None = None,
                 resources: Mapping[str, Any] | None = None) -> None:
        self.method = method
        self.verify_lms = dict(verify_lms) if verify_lms else None
        self.resources = dict(resources or {})
        self.verification_failures: list[tuple[str, str]] = []

    def __repr__(self) -> str:
        return f"GraphAttributor({self.method!r}, counterfactual={self.verify_lms is not None})"

    def __call__(self, graph: MemoryGraph, conversation: Conversation, qas: Sequence[QA]) -> dict[str, BlameSignal]:
        from memtrace_opt.attribution.failures import collect_failures

        wanted = {q.id for q in qas}
        cases = [c for c in collect_failures(graph, qas) if c.qa_id in wanted]
        method = self._verifying(graph, conversation) if cases and self.verify_lms else self.method
        out = {case.qa_id: method.attribute(graph, case) for case in cases}
        failures = getattr(method, "verification_failures", [])
        for case_id, why in failures:
            print(f"memtrace-opt: error: counterfactual verification of {case_id} failed: {why}", file=sys.stderr)
        self.verification_failures.extend(failures)
        return out

    def _verifying(self, graph: MemoryGraph, conversation: Conversation) -> Any:
        from memtrace_opt.attribution.counterfactual import CounterfactualAttributor
        from memtrace_opt.systems.runner import rerun_for

        assert self.verify_lms is not None
        return CounterfactualAttributor(self.method, rerun_for(graph, conversation, resources=self.resources),
                                        self.verify_lms)


def make_attributor(cfg: Any | None = None, *, lms: Mapping[str, Any] | None = None,
                    resources: Mapping[str, Any] | None = None) -> GraphAttributor:
    """The attribution method of the config's ``attribution`` section (tracing by default).

    Only ``tracing`` is wired here: its content checks are deterministic. With
    ``attribution.counterfactual`` (and ``lms`` to replay with) every blame is verified by replay;
    without LMs it cannot be, and asking for it is a config error rather than a silent skip.
    """
    method = getattr(cfg, "method", "tracing")
    if method != "tracing":
        raise ConfigError("config", "attribution.method",
                          f"the optimization loop attributes with 'tracing' only, not {method!r}")
    evidence = getattr(cfg, "evidence", "annotated")
    tracing = make_attribution_method("tracing", evidence=evidence, max_frontier=getattr(cfg, "max_frontier", 16))
    if not getattr(cfg, "counterfactual", False):
        return GraphAttributor(tracing)
    if not lms:
        raise ConfigError("config", "attribution.counterfactual", "counterfactual verification needs the task "
                          "and judge LMs to replay with")
    return GraphAttributor(tracing, verify_lms=lms, resources=resources)
