"""Faults of other shapes than the benchmark's injector makes, on the scripted Mem0-like system.

The injector (memtrace_opt/bench/inject.py) drops a fact, empties a unit through its write, or makes the
answer abstain. Real faults look different: the update *decision* rewrites a memory without the fact or
with a contradicting one, the decision deletes it, extraction records a wrong entity or the wrong
speaker, the answer names a wrong or partial entity, retrieval returns other memories. Each is injected
here through a replay override of the op that makes it, and tracing must name that op and its type.
"""

from __future__ import annotations

import pytest

from memtrace_opt.attribution.failures import collect_cases
from memtrace_opt.attribution.tracing import TracingAttributor
from memtrace_opt.graph import Overrides, replay
from tests.test_attribution_system import ScriptLM, record_tt, rerun_tt


def _event(event: str, target: str, text: str, topic: str) -> dict[str, str | None]:
    return {"event": event, "target": target, "text": text, "topic": topic}


CAT = {"text": "Priya: I adopted a grey tabby cat called Biscuit.", "date": "1 May 2024"}
SHAPES = {
    "update decision drops the fact": (
        "q1", {"ingest:s2/tt.decide#0": {"event": _event("UPDATE", "mem:2", "Tom: I found a flat by the river.",
                                                         "Tom:home")}}, "UpdateError", "ingest:s2/tt.decide#0"),
    "update decision contradicts the fact": (
        "q1", {"ingest:s2/tt.decide#0": {"event": _event(
            "UPDATE", "mem:2", "Tom: I live in York near the canal.; I found a flat by the river.", "Tom:home")}},
        "UpdateError", "ingest:s2/tt.decide#0"),
    "decision deletes the memory": (
        "q1", {"ingest:s2/tt.decide#0": {"event": _event("DELETE", "mem:2", "Tom: I live in Leeds near the canal.",
                                                         "Tom:home")}}, "DeletionError", "ingest:s2/tt.decide#0"),
    "extraction records a wrong entity": (
        "q1", {"ingest:s1/tt.extract#1": {"facts": [{"text": "Tom: I live in York near the canal.",
                                                      "topic": "Tom:home"}]}}, "ExtractionError", "ingest:s1/tt.extract#1"),
    "extraction credits the other speaker": (
        "q3", {"ingest:s2/tt.extract#1": {"facts": [{"text": "Tom: My job is nurse at St Mary hospital.",
                                                      "topic": "Tom:work"}]}}, "ExtractionError", "ingest:s2/tt.extract#1"),
    "retrieval returns another memory": (
        "q3", {"answer:q3/tt.retrieve#0": {"context": [CAT]}}, "RetrievalError", "answer:q3/tt.retrieve#0"),
    "answer names a wrong entity": (
        "q0", {"answer:q0/qa.answer#0": {"answer": "Muffin"}}, "ResponseError", "answer:q0/qa.answer#0"),
    "answer names a part of the context that is not the answer": (
        "q3", {"answer:q3/qa.answer#0": {"answer": "St Mary hospital"}}, "ResponseError", "answer:q3/qa.answer#0"),
    "two faults: the earlier one is decisive": (
        "q1", {"ingest:s1/tt.extract#1": {"facts": [{"text": "Tom: I live in York near the canal.",
                                                      "topic": "Tom:home"}]},
               "answer:q1/qa.answer#0": {"answer": "Not mentioned"}}, "ExtractionError", "ingest:s1/tt.extract#1"),
}


@pytest.fixture(scope="module")
def recorded():
    return record_tt()[0]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_tracing_names_the_op_that_made_the_fault(recorded, shape):
    qa_id, outputs, error_type, op_id = SHAPES[shape]
    graph = replay(recorded, rerun_tt(), overrides=Overrides(op_outputs=outputs),
                   lms={"task": ScriptLM(), "judge": ScriptLM()}).graph
    case = next(c for c in collect_cases(graph) if c.qa_id == qa_id)
    assert case.failed, f"{shape}: the fault did not fail {qa_id}"
    blame = TracingAttributor(evidence="annotated", embed=None).attribute(graph, case)
    assert (blame.error_type, blame.op_id) == (error_type, op_id), blame.reason
