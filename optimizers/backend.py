"""How the optimizer runs a memory system: record a conversation once, then replay it per candidate.

The optimizer never builds a system itself. It sees one through a :class:`SystemBackend` with two
verbs — ``record`` (a full traced run of some questions of a conversation) and ``replay`` (re-run a
recorded graph with other prompt texts or settings, reusing every operation the change does not
reach). That is what makes a rollout of a changed question-answering prompt cost only the answer
and judge calls: ingestion is reused from the recorded graph.

:class:`RunnerBackend` is the real backend over :mod:`memtrace_opt.systems.runner`; tests pass a
small scripted one. Outcomes are always read back from the graph by
:func:`memtrace_opt.graph.outcome.read_judged_outcome`, so a replayed run is scored exactly like a recorded one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Mapping, Protocol, Sequence

from memtrace_opt.data.model import QA, Conversation
from memtrace_opt.graph import MemoryGraph, Overrides, ReplayResult, replay
from memtrace_opt.lm.base import LMClient

__all__ = ["GraphJob", "RunnerBackend", "SystemBackend", "changed_prompts"]


@dataclass(frozen=True)
class GraphJob:
    """One conversation's graph to make, as plain data (it may cross to a Ray worker): a fresh recording
    of ``qas`` under ``prompts`` when ``base`` is None, else a replay of ``base`` (scoped to ``scope``'s
    questions' upstream cone when given)."""

    conversation: Conversation
    qas: tuple[QA, ...]
    prompts: Mapping[str, str]
    base: MemoryGraph | None = None
    scope: tuple[str, ...] | None = None


class SystemBackend(Protocol):
    """A memory system the optimizer can run: full prompt set, record, replay."""

    system: str

    def default_prompts(self) -> dict[str, str]:
        """Every prompt component of the system with its default text."""

    def record(self, conversation: Conversation, qas: Sequence[QA], prompts: Mapping[str, str]) -> MemoryGraph:
        """A fresh traced run: ingest ``conversation``, answer and judge ``qas`` with ``prompts``."""

    def replay(
        self, graph: MemoryGraph, conversation: Conversation, qas: Sequence[QA], prompts: Mapping[str, str],
        *, scope: Collection[str] | None = None,
    ) -> ReplayResult:
        """Re-run ``graph``'s conversation for ``qas`` with ``prompts``, reusing unchanged ops (and, with
        ``scope``, every op outside those questions' upstream cone: a scoped replay)."""

    def with_settings(self, settings: Mapping[str, Any]) -> SystemBackend:
        """The same backend with other system settings (tuning tries several)."""

    def graphs(self, jobs: Sequence[GraphJob]) -> list[MemoryGraph]:
        """Each job's graph, in job order (conversations are independent: an executor may run them at once)."""


def changed_prompts(graph: MemoryGraph, prompts: Mapping[str, str]) -> dict[str, str]:
    """The components of ``prompts`` whose text differs from the prompt set recorded in ``graph``."""
    recorded = graph.meta.get("prompts", {})
    return {name: text for name, text in prompts.items() if recorded.get(name) != text}


class RunnerBackend:
    """The real backend: :func:`memtrace_opt.systems.runner.run_conversation` and ``make_rerun``.

    ``resources`` seeds each run's system resources (tests pass a fake embedder).
    """

    def __init__(
        self,
        system: str,
        *,
        lms: Mapping[str, LMClient],
        settings: Mapping[str, Any] | None = None,
        judge: str = "llm",
        resources: Mapping[str, Any] | None = None,
        executor: Any = None,
    ) -> None:
        self.system = system
        self.lms = dict(lms)
        self.settings = dict(settings or {})
        self.judge = judge
        self.resources = dict(resources or {})
        self.executor = executor  # memtrace_opt.systems.executor: where graphs() runs its jobs (None: here, in order)

    def __repr__(self) -> str:
        return f"RunnerBackend({self.system!r}, settings={self.settings}, judge={self.judge!r})"

    def default_prompts(self) -> dict[str, str]:
        from memtrace_opt.systems.registry import get_system

        return dict(get_system(self.system).prompts())

    def record(self, conversation: Conversation, qas: Sequence[QA], prompts: Mapping[str, str]) -> MemoryGraph:
        from memtrace_opt.systems.runner import run_conversation

        run = run_conversation(
            self.system, conversation, list(qas), lms=self.lms, prompts=dict(prompts),
            settings=self.settings, judge=self.judge, resources=self.resources,
        )
        return run.graph

    def replay(
        self, graph: MemoryGraph, conversation: Conversation, qas: Sequence[QA], prompts: Mapping[str, str],
        *, scope: Collection[str] | None = None,
    ) -> ReplayResult:
        from memtrace_opt.systems.runner import make_rerun

        rerun = make_rerun(self.system, conversation, list(qas), self.settings, self.judge, resources=self.resources)
        overrides = Overrides(prompts=changed_prompts(graph, prompts))
        result = replay(graph, rerun, overrides=overrides, lms=self.lms, scope=scope)
        result.graph.meta["settings"] = dict(self.settings)
        return result

    def with_settings(self, settings: Mapping[str, Any]) -> RunnerBackend:
        return RunnerBackend(self.system, lms=self.lms, settings=settings, judge=self.judge, resources=self.resources,
                             executor=self.executor)

    def spec(self) -> dict[str, Any]:
        """What a worker needs to build this backend again around its own LMs (plain data)."""
        return {"system": self.system, "settings": dict(self.settings), "judge": self.judge}

    def graph(self, job: GraphJob) -> MemoryGraph:
        """One job's graph: recorded, or replayed from its base."""
        if job.base is None:
            return self.record(job.conversation, job.qas, job.prompts)
        return self.replay(job.base, job.conversation, job.qas, job.prompts, scope=job.scope).graph

    def graphs(self, jobs: Sequence[GraphJob]) -> list[MemoryGraph]:
        """Each job's graph, in job order: through the executor (threads or Ray tasks), else one by one."""
        if self.executor is None:
            return [self.graph(job) for job in jobs]
        return list(self.executor.map_graphs(self, jobs))
