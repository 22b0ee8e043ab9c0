"""Interception of a real mem0 ``Memory``: every internal step of ``add`` becomes a traced operation.

mem0's ``add`` is one 230-line method holding two LLM calls and every store write; nothing in it
can be blamed separately. Instead of rewriting it, the hooks sit at its seams and route each call
through :meth:`Tracer.call` of a registered op (defined in :mod:`memtrace_opt.systems.mem0_system`):

=====================================  ====================================================
mem0 calls                             becomes
=====================================  ====================================================
``llm.generate_response`` (1st)        ``mem0.extract_facts`` → ``facts:s<k>#<n>``
``vector_store.search`` (per fact)     ``mem0.search_similar`` → ``similar:s<k>#<n>.<i>``
``llm.generate_response`` (2nd)        ``mem0.update_decision`` → ``decision:s<k>#<n>``
``vector_store.insert``                ``mem0.add_memory`` → ``mem:<id>@1``
``vector_store.update``                ``mem0.update_memory`` → ``mem:<id>@v+1``
``vector_store.delete``                ``mem0.delete_memory`` → tombstone ``mem:<id>@v+1``
"Error processing memory action" log   ``mem0.dropped_event`` (a failed op)
=====================================  ====================================================

What mem0 receives is always the op's output (recorded, memoized or overridden): the LLM hooks
return the op's facts/events as JSON for mem0 to parse, the store hooks write the op's text. So a
replay with an overridden fact list or decision changes what mem0 applies, and a replay without
overrides re-runs mem0 on recorded LLM outputs with zero LM calls. ``embedding_model.embed`` is
routed to the run's embedder and cached by text; embedding is part of the search/store op that
needs the vector, not an op of its own: vectors are a deterministic function of text and would
dominate the graph's size. ``db.add_history`` is left alone: the graph is the history.

mem0 runs ``_add_to_vector_store`` in a worker thread and ids memories with ``uuid4``. The one private
seam used is that method: it is wrapped so the worker thread knows which add call it serves
(a context variable) and re-enters the tracer session; ``uuid4`` inside mem0 then draws from a
per-add deterministic sequence (uuid5 of conversation/session/add/counter), so ids match across runs.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from memtrace_opt.errors import GraphError
from memtrace_opt.graph import End, New, Next, Tracer, Variable
from memtrace_opt.graph.model import MEMORY_UNIT

__all__ = ["AddCall", "Mem0Hooks", "FACTS", "DECISION", "SIMILAR"]

FACTS = "facts"
DECISION = "memory-decision"
SIMILAR = "similar-memories"
_ID_SPACE = uuid.uuid5(uuid.NAMESPACE_URL, "memtrace-opt/mem0")
_MEM0_LOGGER = "mem0.memory.main"
_ACTIVE: contextvars.ContextVar[AddCall | None] = contextvars.ContextVar("memtrace_mem0_add", default=None)


@dataclass
class AddCall:
    """One ``Memory.add`` in progress: what the hooks need to turn mem0's inner calls into ops."""

    session: str
    tag: str
    messages: list[Variable]
    date: str | None
    id_seed: str
    extract_max_tokens: int = 512
    decision_max_tokens: int = 1536
    decision_output: str = "all"
    llm_calls: int = 0
    searches: int = 0
    created: int = 0
    facts: Variable | None = None
    decision: Variable | None = None
    shown: dict[str, None] = field(default_factory=dict)
    cursor: int = 0
    errors: list[str] = field(default_factory=list)
    fatal: BaseException | None = None

    def next_uuid(self) -> uuid.UUID:
        """The id mem0 gives the next memory it creates in this add: stable across runs."""
        self.created += 1
        return uuid.uuid5(_ID_SPACE, f"{self.id_seed}/m{self.created - 1}")

    @property
    def events(self) -> list[Any]:
        value = self.decision.value if self.decision is not None else None
        return value if isinstance(value, list) else []

    @contextmanager
    def guard(self) -> Iterator[None]:
        """Remember an exception raised inside a hook: mem0 would log and swallow most of them."""
        try:
            yield
        except BaseException as exc:
            if self.fatal is None:
                self.fatal = exc
            raise


