"""Where a run's conversations execute, as the runner sees it: the executor contract and the in-process one.

Each conversation has its own tracer and graph, so conversations are independent units of work. An
executor only decides where they run and yields ``(conversation id, ConversationRun)`` as each one
finishes; :func:`memtrace_opt.systems.evaluate.evaluate_system` checkpoints them in the config's
conversation order, so every executor, with any number of workers, writes the same files.

The optimizer uses the same executor for its graph jobs (:meth:`Executor.map_graphs`): each
candidate evaluation and the held-out final make one graph per conversation (a recording, or a
replay of a stored graph), run together and returned in job order, so the loop's files are the
same whatever ran them. An executor running elsewhere (Ray) is built from a run config by
:mod:`memtrace_opt.run.executors`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from memtrace_opt.systems.runner import ConversationRun

__all__ = ["ConversationJob", "Executor", "Finished", "LocalExecutor"]

Finished = Iterator[tuple[str, "ConversationRun"]]


@dataclass(frozen=True)
class ConversationJob:
    """What :func:`~memtrace_opt.systems.runner.run_conversation` needs besides a conversation and the
    LMs, as plain data: it crosses to a Ray worker, which builds the LMs itself."""

    system_name: str
    prompts: Mapping[str, str] | None = None
    settings: Any = None  # a mapping or a SystemSettings (pydantic, so it pickles)
    judge: str = "llm"
    use_audit: bool = False
    run_id: str | None = None
    dataset: str | None = None


class Executor(Protocol):
    """Runs conversations and yields each ``(id, run)`` as it finishes; a failure cancels what has not
    started and is re-raised (what was yielded before is already checkpointed by the caller).

    ``run`` runs one conversation in this process with the caller's LMs (the local executor uses it);
    ``job`` is the same work as plain data (an executor running elsewhere uses it).
    ``reports_questions``: whether ``run``'s per-question progress reaches the caller (else the caller
    advances its progress bar when a conversation finishes).
    """

    reports_questions: bool

    def each_finished(self, run: Callable[[Any], ConversationRun], conversations: Sequence[Any],
                      job: ConversationJob) -> Finished: ...

    def map_graphs(self, backend: Any, jobs: Sequence[Any]) -> list[Any]:
        """The optimizer's graph jobs (records and replays of candidates), each job's graph in job order."""
        ...


class LocalExecutor:
    """In this process: in order with one worker, else on a bounded thread pool of ``workers``.

    Threads, not processes, because the LM clients (an in-process model, one cache connection) are
    shared; more than one worker pays with a served model that has as many slots.
    """

    reports_questions = True

    def __init__(self, workers: int = 1) -> None:
        self.workers = workers

    def __repr__(self) -> str:
        return f"LocalExecutor(workers={self.workers})"

    def each_finished(self, run: Callable[[Any], ConversationRun], conversations: Sequence[Any],
                      job: ConversationJob) -> Finished:
        if self.workers <= 1:
            for conv in conversations:
                yield conv.id, run(conv)
            return
        pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="memtrace-eval")
        try:
            futures = {pool.submit(run, conv): conv.id for conv in conversations}
            for future in as_completed(futures):
                yield futures[future], future.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def map_graphs(self, backend: Any, jobs: Sequence[Any]) -> list[Any]:
        """Each graph job's graph, in job order: one by one, or on the thread pool."""
        if self.workers <= 1 or len(jobs) <= 1:
            return [backend.graph(job) for job in jobs]
        with ThreadPoolExecutor(max_workers=min(self.workers, len(jobs)), thread_name_prefix="memtrace-graph") as pool:
            return list(pool.map(backend.graph, jobs))
