"""Scoped replay: a minibatch score under a changed ingestion prompt re-executes only the questions' cone."""

from __future__ import annotations

import re
from typing import Any

import pytest

from memtrace_opt.errors import GraphError
from memtrace_opt.graph import New, Variable, replay, upstream_cone
from memtrace_opt.optimizers.adapter import MemoryPromptAdapter
from memtrace_opt.optimizers.backend import RunnerBackend
from memtrace_opt.optimizers.cases import cases_of
from memtrace_opt.graph.model import RETRIEVED
from memtrace_opt.systems.base import QA_PROMPT
from memtrace_opt.systems.registry import register_system
from memtrace_opt.systems.runner import make_rerun
from tests.test_loop_fixtures import PROMPTS, SEED_QA, LoopTestSystem, TaskLM, accounted, conversations

SYSTEM = "scopetest"
CHANGED = {**PROMPTS, QA_PROMPT: SEED_QA, "fact_extraction": "Extract every fact stated in the message, exactly."}


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= 4}


@register_system
class ScopeTestSystem(LoopTestSystem):
    """The loop fixture system with an index lookup: retrieval reads only the units sharing a word with
    the question (as Mem0's search reads only its hits), so each question has its own small cone."""

    name = SYSTEM

    def retrieve(self, qa: Any, question: Variable) -> Variable:
        hits = [u for u in self.units if _words(str(u.value["text"])) & _words(qa.question)]
        return self.tracer.call("looptest.retrieve", inputs={"query": question, "units": hits},
                                params={"top_k": self.settings.top_k},
                                outputs={"context": New(f"retrieved:{qa.id}", RETRIEVED)})["context"]


def recorded(task: TaskLM):
    conv = conversations()[0]
    backend = RunnerBackend(SYSTEM, lms={"task": accounted(task, "task")}, judge="deterministic")
    prompts = {**PROMPTS, QA_PROMPT: SEED_QA}
    return backend, conv, backend.record(conv, conv.qa, prompts)


def cat_question(conv):
    return next(q for q in conv.qa if "cat" in q.question)


def test_the_cone_of_a_question_holds_only_the_ingestion_that_reached_its_answer():
    _, conv, graph = recorded(TaskLM(conversations()))
    cone = upstream_cone(graph, [cat_question(conv).id])
    extracts = [op for op in cone if "extract" in op]
    assert len([op for op in graph.ops if "extract" in op]) == 4 and len(extracts) == 1
    with pytest.raises(GraphError, match="no recorded answer"):
        upstream_cone(graph, ["no-such-question"])


def test_scoped_replay_reruns_only_the_cone_and_gives_the_full_replays_answer():
    task = TaskLM(conversations())
    _, conv, graph = recorded(task)
    qa = cat_question(conv)
    rerun = make_rerun(SYSTEM, conv, [qa], judge="deterministic")
    from memtrace_opt.graph.tracer import Overrides

    before = task.calls["extract"]
    full = replay(graph, rerun, overrides=Overrides(prompts=CHANGED), lms={"task": task})
    full_extracts = task.calls["extract"] - before
    scoped = replay(graph, rerun, overrides=Overrides(prompts=CHANGED), lms={"task": task}, scope=[qa.id])
    scoped_extracts = task.calls["extract"] - before - full_extracts
    assert (full_extracts, scoped_extracts) == (4, 1)
    assert scoped.stats.pinned == 3 and scoped.graph.meta["scoped_to"] == [qa.id]
    name = f"answer:{qa.id}"
    assert scoped.graph.value(scoped.graph.latest_id(name)) == full.graph.value(full.graph.latest_id(name))
    pinned = [op for op in scoped.graph.ops.values() if op.reused and op.memo_key is None]
    assert len(pinned) == 3  # kept outputs carry no memo key: never reused as the new prompt's output


def test_the_adapter_scores_minibatches_scoped_and_validation_in_full():
    convs = conversations()
    task = TaskLM(convs)
    backend = RunnerBackend(SYSTEM, lms={"task": accounted(task, "task")}, judge="deterministic")
    base = {**PROMPTS, QA_PROMPT: SEED_QA}
    adapter = MemoryPromptAdapter(backend, convs[:2], base_prompts=base, mode="answer_feedback",
                                  scoped_replay=True, full_conversations={convs[1].id})
    train, val = cases_of([convs[0]]), cases_of([convs[1]])
    adapter.run(train, {})
    adapter.run(val, {})
    candidate = {"fact_extraction": CHANGED["fact_extraction"]}
    minibatch = [c for c in train if c.qa_id == cat_question(convs[0]).id]

    before = task.calls["extract"]
    adapter.evaluate(minibatch, candidate)
    assert task.calls["extract"] - before == 1 and adapter.scoped_rollouts == 1
    before = task.calls["extract"]
    adapter.evaluate(val, candidate)  # the validation set: a full replay
    assert task.calls["extract"] - before == 4 and adapter.scoped_rollouts == 1
    # the loop's own run of the training conversation is never served by the scoped graph
    before = task.calls["extract"]
    adapter.run(minibatch, candidate)
    assert task.calls["extract"] - before == 4

    unscoped = MemoryPromptAdapter(backend, convs[:2], base_prompts=base, mode="answer_feedback")
    unscoped.run(train, {})
    before = task.calls["extract"]
    unscoped.evaluate(minibatch, candidate)
    assert task.calls["extract"] - before == 4 and unscoped.scoped_rollouts == 0
