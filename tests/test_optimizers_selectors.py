"""Component selectors: which prompts GEPA may rewrite at a step, per method."""

from __future__ import annotations

import pytest

from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.graph import MemoryGraph
from memtrace_opt.optimizers import AllSelector, BlamedSelector, CaseTrace, QACase, RoundRobinSelector, selector_for

CANDIDATE = {"fact_extraction": "a", "memory_update": "b", "question_answering": "c"}


def trace(component: str | None, score: float = 0.0) -> CaseTrace:
    blame = BlameSignal("q", "q?", "g", "p", "UpdateError", "op#0", component, "why") if component else None
    return CaseTrace(QACase("c", "q"), "q?", "g", "p", score, "WRONG", MemoryGraph(), blame)


def call(selector, trajectories=()):
    return selector(None, list(trajectories), [0.0], 0, dict(CANDIDATE))


def test_blamed_selector_never_leaves_the_blamed_set():
    sel = BlamedSelector(["memory_update", "question_answering"])
    assert call(sel) == ["memory_update", "question_answering"]
    assert call(sel, [trace("question_answering"), trace("fact_extraction")]) == ["question_answering"]
    assert call(sel, [trace("fact_extraction")]) == ["memory_update", "question_answering"]
    assert call(sel, [trace("question_answering", score=1.0)]) == ["memory_update", "question_answering"]


def test_all_selector_and_round_robin():
    assert call(AllSelector(list(CANDIDATE))) == list(CANDIDATE)
    rr = RoundRobinSelector(list(CANDIDATE))
    assert [call(rr)[0] for _ in range(4)] == ["fact_extraction", "memory_update", "question_answering",
                                               "fact_extraction"]


def test_selector_for_each_method():
    assert isinstance(selector_for("attributed", ["x"]), BlamedSelector)
    assert isinstance(selector_for("unattributed", ["x"]), AllSelector)
    assert isinstance(selector_for("answer_feedback", ["x"]), RoundRobinSelector)
    with pytest.raises(ValueError):
        selector_for("miprov2", ["x"])
