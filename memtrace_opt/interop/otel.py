"""A run's memory evolution graphs as OpenTelemetry traces, for Langfuse, Arize Phoenix or any OTLP backend.

One trace per conversation: a root span, one child span per session (ingesting session *s*,
answering question *q*) and one span per operation under its session. Data flow that crosses the
span tree (a memory unit written while ingesting, read while answering) becomes span links from the
reading op to the writing op. Blame from ``blame.json`` is put on the blamed op's span as attributes
and a ``memtrace.blame`` event. ``content=False`` leaves every message, memory, query and answer text out.

Attributes follow the OpenTelemetry GenAI semantic conventions as of :data:`SEMCONV` (the memory
span ``gen_ai.memory.client`` and the inference span ``gen_ai.inference.client``; both at
development stability, the memory attributes not yet in a release), and OpenInference
(``openinference.span.kind`` LLM, RETRIEVER, EMBEDDING, EVALUATOR or CHAIN; ``input.value`` and
``output.value``), so both kinds of viewer render them:

- ``gen_ai.operation.name`` comes from what the op did to memory units, not from its category
  (``mem0.add_memory`` is an "update"-category op that creates a record): writing only first
  versions is ``create_memory``, only later versions ``update_memory``, only tombstones
  ``delete_memory``, a mix ``upsert_memory``; otherwise an op that called an LM is ``chat``, a
  retrieval op ``search_memory``, an embedding op ``embeddings``, an update or deletion op that wrote
  nothing (a dropped event) ``update_memory``/``delete_memory``; any other op is no GenAI operation
  and carries no operation name.
- Memory spans carry ``gen_ai.memory.store.id`` (``<system>/<conversation>``: each conversation's
  graph is one store of the system), ``gen_ai.memory.record.count`` (records written, or returned
  by a search), ``gen_ai.memory.record.id`` (the unit's name, when the op wrote exactly one) and,
  opt-in with content, ``gen_ai.memory.query.text`` and ``gen_ai.memory.records``.
- Ops that called an LM carry ``gen_ai.provider.name`` and ``gen_ai.request.model`` (split from the
  client's model id, e.g. ``litellm/openai/gpt-4o@URL`` -> ``openai``, ``gpt-4o``;
  ``embedded/qwen-1.5b@sha`` -> ``embedded``, ``qwen-1.5b@sha``), ``gen_ai.usage.input_tokens``,
  ``output_tokens``, ``cache_read.input_tokens`` (prompt tokens the server reused from its KV cache)
  and ``gen_ai.response.finish_reasons``.
- Everything project-specific is under ``memtrace.`` (op id and name, category, prompt component,
  the full model id, blame); a failed op has ``error.type`` ``op_failed`` and an ERROR status.

Span names stay the op names (``mem0.add_memory``), not the conventions' ``{gen_ai.operation.name}``:
they are what blame and the report name, and the operation name is on every span as an attribute.

The graph records a logical clock, not wall time: spans are laid out on a synthetic timeline
(one millisecond per graph tick, each op as long as its LM calls took), which keeps their order.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memtrace_opt import rundir as rd
from memtrace_opt.atomic import atomic_write_text
from memtrace_opt.errors import ConfigError
from memtrace_opt.graph.io_json import load_json
from memtrace_opt.graph.model import (
    DELETION, EMBEDDING, JUDGE, MEMORY_UNIT, QUERY, RETRIEVAL, UPDATE, LMCall, MemoryGraph, Operation, Variable,
)
from memtrace_opt.rundir.schemas import read_blame

__all__ = ["MEMORY_OPERATIONS", "SCOPE", "SEMCONV", "export_graphs", "export_run", "lm_identity", "operation_name"]

#: Where the attribute names below were read (model/gen-ai/registry.yaml and spans.yaml there).
SEMCONV = "open-telemetry/semantic-conventions-genai at 002c8a6 (memory operations: PR #140, unreleased)"
MEMORY_OPERATIONS = frozenset({"create_memory", "update_memory", "upsert_memory", "delete_memory", "search_memory"})
#: An op that wrote no memory unit and called no LM: its operation by category (others have none).
_BY_CATEGORY: Mapping[str, str] = {RETRIEVAL: "search_memory", EMBEDDING: "embeddings", UPDATE: "update_memory",
                                   DELETION: "delete_memory"}
_OPENINFERENCE_KIND: Mapping[str, str] = {"search_memory": "RETRIEVER", "embeddings": "EMBEDDING"}
#: Input roles and params that hold a search's query text (mem0's dedupe search queries by ``fact``).
_QUERY_KEYS = ("query", "queries", "question", "fact")
#: The instrumentation scope of every span: this module's name before it moved to interop/, kept so traces
#: exported before and after the move group under one scope in a backend.
SCOPE = "memtrace_opt.export_otel"
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


def _written_records(graph: MemoryGraph, op: Operation) -> list[Variable]:
    """The memory-unit versions ``op`` produced (new units, new versions, tombstones)."""
    made = (graph.variables.get(vid) for vid in op.output_ids())
    return [v for v in made if v is not None and v.category == MEMORY_UNIT]


def operation_name(graph: MemoryGraph, op: Operation) -> str | None:
    """The op's ``gen_ai.operation.name`` (see the module docstring), or None for a non-GenAI step."""
    records = _written_records(graph, op)
    if records:
        kinds = {"delete_memory" if v.deleted else "create_memory" if v.version == 1 else "update_memory"
                 for v in records}
        return kinds.pop() if len(kinds) == 1 else "upsert_memory"
    if op.lm_calls:
        return "chat"
    return _BY_CATEGORY.get(op.category)


