"""A run's memory evolution graphs as OpenTelemetry traces, for Langfuse, Arize Phoenix or any OTLP backend.

One trace per conversation: a root span, one child span per session (ingesting session *s*,
answering question *q*) and one span per operation under its session. Attributes follow the
OpenTelemetry GenAI semantic conventions (``gen_ai.operation.name`` = ``create_memory``,
``update_memory``, ``delete_memory``, ``search_memory``, ``chat`` or ``retrieval``;
``gen_ai.request.model``; ``gen_ai.usage.input_tokens``/``output_tokens``) and OpenInference
(``openinference.span.kind`` LLM, RETRIEVER, EMBEDDING, EVALUATOR or CHAIN; ``input.value`` and
``output.value``), so both kinds of viewer render them. Data flow that crosses the span tree (a
memory unit written while ingesting, read while answering) becomes span links from the reading op
to the writing op. Blame from ``blame.json`` is put on the blamed op's span as attributes and a
``memtrace.blame`` event. ``content=False`` leaves every message, memory and answer text out.

The graph records a logical clock, not wall time: spans are laid out on a synthetic timeline
(one millisecond per graph tick, each op as long as its LM calls took), which keeps their order.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from memtrace_opt.errors import ConfigError
from memtrace_opt.graph.model import (
    BOUNDARY, BUFFER, DELETION, EMBEDDING, EXTRACTION, JUDGE, QA, RETRIEVAL, UPDATE, MemoryGraph, Operation,
)

__all__ = ["OP_KIND", "export_graphs", "export_run"]

#: Op category -> (gen_ai.operation.name, openinference.span.kind); LM-calling ops without a memory
#: meaning are ``chat``/LLM, the rest CHAIN.
OP_KIND: Mapping[str, tuple[str, str]] = {
    EXTRACTION: ("create_memory", "LLM"), UPDATE: ("update_memory", "CHAIN"), DELETION: ("delete_memory", "CHAIN"),
    RETRIEVAL: ("search_memory", "RETRIEVER"), EMBEDDING: ("create_memory", "EMBEDDING"), QA: ("chat", "LLM"),
    JUDGE: ("chat", "EVALUATOR"), BOUNDARY: ("chat", "LLM"), BUFFER: ("update_memory", "CHAIN"),
}
_TICK_NS = 1_000_000
_MAX_VALUE = 4000


def _require_sdk() -> Any:
    try:
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        raise ConfigError("export otel", None, "the OpenTelemetry SDK is not installed: "
                          "pip install 'memtrace-opt[otel]'") from None
    return TracerProvider


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _MAX_VALUE else text[: _MAX_VALUE - 12] + " …[cut]"


def _op_attributes(graph: MemoryGraph, op: Operation, content: bool) -> dict[str, Any]:
    op_name, kind = OP_KIND.get(op.category, ("chat" if op.lm_calls else "retrieval", "LLM" if op.lm_calls else "CHAIN"))
    if op.lm_calls and kind == "CHAIN":
        kind = "LLM"
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": op_name, "openinference.span.kind": kind, "memtrace.op_id": op.id,
        "memtrace.op_name": op.name, "memtrace.category": op.category, "memtrace.status": op.status,
        "memtrace.inputs": [f"{role}={vid}" for role, ids in op.inputs.items() for vid in ids],
        "memtrace.outputs": [f"{role}={vid}" for role, vid in op.outputs.items()],
    }
    if op.prompt is not None:
        attrs["memtrace.prompt_component"] = op.prompt.component
        attrs["memtrace.prompt_sha"] = op.prompt.sha
    if op.lm_calls:
        model = op.lm_calls[0].model
        attrs.update({"gen_ai.request.model": model, "llm.model_name": model,
                      "gen_ai.usage.input_tokens": sum(c.prompt_tokens for c in op.lm_calls),
                      "gen_ai.usage.output_tokens": sum(c.completion_tokens for c in op.lm_calls),
                      "llm.token_count.prompt": sum(c.prompt_tokens for c in op.lm_calls),
                      "llm.token_count.completion": sum(c.completion_tokens for c in op.lm_calls)})
    if op.error:
        attrs["memtrace.error"] = op.error
    if content:
        ins = {role: [graph.variables[v].value for v in ids if v in graph.variables] for role, ids in op.inputs.items()}
        outs = {role: graph.variables[v].value for role, v in op.outputs.items() if v in graph.variables}
        attrs.update({"input.value": _text(ins), "input.mime_type": "application/json",
                      "output.value": _text(outs), "output.mime_type": "application/json"})
    return attrs


def _blame_index(signals: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for s in signals:
        if s.get("op_id"):
            out.setdefault(str(s["op_id"]), []).append(s)
    return out


def export_graphs(graphs: Iterable[MemoryGraph], exporter: Any, *, blame: Iterable[Mapping[str, Any]] = (),
                  content: bool = True, service: str = "memtrace-opt") -> int:
    """Export ``graphs`` through an OpenTelemetry span ``exporter``; returns the number of spans."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = _require_sdk()(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("memtrace_opt.export_otel")
    blamed = _blame_index(blame)
    count = 0
    base = time.time_ns()
    for graph in graphs:
        count += _export_graph(graph, tracer, trace, blamed, content, base)
        base += (max((o.time for o in graph.ops.values()), default=0) + 10) * _TICK_NS
    provider.force_flush()
    provider.shutdown()
    return count


