"""Executors built from a run config: in this process, or each conversation a Ray task.

The contract and the in-process executor are the runner's (:mod:`memtrace_opt.systems.executor`);
this module adds what needs a run config: :func:`make_executor` (``executor:`` in the config) and the
Ray executor.

The Ray executor sends plain data (the config as a dict, the run dir, the conversation and a
:class:`~memtrace_opt.systems.executor.ConversationJob`), never LM clients: each task rebuilds the LMs
with :func:`~memtrace_opt.run.lms.build_run_lms` from the same config and run dir, so it reads and
fills the same disk LM cache and reads keys from the same environment variables as a local run.
That is also why the config refuses ``kind: ray`` with an embedded task or judge model. Attribution
(and its counterfactual replays) still runs in this process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, TypedDict

from memtrace_opt.config import RunConfig
from memtrace_opt.data.model import Conversation
from memtrace_opt.graph.model import MemoryGraph
from memtrace_opt.errors import ConfigError
from memtrace_opt.lm.usage import UsageLedger, UsageTotals
from memtrace_opt.optimizers.backend import GraphJob, RunnerBackend
from memtrace_opt.run.lms import Injected, build_run_lms
from memtrace_opt.systems.executor import ConversationJob, Executor, Finished, LocalExecutor
from memtrace_opt.systems.runner import ConversationRun, run_conversation

__all__ = ["RayExecutor", "UsageParts", "graph_on_worker", "make_executor", "refuse_ray_with_injected", "run_on_worker"]


class UsageParts(TypedDict, total=False):
    """A ledger's totals as plain data (empty without a ledger): what a worker's LM calls cost."""

    total: UsageTotals
    by_model: dict[str, UsageTotals]
    by_role: dict[str, UsageTotals]


def run_on_worker(config: Mapping[str, object], run_dir: str, conversation: Conversation,
                  job: ConversationJob) -> tuple[ConversationRun, UsageParts]:
    """One conversation inside a Ray worker: ``(its run, the LM usage it cost)``.

    Module level, so Ray ships it by reference (the worker imports this module). The LMs are built
    here from the config, exactly as the driver would build them; the usage comes back because the
    driver's ledger cannot see calls made in another process. A ConversationRun pickles as it is
    (its graph is plain dataclasses and JSON-ready values).
    """
    cfg = RunConfig.model_validate(dict(config))  # a ``system.module`` is imported again here, registering it
    lms = build_run_lms(cfg, Path(run_dir))
    run = run_conversation(job.system_name, conversation, lms=lms.lms, prompts=job.prompts, settings=job.settings,
                           judge=job.judge, use_audit=job.use_audit, run_id=job.run_id, dataset=job.dataset,
                           resources=lms.resources)
    return run, _usage_parts(lms.ledger)


def graph_on_worker(config: Mapping[str, object], run_dir: str, spec: Mapping[str, object],
                    job: GraphJob) -> tuple[MemoryGraph, UsageParts]:
    """One optimizer graph job inside a Ray worker: ``(its graph, the LM usage it cost)``; the backend is
    rebuilt from ``spec`` around LMs built from the config, as :func:`run_on_worker` does."""
    cfg = RunConfig.model_validate(dict(config))
    lms = build_run_lms(cfg, Path(run_dir))
    backend = RunnerBackend(spec["system"], lms={"task": lms.lms["task"], "judge": lms.lms["judge"]},
                            settings=spec["settings"], judge=spec["judge"], resources=lms.resources)
    graph: MemoryGraph = backend.graph(job)
    return graph, _usage_parts(lms.ledger)


def _usage_parts(ledger: UsageLedger | None) -> UsageParts:
    """A ledger's totals without its lock (which does not pickle)."""
    if ledger is None:
        return {}
    return {"total": ledger.total, "by_model": dict(ledger.by_model), "by_role": dict(ledger.by_role)}


def _absorb_usage(ledger: UsageLedger | None, parts: UsageParts) -> None:
    """Add a worker's usage to the driver's ledger, so ``usage.json`` counts every call wherever it ran."""
    if ledger is None or not parts:
        return

    def add(into: UsageTotals, more: UsageTotals) -> None:
        for f in fields(UsageTotals):
            setattr(into, f.name, getattr(into, f.name) + getattr(more, f.name))

    with ledger._lock:
        add(ledger.total, parts["total"])
        for name, totals in parts["by_model"].items():
            add(ledger.by_model.setdefault(name, UsageTotals()), totals)
        for role, totals in parts["by_role"].items():
            add(ledger.by_role.setdefault(role, UsageTotals()), totals)


