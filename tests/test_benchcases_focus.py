"""Focused injection: replaying ingestion plus the case's own question gives the same cases, cheaper."""

from __future__ import annotations

import pytest

from memtrace_opt.bench.cases import CaseBuilder
from memtrace_opt.data import load_dataset
from memtrace_opt.systems.runner import make_rerun, run_conversation
from tests.test_attribution_cli import RESOURCES, lms


class CountingLM:
    """Counts the calls that reach the wrapped scripted LM."""

    def __init__(self, inner):
        self.inner, self.calls, self.model_id = inner, 0, inner.model_id

    def chat(self, messages, **kw):
        self.calls += 1
        return self.inner.chat(messages, **kw)


def build(system: str, focused: bool):
    conv = load_dataset("mini").conversations[0]
    qas = list(conv.scored_qa())
    models = {role: CountingLM(lm) for role, lm in lms().items()}
    run = run_conversation(system, conv, qas, lms=models, settings={"top_k": 2}, judge="llm", resources=RESOURCES)
    before = sum(m.calls for m in models.values())
    rerun = make_rerun(system, conv, qas, {"top_k": 2}, "llm", resources=RESOURCES)
    focus = (lambda subset: make_rerun(system, conv, subset, {"top_k": 2}, "llm", resources=RESOURCES)) if focused else None
    builder = CaseBuilder(per_type=10, max_real=0)
    builder.add_run(run.graph, qas, rerun, models, system=system, focus=focus)
    return builder, sum(m.calls for m in models.values()) - before


@pytest.mark.parametrize("system", ["long_context", "rag"])
def test_focused_injection_finds_the_same_cases_with_fewer_calls(system):
    full, full_calls = build(system, focused=False)
    focused, focused_calls = build(system, focused=True)
    truth = lambda b: sorted((c.case.qa_id, c.error_type, c.op_id) for c in b.cases)  # noqa: E731
    assert truth(focused) == truth(full) and len(full.cases) >= 3
    assert focused_calls < full_calls
    for bc in focused.cases:
        answered = [s for s in bc.graph.sessions if s.startswith("answer:")]
        assert answered == [f"answer:{bc.case.qa_id}"] and bc.graph.meta["qa_ids"] == [bc.case.qa_id]
        assert bc.op_id in bc.graph.ops and bc.case.failed