def _export_graph(graph: MemoryGraph, tracer: Any, trace: Any, blamed: Mapping[str, list[Mapping[str, Any]]],
                  content: bool, base: int) -> int:
    from opentelemetry.trace import Link

    ops = sorted(graph.ops.values(), key=lambda o: o.time)
    durations = {o.id: max(_TICK_NS // 2, int(sum(c.latency_s for c in o.lm_calls) * 1e9)) for o in ops}
    end_of = lambda o: base + o.time * _TICK_NS + durations[o.id]  # noqa: E731
    last = max((end_of(o) for o in ops), default=base + _TICK_NS)
    conv = str(graph.meta.get("conversation_id") or graph.meta.get("run_id") or "graph")
    root = tracer.start_span(f"conversation {conv}", start_time=base, attributes={
        "openinference.span.kind": "CHAIN", "memtrace.conversation": conv,
        "memtrace.system": str(graph.meta.get("system", "")), "session.id": conv})
    sessions: dict[str, Any] = {}
    for rec in sorted(graph.sessions.values(), key=lambda r: r.time):
        mine = [o for o in ops if o.session == rec.id]
        start = base + rec.time * _TICK_NS
        sessions[rec.id] = (tracer.start_span(rec.id, context=trace.set_span_in_context(root), start_time=start,
                                              attributes={"openinference.span.kind": "CHAIN", "memtrace.session": rec.id,
                                                          "memtrace.session_kind": rec.kind}),
                            max((end_of(o) for o in mine), default=start + _TICK_NS))
    span_of: dict[str, Any] = {}
    count = 1 + len(sessions)
    for op in ops:
        parent = sessions.get(op.session or "", (root, 0))[0]
        links = []
        for vid in op.input_ids():
            producer = graph.producer.get(vid)
            if producer in span_of and graph.ops[producer].session != op.session:
                links.append(Link(span_of[producer].get_span_context(), {"memtrace.variable": vid}))
        span = tracer.start_span(op.name, context=trace.set_span_in_context(parent), links=links,
                                 start_time=base + op.time * _TICK_NS, attributes=_op_attributes(graph, op, content))
        for signal in blamed.get(op.id, []):
            attrs = {"memtrace.blame.error_type": str(signal.get("error_type")),
                     "memtrace.blame.case_id": str(signal.get("case_id"))}
            if content:
                attrs["memtrace.blame.reason"] = str(signal.get("reason", ""))
            span.set_attributes(attrs)
            span.add_event("memtrace.blame", attributes=attrs, timestamp=end_of(op))
        if op.status == "failed":
            span.set_status(trace.Status(trace.StatusCode.ERROR, op.error or "failed"))
        span.end(end_time=end_of(op))
        span_of[op.id] = span
        count += 1
    for span, end in sessions.values():
        span.end(end_time=end)
    root.end(end_time=last)
    return count


def export_run(run_dir: str | Path, *, endpoint: str | None = None, out: str | Path | None = None,
               content: bool = True, headers: Mapping[str, str] | None = None) -> int:
    """Export every graph of ``run_dir`` (with its ``blame.json``) to an OTLP/HTTP ``endpoint`` (a base
    URL; ``/v1/traces`` is added when missing) or to a JSON file ``out``; returns the span count."""
    from memtrace_opt import run_dir as rd
    from memtrace_opt.graph.io_json import load_json
    from memtrace_opt.schemas import read_blame

    if (endpoint is None) == (out is None):
        raise ConfigError("export otel", None, "give exactly one of --endpoint URL or --out FILE.json")
    _require_sdk()
    root = Path(run_dir)
    paths = rd.list_graphs(root)
    if not paths:
        raise ConfigError(str(root), None, "no graphs/*.jsonl.gz here: run `memtrace-opt eval` first")
    blame_file = root / "blame.json"
    signals = read_blame(blame_file)["signals"] if blame_file.exists() else []
    graphs = (load_json(p) for p in paths)
    if endpoint is not None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        url = endpoint if endpoint.rstrip("/").endswith("/v1/traces") else endpoint.rstrip("/") + "/v1/traces"
        return export_graphs(graphs, OTLPSpanExporter(endpoint=url, headers=dict(headers or {})), blame=signals,
                             content=content)
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    count = export_graphs(graphs, memory, blame=signals, content=content)
    spans = [json.loads(s.to_json()) for s in memory.get_finished_spans()]
    from memtrace_opt.atomic import atomic_write_text

    atomic_write_text(Path(out), json.dumps({"spans": spans}, indent=1, ensure_ascii=False))  # type: ignore[arg-type]
    return count