class RayExecutor:
    """Each conversation a Ray task (:func:`run_on_worker`), at most ``workers`` in flight.

    ``address``: None starts a local cluster (or joins ``RAY_ADDRESS``), ``"auto"`` the running one,
    ``"ray://host:10001"`` a remote one; Ray is initialised on first use unless it already is, and left
    running (later evaluations in the process reuse it). Tasks are submitted as slots free up, so a
    failure leaves nothing queued: the tasks still running are cancelled and the task's own exception
    (an LMError, a ConfigError...) is re-raised, chained to Ray's error with the remote traceback.

    API keys: workers read them from their own environment, by the name in ``api_key_env``. A local
    cluster started by this process inherits its environment; on a remote cluster the variable must be
    set where the workers run. Key values are never sent through Ray (a runtime_env is stored and shown
    by the cluster).
    """

    reports_questions = False

    def __init__(self, config: RunConfig | Mapping[str, object], run_dir: str | Path, *, address: str | None = None,
                 workers: int = 1, ledger: UsageLedger | None = None) -> None:
        self.config = config.model_dump(mode="json") if isinstance(config, RunConfig) else dict(config)
        self.run_dir = str(Path(run_dir).resolve())
        self.address, self.workers, self.ledger = address, workers, ledger

    def __repr__(self) -> str:
        return f"RayExecutor(address={self.address!r}, workers={self.workers})"

    def _ray(self) -> Any:
        import ray

        if not ray.is_initialized():
            ray.init(address=self.address, ignore_reinit_error=True, include_dashboard=False, log_to_driver=False)
        return ray

    def each_finished(self, run: Callable[[Conversation], ConversationRun], conversations: Sequence[Conversation],
                      job: ConversationJob) -> Finished:
        if not conversations:
            return
        ray = self._ray()
        config = ray.put(self.config)  # once, not once per task
        yield from self._tasks(ray, run_on_worker, ((c.id, (config, self.run_dir, c, job)) for c in conversations))

    def map_graphs(self, backend: RunnerBackend, jobs: Sequence[GraphJob]) -> list[MemoryGraph]:
        """Each :class:`~memtrace_opt.optimizers.backend.GraphJob`'s graph as a Ray task (:func:`graph_on_worker`),
        in job order: candidate evaluations and the held-out final across conversations."""
        if not jobs:
            return []
        ray = self._ray()
        config, spec = ray.put(self.config), backend.spec()
        done = dict(self._tasks(ray, graph_on_worker, ((i, (config, self.run_dir, spec, j)) for i, j in enumerate(jobs))))
        return [done[i] for i in range(len(jobs))]

    def _tasks(self, ray: Any, fn: Callable[..., Any], work: Iterator[tuple[Any, tuple[Any, ...]]]) -> Iterator[Any]:
        """Run ``fn(*args)`` for each ``(key, args)`` as a Ray task, at most ``workers`` in flight; yield
        ``(key, value)`` as each finishes (the worker's LM usage goes to the ledger). A failure cancels the
        tasks in flight and is re-raised as the task's own exception."""
        task = ray.remote(fn)
        in_flight: dict[Any, Any] = {}

        def submit() -> None:
            item = next(work, None)
            if item is not None:
                in_flight[task.remote(*item[1])] = item[0]

        try:
            for _ in range(self.workers):
                submit()
            while in_flight:
                (ready,), _ = ray.wait(list(in_flight), num_returns=1)
                key = in_flight.pop(ready)
                value, usage = _result(ray, ready)
                _absorb_usage(self.ledger, usage)
                submit()  # keep the slot busy while the caller checkpoints
                yield key, value
        finally:
            for ref in in_flight:  # after a failure, or when the caller stops early
                ray.cancel(ref)


def _result(ray: Any, ref: Any) -> Any:
    """A task's value; its failure re-raised as the task's own exception (so a MemtraceError stays one)."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as err:
        cause = getattr(err, "cause", None)
        if isinstance(cause, Exception):
            raise cause from err
        raise


def refuse_ray_with_injected(cfg: RunConfig, injected: Injected | None, source: str) -> None:
    """Ray workers build their LMs from the config: clients handed to this process cannot reach them."""
    if cfg.executor.kind == "ray" and injected is not None:
        raise ConfigError(source, "executor.kind", "ray workers build their LMs from the config; LMs injected "
                          "into this process cannot reach them (use kind local)")


def make_executor(cfg: RunConfig, run_dir: str | Path, *, ledger: UsageLedger | None = None) -> Executor:
    """The executor of ``cfg.executor``; a Ray one rebuilds the LMs from ``cfg`` in ``run_dir``'s cache."""
    spec = cfg.executor
    if spec.kind == "ray":
        return RayExecutor(cfg, run_dir, address=spec.address, workers=spec.workers, ledger=ledger)
    return LocalExecutor(spec.workers)