class _UuidShim:
    """Stands in for the ``uuid`` module inside mem0's ``main``: ``uuid4`` draws from the active add."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def uuid4(self) -> uuid.UUID:
        call = _ACTIVE.get()
        return call.next_uuid() if call is not None else self._real.uuid4()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class _ErrorLog(logging.Handler):
    """Collects mem0's ERROR lines logged by one add call (mem0 drops bad events with a log line)."""

    def __init__(self, call: AddCall) -> None:
        super().__init__(logging.ERROR)
        self.call = call

    def emit(self, record: logging.LogRecord) -> None:
        if _ACTIVE.get() is self.call:
            self.call.errors.append(record.getMessage())


@dataclass(frozen=True)
class _Hit:
    """The shape mem0 reads from a vector-store search result."""

    id: str
    score: float | None
    payload: dict[str, Any]


class Mem0Hooks:
    """Installs the hooks on one ``Memory`` and keeps the memory-unit variables by mem0 id."""

    def __init__(self, tracer: Tracer, memory: Any, main_module: Any, *, embedder: Any = None) -> None:
        self.tracer = tracer
        self.memory = memory
        self.units: dict[str, Variable] = {}
        self._pending: AddCall | None = None
        if not isinstance(main_module.uuid, _UuidShim):
            main_module.uuid = _UuidShim(main_module.uuid)
        original = getattr(memory, "_add_to_vector_store", None)
        if original is None:
            raise GraphError("mem0 Memory has no _add_to_vector_store: the hooks need mem0ai 1.0.x")
        memory._add_to_vector_store = self._wrap_add(original)
        memory.llm = _HookedLLM(self)
        memory.embedding_model = _CachedEmbedder(memory.embedding_model, embedder)
        memory.vector_store = _HookedStore(self, memory.vector_store)

    # -- driving mem0 ---------------------------------------------------------------------------
    def add(self, call: AddCall, messages: list[dict[str, str]], *, user_id: str, metadata: dict[str, Any]) -> None:
        """Run ``Memory.add`` for one turn group; re-raise anything a hook raised that mem0 swallowed."""
        self._pending = call
        try:
            self.memory.add(messages, user_id=user_id, metadata=metadata)
        finally:
            self._pending = None
        if call.fatal is not None:
            raise call.fatal

    def search(self, query: str, *, user_id: str, limit: int) -> list[dict[str, Any]]:
        """mem0's public search (query embedding + store search), untraced: the caller records it."""
        return list(self.memory.search(query, user_id=user_id, limit=limit).get("results", []))

    def _wrap_add(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def traced_add(messages: Any, metadata: Any, filters: Any, infer: bool) -> Any:
            call = self._pending
            if call is None:
                raise GraphError("mem0 add ran outside Mem0Hooks.add: call the system's ingest instead")
            token = _ACTIVE.set(call)
            handler = _ErrorLog(call)
            logger = logging.getLogger(_MEM0_LOGGER)
            logger.addHandler(handler)
            try:
                with self.tracer.session(call.session, kind="ingest"):
                    result = original(messages, metadata, filters, infer)
                    with call.guard():
                        self._flush_errors(call)
                    return result
            finally:
                logger.removeHandler(handler)
                _ACTIVE.reset(token)

        return traced_add

    # -- LLM calls --------------------------------------------------------------------------------
    def llm_call(self, call: AddCall, messages: list[dict[str, str]]) -> str:
        """mem0's first LLM call in an add extracts facts, the second decides events."""
        stage, call.llm_calls = call.llm_calls, call.llm_calls + 1
        if stage == 0:
            call.facts = self.tracer.call(
                "mem0.extract_facts", inputs={"messages": call.messages},
                params={"date": call.date, "max_tokens": call.extract_max_tokens},
                outputs={"facts": New(f"facts:{call.tag}", FACTS)})["facts"]
            return json.dumps({"facts": call.facts.value}, ensure_ascii=False)
        if stage == 1 and call.facts is not None:
            shown = [self._unit(mid) for mid in call.shown]
            call.decision = self.tracer.call(
                "mem0.update_decision", inputs={"facts": call.facts, "memories": shown},
                params={"date": call.date, "max_tokens": call.decision_max_tokens,
                        **({"output": call.decision_output} if call.decision_output != "all" else {})},
                outputs={"decision": New(f"decision:{call.tag}", DECISION)})["decision"]
            return json.dumps({"memory": call.decision.value}, ensure_ascii=False)
        raise GraphError(f"mem0 made an unexpected LLM call #{stage + 1} in add {call.tag}")

    # -- store calls ------------------------------------------------------------------------------
    def similar(self, call: AddCall, query: str, hits: Sequence[Any], limit: int) -> list[_Hit]:
        """Record one per-fact similarity search; mem0 sees the op's records."""
        index, call.searches = call.searches, call.searches + 1
        known = [h for h in hits if h.id in self.units]
        records = self.tracer.call(
            "mem0.search_similar", inputs={"facts": self._facts(call), "memories": [self.units[h.id] for h in known]},
            params={"fact": query, "limit": limit,
                    "hits": [{"memory_id": h.id, "score": _round(h.score)} for h in known]},
            outputs={"similar": New(f"similar:{call.tag}.{index}", SIMILAR)})["similar"].value
        out = []
        for rec in records or []:
            call.shown.setdefault(rec["memory_id"], None)
            out.append(_Hit(rec["memory_id"], rec.get("score"), {"data": rec.get("text", "")}))
        return out

    def inserted(self, call: AddCall, memory_id: str, payload: dict[str, Any]) -> str:
        """Record an ADD applied by mem0; returns the text to store (the op's output)."""
        self._flush_errors(call)
        k = self._match(call, "ADD", text=payload.get("data"))
        unit = self.tracer.call(
            "mem0.add_memory", inputs={"decision": self._decision(call)}, params=_event_params(k, memory_id, payload),
            outputs={"unit": New(f"mem:{memory_id}", MEMORY_UNIT)})["unit"]
        self.units[memory_id] = unit
        return str(unit.value)

    def updated(self, call: AddCall, memory_id: str, payload: dict[str, Any]) -> str:
        """Record an UPDATE applied by mem0: a new version of the unit; returns the text to store."""
        self._flush_errors(call)
        k = self._match(call, "UPDATE", text=payload.get("data"), memory_id=memory_id)
        unit = self.tracer.call(
            "mem0.update_memory", inputs={"decision": self._decision(call)},
            params=_event_params(k, memory_id, payload), outputs={"unit": Next(self._unit(memory_id))})["unit"]
        self.units[memory_id] = unit
        return str(unit.value)

    def deleted(self, call: AddCall, memory_id: str) -> None:
        """Record a DELETE applied by mem0: the unit ends with a tombstone version."""
        self._flush_errors(call)
        k = self._match(call, "DELETE", memory_id=memory_id)
        self.units[memory_id] = self.tracer.call(
            "mem0.delete_memory", inputs={"decision": self._decision(call)}, params={"event": k, "memory_id": memory_id},
            outputs={"unit": End(self._unit(memory_id))})["unit"]

    # -- helpers ----------------------------------------------------------------------------------
    def _flush_errors(self, call: AddCall) -> None:
        """Turn mem0's logged ERROR lines since the last store call into failed ops, in event order."""
        while call.errors:
            message = call.errors.pop(0)
            k = self._match_error(call, message)
            source = call.decision or call.facts or call.messages
            self.tracer.call("mem0.dropped_event", inputs={"decision": source},
                             params={"event": k, "error": message[:500]}, outputs={})

    def _match(self, call: AddCall, kind: str, *, text: Any = None, memory_id: str | None = None) -> int | None:
        """The index of the decision event mem0 is applying (mem0 applies them in order)."""
        shown = list(call.shown)
        for k in range(call.cursor, len(call.events)):
            event = call.events[k]
            if not isinstance(event, dict) or event.get("event") != kind:
                continue
            if text is not None and event.get("text") != text:
                continue
            if memory_id is not None and _shown_id(shown, event.get("id")) != memory_id:
                continue
            call.cursor = k + 1
            return k
        return None

    @staticmethod
    def _match_error(call: AddCall, message: str) -> int | None:
        for k in range(call.cursor, len(call.events)):
            if message.startswith(f"Error processing memory action: {call.events[k]}, Error:"):
                call.cursor = k + 1
                return k
        return None

    def _unit(self, memory_id: str) -> Variable:
        try:
            return self.units[memory_id]
        except KeyError:
            raise GraphError(f"mem0 touched memory {memory_id!r}, which no traced op created") from None

    @staticmethod
    def _facts(call: AddCall) -> Variable:
        if call.facts is None:
            raise GraphError(f"mem0 searched its store before extracting facts in add {call.tag}")
        return call.facts

    @staticmethod
    def _decision(call: AddCall) -> Variable:
        if call.decision is None:
            raise GraphError(f"mem0 wrote its store without an update decision in add {call.tag}")
        return call.decision


def _shown_id(shown: list[str], small_id: Any) -> str | None:
    """The memory id behind the small integer id mem0 showed the LLM (None when out of range)."""
    try:
        return shown[int(str(small_id))]
    except (ValueError, IndexError):
        return None


def _event_params(k: int | None, memory_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    params: dict[str, Any] = {"event": k, "memory_id": memory_id}
    if k is None:  # not traceable to an event (should not happen): keep what mem0 wrote
        params["text"] = payload.get("data")
    return params


def _round(score: Any) -> float | None:
    return None if score is None else round(float(score), 4)


class _HookedLLM:
    """mem0's ``llm``: every call inside a traced add becomes an LLM op; nothing else may call it."""

    def __init__(self, hooks: Mem0Hooks) -> None:
        self._hooks = hooks

    def generate_response(self, messages: list[dict[str, str]], response_format: Any = None, **kw: Any) -> str:
        call = _ACTIVE.get()
        if call is None:
            raise GraphError("mem0 called its LLM outside a traced add (procedural memory is not supported)")
        with call.guard():
            return self._hooks.llm_call(call, messages)


class _CachedEmbedder:
    """mem0's ``embedding_model``: vectors by text from ``embedder`` (``embed(texts) -> array``) when
    given, else from mem0's own model; cached by text either way."""

    def __init__(self, inner: Any, embedder: Any = None) -> None:
        self._inner = inner
        self._embedder = embedder
        self._cache: dict[str, list[float]] = {}

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        vector = self._cache.get(text)
        if vector is None:
            if self._embedder is not None:
                vector = [float(x) for x in self._embedder.embed([text])[0]]
            else:
                vector = list(self._inner.embed(text, memory_action))
            self._cache[text] = vector
        return vector

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _HookedStore:
    """mem0's ``vector_store``: searches and writes inside a traced add become ops; the rest passes through."""

    def __init__(self, hooks: Mem0Hooks, inner: Any) -> None:
        self._hooks = hooks
        self._inner = inner

    def search(self, query: str, vectors: Any, limit: int = 5, filters: Any = None) -> list[Any]:
        hits = self._inner.search(query=query, vectors=vectors, limit=limit, filters=filters)
        call = _ACTIVE.get()
        if call is None:
            return hits
        with call.guard():
            return self._hooks.similar(call, query, hits, limit)

    def insert(self, vectors: list[Any], payloads: list[dict[str, Any]] | None = None,
               ids: list[str] | None = None) -> Any:
        call = _ACTIVE.get()
        if call is None or ids is None or payloads is None:
            return self._inner.insert(vectors=vectors, payloads=payloads, ids=ids)
        with call.guard():
            vectors, payloads = list(vectors), [dict(p) for p in payloads]
            for i, (memory_id, payload) in enumerate(zip(ids, payloads, strict=True)):
                text = self._hooks.inserted(call, memory_id, payload)
                vectors[i] = self._rewrite(payload, text, vectors[i])
        return self._inner.insert(vectors=vectors, payloads=payloads, ids=ids)

    def update(self, vector_id: str, vector: Any = None, payload: dict[str, Any] | None = None) -> Any:
        call = _ACTIVE.get()
        if call is None or payload is None:
            return self._inner.update(vector_id=vector_id, vector=vector, payload=payload)
        with call.guard():
            payload = dict(payload)
            text = self._hooks.updated(call, vector_id, payload)
            vector = self._rewrite(payload, text, vector)
        return self._inner.update(vector_id=vector_id, vector=vector, payload=payload)

    def delete(self, vector_id: str) -> Any:
        call = _ACTIVE.get()
        if call is not None:
            with call.guard():
                self._hooks.deleted(call, vector_id)
        return self._inner.delete(vector_id=vector_id)

    def _rewrite(self, payload: dict[str, Any], text: str, vector: Any) -> Any:
        """Store the op's text: when an override changed it, re-hash and re-embed like mem0 would."""
        if payload.get("data") == text:
            return vector
        payload["data"] = text
        payload["hash"] = hashlib.md5(text.encode()).hexdigest()
        return self._hooks.memory.embedding_model.embed(text, "update")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
