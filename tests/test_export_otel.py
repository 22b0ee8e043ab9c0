"""OTLP export received by a real OTLP/HTTP receiver on loopback that decodes the protobuf (issues #15, #37).

Arize Phoenix installs offline but brings ~140 packages; the receiver below decodes the same OTLP
protobuf a collector or Phoenix would, so the spans, parents and attributes checked are the wire's.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from memtrace_opt import rundir as rd
from memtrace_opt.cli import main
from memtrace_opt.interop.otel import lm_identity
from memtrace_opt.graph import MemoryGraph, Tracer
from memtrace_opt.systems.runner import run_conversation
from memtrace_opt.testing import ScriptedLM, judge_lm, make_conversation
from tests.toy_system import PROMPTS, PromptEchoLM, run_toy

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


def _value(v):
    """An OTLP AnyValue as Python (arrays of strings are all this export sends)."""
    kind = v.WhichOneof("value")
    return [_value(x) for x in v.array_value.values] if kind == "array_value" else getattr(v, kind)


def attrs(span) -> dict:
    return {kv.key: _value(kv.value) for kv in span.attributes}


def received(root, *flags) -> list:
    """The spans of ``export otel ROOT FLAGS`` as a receiver on loopback decoded them."""
    receiver = Receiver()
    try:
        assert main(["export", "otel", str(root), "--endpoint", receiver.url, *flags]) == 0
    finally:
        receiver.close()
    return receiver.spans


def test_spans_mirror_the_graph_and_carry_blame(run):
    root, graph, qa_op = run
    spans = received(root)
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


#: The gen_ai.* attributes the export may set, as registered in the GenAI conventions (interop.otel.SEMCONV).
REGISTERED = {
    "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens", "gen_ai.usage.cache_read.input_tokens", "gen_ai.response.finish_reasons",
    "gen_ai.memory.store.id", "gen_ai.memory.record.id", "gen_ai.memory.record.count", "gen_ai.memory.query.text",
    "gen_ai.memory.records",
}
TOY_SESSIONS = [["ann likes tea", "bob has a cat"], ["ann likes coffee", "bob gave the cat away"]]
TOY_QUESTION = "what does ann like"


@pytest.fixture()
def toy_run(tmp_path):
    """A graph with every memory operation: units created, updated and deleted, a search, LM calls."""
    tracer = Tracer(MemoryGraph({"prompts": PROMPTS, "system": "toy", "conversation_id": "c7"}), lm=PromptEchoLM(),
                    prompts=PROMPTS)
    run_toy(tracer, TOY_SESSIONS, [TOY_QUESTION], delete_word="away")
    root = tmp_path / "toy"
    rd.write_graph(root, "c7", tracer.graph)
    return root, tracer.graph


def _op_spans(spans, graph) -> dict:
    """op id -> (span, attributes), checking every op span hangs under its session under the root."""
    by_id = {s.span_id: s for s in spans}
    out = {}
    for span in spans:
        a = attrs(span)
        if "memtrace.op_id" in a:
            session = by_id[span.parent_span_id]
            conversation = by_id[session.parent_span_id]
            assert session.name == graph.ops[a["memtrace.op_id"]].session
            assert conversation.name == "conversation c7" and not conversation.parent_span_id
            out[a["memtrace.op_id"]] = (span, a)
    assert set(out) == set(graph.ops) and len({s.trace_id for s in spans}) == 1
    return out


def _expected_operation(graph, op) -> str:
    """What each toy op is, by the memory unit it writes (read off the graph, not the exporter)."""
    if op.name == "toy.store":
        return "create_memory" if graph.variables[op.outputs["unit"]].version == 1 else "update_memory"
    return {"toy.delete": "delete_memory", "toy.retrieve": "search_memory"}.get(op.name, "chat")


def test_memory_ops_carry_the_genai_memory_conventions(toy_run):
    root, graph = toy_run
    ops = _op_spans(received(root), graph)
    names = {}
    for op_id, (span, a) in ops.items():
        op = graph.ops[op_id]
        assert a["gen_ai.operation.name"] == _expected_operation(graph, op), op_id
        names.setdefault(a["gen_ai.operation.name"], []).append(op.name)
        assert {k for k in a if k.startswith("gen_ai.")} <= REGISTERED  # project-specific keys live under memtrace.
        if a["gen_ai.operation.name"].endswith("_memory"):
            assert a["gen_ai.memory.store.id"] == "toy/c7"
        if a["gen_ai.operation.name"] in ("create_memory", "update_memory", "delete_memory"):
            unit = graph.variables[op.outputs["unit"]]
            assert (a["gen_ai.memory.record.id"], a["gen_ai.memory.record.count"]) == (unit.name, 1)
            assert ("gen_ai.memory.records" in a) == (not unit.deleted)  # a tombstone has no content to show
    assert sorted(names) == ["chat", "create_memory", "delete_memory", "search_memory", "update_memory"]
    assert names["delete_memory"] == ["toy.delete"] and len(names["create_memory"]) == 2

    search_span, search = next(v for v in ops.values() if v[1]["gen_ai.operation.name"] == "search_memory")
    context = graph.value(graph.ops[search["memtrace.op_id"]].outputs["context"])
    assert context == ["Extract:ann likes coffee"]  # the deleted cat unit is not searched
    assert search["gen_ai.memory.record.count"] == 1 and search["gen_ai.memory.query.text"] == TOY_QUESTION
    assert json.loads(search["gen_ai.memory.records"]) == [{"content": "Extract:ann likes coffee"}]
    writers = {graph.producer[v] for v in graph.ops[search["memtrace.op_id"]].inputs["units"]}
    assert {link.span_id for link in search_span.links} == {ops[w][0].span_id for w in writers}

    _, answer = next(v for v in ops.values() if v[1]["memtrace.op_name"] == "toy.answer")
    assert (answer["gen_ai.provider.name"], answer["gen_ai.request.model"]) == ("scripted", "echo")
    assert (answer["gen_ai.usage.input_tokens"], answer["gen_ai.usage.output_tokens"]) == (3, 2)
    assert answer["memtrace.lm.model_id"] == "scripted/echo" and answer["openinference.span.kind"] == "LLM"


def test_no_content_drops_memory_query_and_records_but_keeps_ids(toy_run):
    root, graph = toy_run
    ops = _op_spans(received(root, "--no-content"), graph)
    for _, a in ops.values():
        assert not {"gen_ai.memory.query.text", "gen_ai.memory.records", "input.value", "output.value"} & set(a)
        assert not any("tea" in str(v) or "coffee" in str(v) for v in a.values())
    search = next(a for _, a in ops.values() if a["gen_ai.operation.name"] == "search_memory")
    assert search["gen_ai.memory.record.count"] == 1 and search["gen_ai.memory.store.id"] == "toy/c7"
    record_ids = {a["gen_ai.memory.record.id"] for _, a in ops.values() if "gen_ai.memory.record.id" in a}
    assert record_ids == {"mem:1", "mem:2"}


@pytest.mark.parametrize("model_id, identity", [
    ("litellm/openai/gpt-4o-mini@http://127.0.0.1:8080/v1", ("openai", "gpt-4o-mini")),
    ("litellm/ollama_chat/qwen2.5", ("ollama_chat", "qwen2.5")),
    ("embedded/qwen-1.5b@cc324af070c2", ("embedded", "qwen-1.5b@cc324af070c2")),
    ("no-backend", ("unknown", "no-backend")),
])
def test_provider_and_model_come_from_the_client_model_id(model_id, identity):
    assert lm_identity(model_id) == identity
