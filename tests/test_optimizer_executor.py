"""The optimizer's graph jobs through an executor: the same rollouts, graphs and loop result however many
workers make them (threads here; Ray against a served stub in tests/test_executor_ray.py)."""

from __future__ import annotations

import json

from memtrace_opt.systems.executor import LocalExecutor
from memtrace_opt.loop import LoopContext, LoopData, LoopPlan, run_loop
from memtrace_opt.optimizers.adapter import MemoryPromptAdapter
from memtrace_opt.optimizers.backend import GraphJob
from memtrace_opt.optimizers.cases import cases_of
from memtrace_opt.systems.base import QA_PROMPT
from tests.test_loop_fixtures import (
    QA_MAGIC, SEED_QA, ReflectionLM, TaskLM, accounted, backend, conversations, qa_blamer,
)


class CountingExecutor(LocalExecutor):
    """A thread pool that records how many jobs each call handed it."""

    def __init__(self, workers: int) -> None:
        super().__init__(workers)
        self.batches: list[int] = []

    def map_graphs(self, backend, jobs):
        self.batches.append(len(jobs))
        return super().map_graphs(backend, jobs)


def test_candidate_evaluation_across_conversations_is_one_batch_with_the_serial_results():
    convs = conversations()
    cases = cases_of(convs)
    candidate = {QA_PROMPT: SEED_QA + "\n" + QA_MAGIC}
    results = {}
    for workers in (1, 2):
        runner = backend(TaskLM(convs))
        runner.executor = CountingExecutor(workers)
        adapter = MemoryPromptAdapter(runner, convs, base_prompts={QA_PROMPT: SEED_QA}, mode="answer_feedback")
        traces = adapter.run(cases, candidate)
        again = adapter.run(cases, candidate)  # served from the store: no new job
        results[workers] = ([(t.case.qa_id, t.prediction, t.score) for t in traces],
                            [t.graph.fingerprint() for t in traces], runner.executor.batches)
        assert [t.prediction for t in again] == [t.prediction for t in traces]
    assert results[1][0] == results[2][0] and results[1][1] == results[2][1]
    assert results[2][2] == [len(convs)]  # every conversation's graph in one call: an executor can overlap them


def test_graph_jobs_come_back_in_job_order():
    convs = conversations()
    runner = backend(TaskLM(convs))
    jobs = [GraphJob(c, tuple(c.qa), {QA_PROMPT: SEED_QA}) for c in convs]
    graphs = LocalExecutor(3).map_graphs(runner, jobs)
    assert [g.meta["conversation_id"] for g in graphs] == [c.id for c in convs]


def test_the_loop_with_two_workers_writes_what_one_worker_writes(tmp_path):
    convs = conversations()
    finals = []
    for workers in (1, 2):
        runner = backend(TaskLM(convs))
        runner.executor = LocalExecutor(workers)
        run_dir = tmp_path / f"w{workers}"
        ctx = LoopContext(
            backend=runner, data=LoopData(tuple(convs[:1]), tuple(convs[1:2]), tuple(convs[2:])),
            plan=LoopPlan(method="attributed", rounds=1, max_metric_calls=60, minibatch_size=3),
            run_dir=run_dir, reflection_lm=accounted(ReflectionLM(), "reflection"), attributor=qa_blamer(),
            base_prompts={QA_PROMPT: SEED_QA},
        )
        state = run_loop(ctx)
        final = json.loads((run_dir / "final.json").read_text())
        finals.append((state.best_candidate, final["cases"], final["best_accuracy"]))
    assert finals[0] == finals[1] and finals[0][2] == 1.0