def lm_identity(model_id: str) -> tuple[str, str]:
    """``(gen_ai.provider.name, gen_ai.request.model)`` from a client's model id ``backend/model[@where]``.

    LiteLLM ids name the provider after the backend and the server after ``@``; other backends
    (``embedded``, a test's ``scripted``) are the provider themselves and keep the whole model part.
    """
    backend, sep, rest = model_id.partition("/")
    if not sep or not rest:
        return "unknown", model_id
    if backend == "litellm":
        provider, sep, model = rest.partition("/")
        return (provider, model.partition("@")[0]) if sep and model else (backend, rest.partition("@")[0])
    return backend, rest


def _lm_attributes(calls: Sequence[LMCall]) -> dict[str, Any]:
    """Inference attributes for an op's LM calls (the first call's model names the op's model)."""
    provider, model = lm_identity(calls[0].model)
    prompt, completion = sum(c.prompt_tokens for c in calls), sum(c.completion_tokens for c in calls)
    attrs: dict[str, Any] = {
        "gen_ai.provider.name": provider, "gen_ai.request.model": model, "memtrace.lm.model_id": calls[0].model,
        "gen_ai.usage.input_tokens": prompt, "gen_ai.usage.output_tokens": completion,
        "gen_ai.response.finish_reasons": [c.finish_reason for c in calls],
        "llm.model_name": model, "llm.token_count.prompt": prompt, "llm.token_count.completion": completion}
    reused = sum(c.reused_prompt_tokens for c in calls)
    if reused:
        attrs["gen_ai.usage.cache_read.input_tokens"] = reused
    return attrs


def _as_items(value: Any) -> list[Any]:
    return [] if value is None else list(value) if isinstance(value, (list, tuple)) else [value]


def _query_text(graph: MemoryGraph, op: Operation) -> str | None:
    """A search's query: its query-category or query-named inputs, else a query-named param."""
    texts = [graph.variables[vid].value for role, ids in op.inputs.items() for vid in ids
             if vid in graph.variables and (graph.variables[vid].category == QUERY or role in _QUERY_KEYS)]
    if not texts:
        texts = [op.params[k] for k in _QUERY_KEYS if isinstance(op.params.get(k), str)]
    return "\n".join(t if isinstance(t, str) else _text(t) for t in texts) or None


def _memory_attributes(graph: MemoryGraph, op: Operation, operation: str, store: str,
                       content: bool) -> dict[str, Any]:
    """The ``gen_ai.memory.*`` attributes of a memory span; query and record text only with ``content``."""
    attrs: dict[str, Any] = {"gen_ai.memory.store.id": store}
    if operation == "search_memory":
        returned = [item for vid in op.output_ids() if vid in graph.variables
                    for item in _as_items(graph.variables[vid].value)]
        attrs["gen_ai.memory.record.count"] = len(returned)
        query = _query_text(graph, op) if content else None
        if query:
            attrs["gen_ai.memory.query.text"] = _text(query)
        if content:
            attrs["gen_ai.memory.records"] = _text([{"content": item} for item in returned])
        return attrs
    records = _written_records(graph, op)
    if records:
        attrs["gen_ai.memory.record.count"] = len(records)
    if len(records) == 1:
        attrs["gen_ai.memory.record.id"] = records[0].name
    kept = [{"id": v.name, "content": v.value} for v in records if not v.deleted]
    if content and kept:
        attrs["gen_ai.memory.records"] = _text(kept)
    return attrs


def _openinference_kind(op: Operation, operation: str | None) -> str:
    """Phoenix's span kind: a judge is an EVALUATOR even when it calls an LM; any other LM op is an LLM."""
    if op.category == JUDGE:
        return "EVALUATOR"
    return "LLM" if op.lm_calls else _OPENINFERENCE_KIND.get(operation or "", "CHAIN")


def _op_attributes(graph: MemoryGraph, op: Operation, content: bool, store: str) -> dict[str, Any]:
    operation = operation_name(graph, op)
    attrs: dict[str, Any] = {
        "openinference.span.kind": _openinference_kind(op, operation), "memtrace.op_id": op.id,
        "memtrace.op_name": op.name, "memtrace.category": op.category, "memtrace.status": op.status,
        "memtrace.inputs": [f"{role}={vid}" for role, ids in op.inputs.items() for vid in ids],
        "memtrace.outputs": [f"{role}={vid}" for role, vid in op.outputs.items()],
    }
    if operation is not None:
        attrs["gen_ai.operation.name"] = operation
    if operation in MEMORY_OPERATIONS:
        attrs.update(_memory_attributes(graph, op, operation, store, content))
    if op.lm_calls:
        attrs.update(_lm_attributes(op.lm_calls))
    if op.prompt is not None:
        attrs["memtrace.prompt_component"] = op.prompt.component
        attrs["memtrace.prompt_sha"] = op.prompt.sha
    if op.status == "failed":
        attrs["error.type"] = "op_failed"
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
    tracer = provider.get_tracer(SCOPE)
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

    def end_of(o: Operation) -> int:
        return base + o.time * _TICK_NS + durations[o.id]

    last = max((end_of(o) for o in ops), default=base + _TICK_NS)
    conv = str(graph.meta.get("conversation_id") or graph.meta.get("run_id") or "graph")
    store = f"{graph.meta.get('system') or 'memory'}/{conv}"
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
                                 start_time=base + op.time * _TICK_NS,
                                 attributes=_op_attributes(graph, op, content, store))
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
    atomic_write_text(Path(out), json.dumps({"spans": spans}, indent=1, ensure_ascii=False))  # type: ignore[arg-type]
    return count
