"""OTLP export received by a real OTLP/HTTP receiver on loopback that decodes the protobuf (issue #15)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from memtrace_opt import run_dir as rd
from memtrace_opt.cli import main
from memtrace_opt.systems.runner import run_conversation
from memtrace_opt.testing import ScriptedLM, judge_lm, make_conversation

pytest.importorskip("opentelemetry.sdk")
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402

SECRET = "Biscuit-the-grey-tabby"


@pytest.fixture()
def run(tmp_path):
    conv = make_conversation([[("Ann", f"My cat is called {SECRET}."), ("Bob", "Nice.")],
                              [("Ann", "I moved to Leeds."), ("Bob", "Cool.")]],
                             [{"question": "What is Ann's cat called?", "answer": SECRET, "evidence": ["D1:1"]}])
    result = run_conversation("long_context", conv, lms={"task": ScriptedLM([], default="Not mentioned"),
                                                         "judge": judge_lm()})
    root = tmp_path / "run"
    rd.write_graph(root, conv.id, result.graph)
    qa_op = result.graph.producer[result.graph.latest_id("answer:c1/q0")]
    (root / "blame.json").write_text(json.dumps({"signals": [{
        "case_id": "c1/q0", "error_type": "ResponseError", "op_id": qa_op, "reason": f"context held {SECRET}"}]}))
    return root, result.graph, qa_op


class Receiver:
    """A minimal OTLP/HTTP trace receiver: POST /v1/traces with a protobuf ExportTraceServiceRequest."""

    def __init__(self) -> None:
        self.spans: list = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                for rs in request.resource_spans:
                    for ss in rs.scope_spans:
                        receiver.spans.extend(ss.spans)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


def attrs(span) -> dict:
    out = {}
    for kv in span.attributes:
        v = kv.value
        out[kv.key] = v.string_value or v.int_value or [x.string_value for x in v.array_value.values]
    return out


def test_spans_mirror_the_graph_and_carry_blame(run):
    root, graph, qa_op = run
    receiver = Receiver()
    try:
        assert main(["export", "otel", str(root), "--endpoint", receiver.url]) == 0
    finally:
        receiver.close()
    spans = receiver.spans
    by_id = {s.span_id: s for s in spans}
    op_spans = {attrs(s)["memtrace.op_id"]: s for s in spans if "memtrace.op_id" in attrs(s)}
    assert set(op_spans) == set(graph.ops)  # one span per operation
    assert len(spans) == len(graph.ops) + len(graph.sessions) + 1  # + sessions + the conversation root
    for op_id, span in op_spans.items():
        parent = by_id[span.parent_span_id]
        assert parent.name == graph.ops[op_id].session and by_id[parent.parent_span_id].name == "conversation c1"
    retrieve = next(s for i, s in op_spans.items() if graph.ops[i].name == "long_context.retrieve")
    writer = graph.producer[graph.ops[attrs(retrieve)["memtrace.op_id"]].inputs["memory"][0]]
    assert [link.span_id for link in retrieve.links] == [op_spans[writer].span_id]  # data flow across sessions
    answer = op_spans[qa_op]
    a = attrs(answer)
    assert a["gen_ai.operation.name"] == "chat" and a["openinference.span.kind"] == "LLM"
    assert a["memtrace.blame.error_type"] == "ResponseError" and [e.name for e in answer.events] == ["memtrace.blame"]
    assert attrs(retrieve)["gen_ai.operation.name"] == "search_memory"
    assert SECRET in a["input.value"]


def test_no_content_leaves_no_message_text_in_any_span(run, tmp_path):
    root, graph, _ = run
    out = tmp_path / "spans.json"
    assert main(["export", "otel", str(root), "--out", str(out), "--no-content"]) == 0
    text = out.read_text()
    assert SECRET not in text and "Leeds" not in text
    assert len(json.loads(text)["spans"]) == len(graph.ops) + len(graph.sessions) + 1


def test_export_needs_exactly_one_target(run, capsys):
    root, _, _ = run
    assert main(["export", "otel", str(root)]) == 2
    assert "exactly one of --endpoint URL or --out FILE.json" in capsys.readouterr().err
