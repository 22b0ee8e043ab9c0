"""Concurrent evaluation: N workers write the same results and graphs as one, in the same order."""

from __future__ import annotations

import json
import threading

import pytest

from memtrace_opt import rundir as rd
from memtrace_opt.systems.evaluate import evaluate_system
from tests.test_loop_fixtures import SYSTEM, TaskLM, accounted, conversations


class SlowTaskLM(TaskLM):
    """The fixture task LM, recording how many calls overlap (proof that conversations ran concurrently)."""

    def __init__(self, convs):
        super().__init__(convs)
        self.active = self.peak = 0
        self.lock = threading.Lock()

    def chat(self, messages, **kw):
        import time

        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        time.sleep(0.01)
        try:
            return super().chat(messages, **kw)
        finally:
            with self.lock:
                self.active -= 1


def evaluate(tmp_path, workers):
    convs = conversations()
    task = SlowTaskLM(convs)
    run = evaluate_system(SYSTEM, convs, lms={"task": accounted(task, "task")}, run_dir=tmp_path, judge="deterministic",
                          run_id="r", progress=False, workers=workers)
    return run, task


@pytest.mark.parametrize("workers", [3])
def test_n_workers_give_the_serial_results_graphs_and_order(tmp_path, workers):
    serial, one = evaluate(tmp_path / "serial", 1)
    parallel, many = evaluate(tmp_path / "parallel", workers)
    assert one.peak == 1 and many.peak > 1  # the pool really overlapped conversations
    assert [r.to_dict() for r in parallel.results] == [r.to_dict() for r in serial.results]
    saved = [json.loads((tmp_path / d / "results.json").read_text()) for d in ("serial", "parallel")]
    assert saved[0]["conversations"] == saved[1]["conversations"] == ["c-opt", "c-val", "c-held"]
    assert saved[0]["results"] == saved[1]["results"]
    for conv in ("c-opt", "c-val", "c-held"):
        a, b = rd.read_graph(tmp_path / "serial", conv), rd.read_graph(tmp_path / "parallel", conv)
        assert a.fingerprint() == b.fingerprint() and list(a.ops) == list(b.ops)


def test_a_failing_conversation_keeps_the_finished_ones_checkpointed(tmp_path):
    convs = conversations()

    class Breaks(SlowTaskLM):
        def chat(self, messages, **kw):
            if "Mango" in json.dumps(messages):  # c-held's pet: that conversation fails
                raise RuntimeError("model fell over")
            return super().chat(messages, **kw)

    with pytest.raises(RuntimeError, match="fell over"):
        evaluate_system(SYSTEM, convs, lms={"task": accounted(Breaks(convs), "task")}, run_dir=tmp_path,
                        judge="deterministic", run_id="r", progress=False, workers=2)
    assert set(rd.done_conversations(tmp_path)) <= {"c-opt", "c-val"} and rd.done_conversations(tmp_path)
