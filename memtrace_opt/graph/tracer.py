"""The tracer: the handful of verbs a memory system uses to run and record its operations.

``variable`` brings an outside value in (a message, a question); ``call`` runs a registered
operation on variables and records what it read and wrote; ``session`` brackets the work of one
conversation session or one question. Outputs are declared with :class:`New` (a fresh variable),
:class:`Next` (a new version of an existing one: an update) or :class:`End` (a tombstone: a deletion).

The same verbs serve replay: given a :class:`Memo` of a recorded run and :class:`Overrides`, ``call``
reuses recorded outputs for ops whose prompt, params and input values are unchanged, substitutes
overridden inputs/outputs, and re-executes the rest. With ``enabled=False`` nothing is stored and the
verbs only pass values through.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import threading
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Collection, Iterator, Mapping, NamedTuple, Sequence

from memtrace_opt.errors import GraphError
from memtrace_opt.graph.model import LMCall, MemoryGraph, Operation, PromptRef, SessionRecord, Variable
from memtrace_opt.graph.ops import OpContext, OpFailure, OpSpec, get_spec, prompt_sha
from memtrace_opt.lm.base import LMClient
from memtrace_opt.graph.prompt_parts import seen_prompts


@dataclass(frozen=True, slots=True)
class New:
    """Output role creates variable ``name@1``; ``name`` must be new (use :class:`Next` to update)."""

    name: str
    category: str
    comment: str = ""


@dataclass(frozen=True, slots=True)
class Next:
    """Output role creates the next version of ``var`` (an in-place update); ``var`` becomes an input."""

    var: Variable
    comment: str = ""


@dataclass(frozen=True, slots=True)
class End:
    """Output role ends ``var``'s lifetime with a tombstone version (value None); ``var`` becomes an input."""

    var: Variable
    comment: str = "deleted"


OutSpec = New | Next | End


class _Executed(NamedTuple):
    """What :meth:`Tracer._execute` produced for one op: outputs by role, LM accounting and provenance."""

    outputs: dict[str, Any]
    lm_calls: tuple[LMCall, ...]
    status: str
    error: str | None
    raw: str | None
    memo_key: str | None
    reused: bool


@dataclass(frozen=True)
class Overrides:
    """Changes to apply while (re-)running: prompt texts, and per-op input or output values by role."""

    prompts: Mapping[str, str] = field(default_factory=dict)
    op_outputs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    op_inputs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.prompts or self.op_outputs or self.op_inputs)


class Memo:
    """Recorded outputs of memoizable ops, keyed by (op, prompt text, params, input values).

    ``pinned`` names recorded ops whose outputs a *scoped* replay keeps even under a changed prompt:
    the ops outside the upstream cone of the questions being scored (see
    :func:`memtrace_opt.graph.replay.replay`'s ``scope``). They are found by the key their inputs
    would have under the recorded prompt text (``recorded_prompts``).
    """

    def __init__(self, graph: MemoryGraph | None = None, *, pinned: Collection[str] = ()) -> None:
        self._entries: dict[str, tuple[dict[str, Any], tuple[LMCall, ...], Operation]] = {}
        self.pinned = frozenset(pinned)
        self.recorded_prompts: dict[str, str] = (
            seen_prompts(graph.meta.get("prompts", {}), graph.meta.get("conversation_id")) if graph is not None else {})
        if graph is not None:
            for op in graph.ops.values():
                # Failed ops are memoized too: a replay must reproduce the run, failures included,
                # without asking the LM again; a changed prompt changes the key and retries them.
                if op.memo_key:
                    values = {role: graph.variables[vid].value for role, vid in op.outputs.items()}
                    self._entries[op.memo_key] = (values, op.lm_calls, op)

    def get(self, key: str) -> tuple[dict[str, Any], tuple[LMCall, ...], Operation] | None:
        return self._entries.get(key)

    def pinned_hit(self, op_name: str, component: str | None, params: Mapping[str, Any],
                   inputs: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[LMCall, ...], Operation] | None:
        """The recorded output of a pinned op with these inputs under its recorded prompt, if any."""
        if not self.pinned or component is None or component not in self.recorded_prompts:
            return None
        hit = self._entries.get(memo_key(op_name, self.recorded_prompts[component], params, inputs))
        return hit if hit is not None and hit[2].id in self.pinned else None

    def __len__(self) -> int:
        return len(self._entries)


# Same output as json.dumps(..., sort_keys=True, default=repr, ensure_ascii=False), without building an
# encoder per call (a third of the per-op recording cost of a small op).
def _key_default(value: Any) -> Any:
    """Non-JSON values in a memo key: arrays by their full contents (numpy's repr elides long ones), else repr."""
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) else repr(value)


_KEY_ENCODER = json.JSONEncoder(sort_keys=True, default=_key_default, ensure_ascii=False)


def memo_key(op_name: str, prompt_text: str | None, params: Mapping[str, Any], inputs: Mapping[str, Any]) -> str:
    """A stable digest of everything a pure op's output depends on."""
    blob = _KEY_ENCODER.encode([op_name, prompt_text, params, inputs])
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass
class TraceStats:
    """What a (re-)run cost: ops executed vs reused, and LM calls actually made."""

    executed: list[str] = field(default_factory=list)
    reused: int = 0
    overridden: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    lm_calls: int = 0
    #: ops of a scoped replay that kept their recorded output although their prompt changed
    pinned: int = 0


_current_session: contextvars.ContextVar[str | None] = contextvars.ContextVar("memtrace_session", default=None)


class Tracer:
    """Runs registered operations and records them into a :class:`MemoryGraph`."""

    def __init__(
        self,
        graph: MemoryGraph | None = None,
        *,
        lm: LMClient | None = None,
        lms: Mapping[str, LMClient] | None = None,
        prompts: Mapping[str, str] | None = None,
        resources: Any = None,
        memo: Memo | None = None,
        overrides: Overrides | None = None,
        enabled: bool = True,
    ) -> None:
        self.graph = graph if graph is not None else MemoryGraph()
        self.lms: dict[str, LMClient] = {**({"task": lm} if lm is not None else {}), **(lms or {})}
        self.overrides = overrides or Overrides()
        self.prompts: dict[str, str] = {**(prompts or {}), **self.overrides.prompts}
        # what the ops see: the worked examples cut from this very conversation withheld
        self.effective_prompts: dict[str, str] = seen_prompts(self.prompts, self.graph.meta.get("conversation_id"))
        self.resources = resources
        self.memo = memo
        self.enabled = enabled
        self.stats = TraceStats()
        self._lock = threading.RLock()
        self._clock = 0
        self._ordinals: dict[tuple[str | None, str], int] = defaultdict(int)

    # -- sessions -------------------------------------------------------------------------------
    @contextmanager
    def session(self, session_id: str, *, kind: str, **meta: Any) -> Iterator[str]:
        """Bracket the work of one conversation session (kind ``ingest``) or one question (``answer``)."""
        if self.enabled:
            with self._lock:
                if session_id not in self.graph.sessions:
                    self.graph.add_session(SessionRecord(session_id, kind, self._tick(), dict(meta)))
        token = _current_session.set(session_id)
        try:
            yield session_id
        finally:
            _current_session.reset(token)

    @property
    def current_session(self) -> str | None:
        return _current_session.get()

    # -- variables ------------------------------------------------------------------------------
    def variable(self, name: str, value: Any, *, category: str, comment: str = "") -> Variable:
        """Bring an outside value (message, question, gold answer) into the graph as ``name@1``."""
        with self._lock:
            version = self.graph.latest.get(name, 0) + 1 if self.enabled else 1
            var = Variable(name, version, category, value, self._tick(), self.current_session, comment)
            if self.enabled:
                self.graph.add_variable(var)
            return var

    def latest(self, name: str) -> Variable:
        """The newest version of variable ``name`` (a tombstone if it was deleted)."""
        return self.graph.variables[self.graph.latest_id(name)]

    # -- operations -----------------------------------------------------------------------------
    def call(
        self,
        op_name: str,
        *,
        inputs: Mapping[str, Variable | Sequence[Variable]],
        outputs: Mapping[str, OutSpec],
        params: Mapping[str, Any] | None = None,
        prompt: str | None = None,
        comment: str = "",
    ) -> dict[str, Variable]:
        """Run registered op ``op_name`` on ``inputs`` and record it; returns the output variables by role."""
        spec = get_spec(op_name)
        params = dict(params or {})
        session = self.current_session
        with self._lock:
            n = self._ordinals[(session, op_name)]
            self._ordinals[(session, op_name)] = n + 1
        op_id = f"{session}/{op_name}#{n}"
        in_ids = {role: _ids(v) for role, v in inputs.items()}
        for spec_out in outputs.values():
            if isinstance(spec_out, (Next, End)):
                in_ids.setdefault("_previous", ())
                in_ids["_previous"] = in_ids["_previous"] + (spec_out.var.id,)
        values = {role: _values(v) for role, v in inputs.items()}
        values.update(self.overrides.op_inputs.get(op_id, {}))
        component = prompt or spec.prompt
        prompt_text = self._prompt_text(component, op_id)
        done = self._execute(spec, op_id, session, values, params, prompt_text, set(outputs), component)
        out_values = done.outputs
        forced = self.overrides.op_outputs.get(op_id)
        if forced:
            out_values = {**out_values, **forced}
            self.stats.overridden.append(op_id)
        missing = set(outputs) - set(out_values)
        if missing:
            raise GraphError(f"operation {op_id!r} returned no value for output role(s) {sorted(missing)}")
        with self._lock:
            made = {role: self._make_output(spec_out, out_values[role]) for role, spec_out in outputs.items()}
            if self.enabled:
                op = Operation(
                    id=op_id, name=op_name, category=spec.category, inputs=in_ids,
                    outputs={role: v.id for role, v in made.items()}, time=self._tick(), session=session,
                    params=params, prompt=PromptRef(component, prompt_sha(prompt_text)) if component else None,
                    lm_calls=done.lm_calls, status=done.status, error=done.error, raw=done.raw, memo_key=done.memo_key,
                    reused=done.reused, comment=comment,
                )
                self.graph.add_operation(op)
        return made

    def _prompt_text(self, component: str | None, op_id: str) -> str | None:
        if component is None:
            return None
        try:
            return self.effective_prompts[component]
        except KeyError:
            raise GraphError(f"operation {op_id!r} uses prompt component {component!r}, not in the prompt set "
                             f"({sorted(self.prompts)})") from None

    def _execute(self, spec: OpSpec, op_id: str, session: str | None, values: dict[str, Any],
                 params: dict[str, Any], prompt_text: str | None, roles: set[str],
                 component: str | None = None) -> _Executed:
        """Reuse a memoized output, skip a fully overridden op, or run the implementation."""
        # The key serves later replay (recorded) or this run's memo; a disabled tracer without a memo needs neither.
        wanted = spec.memoize and (self.enabled or self.memo is not None)
        key = memo_key(spec.name, prompt_text, params, values) if wanted else None
        forced = self.overrides.op_outputs.get(op_id, {})
        if roles and roles <= set(forced):
            return _Executed({}, (), "ok", None, None, key, False)
        if key is not None and self.memo is not None:
            hit = self.memo.get(key)
            if hit is not None:
                self.stats.reused += 1
                return _Executed(dict(hit[0]), hit[1], hit[2].status, hit[2].error, hit[2].raw, key, True)
            pinned = self.memo.pinned_hit(spec.name, component, params, values)
            if pinned is not None:
                # no memo key: this output was made under another prompt and must never be reused as this one's
                self.stats.reused += 1
                self.stats.pinned += 1
                return _Executed(dict(pinned[0]), pinned[1], pinned[2].status, pinned[2].error, pinned[2].raw,
                                 None, True)
        ctx = OpContext(op_id=op_id, lms=self.lms, prompt=prompt_text, resources=self.resources, session=session,
                        op_name=spec.name)
        status, error, raw = "ok", None, None
        try:
            out = spec.fn(ctx, values, params)
        except OpFailure as failure:
            out, status, error, raw = failure.fallback, "failed", str(failure), failure.raw
            self.stats.failed.append(op_id)
        self.stats.executed.append(op_id)
        if not ctx.lm_results:
            return _Executed(out, (), status, error, raw, key, False)
        calls = tuple(
            LMCall(r.model, r.prompt_tokens, r.completion_tokens, r.latency_s, r.cached, r.finish_reason,
                   r.reused_prompt_tokens)
            for r in ctx.lm_results
        )
        self.stats.lm_calls += sum(1 for r in ctx.lm_results if not r.cached)
        return _Executed(out, calls, status, error, raw, key, False)

    def _make_output(self, spec_out: OutSpec, value: Any) -> Variable:
        session = self.current_session
        if isinstance(spec_out, New):
            if self.enabled and spec_out.name in self.graph.latest:
                raise GraphError(f"variable {spec_out.name!r} already exists; use Next(var) to make a new version")
            var = Variable(spec_out.name, 1, spec_out.category, value, self._tick(), session, spec_out.comment)
        else:
            prev = spec_out.var
            deleted = isinstance(spec_out, End)
            var = Variable(prev.name, prev.version + 1, prev.category, None if deleted else value, self._tick(),
                           session, spec_out.comment, deleted)
        if self.enabled:
            self.graph.add_variable(var)
        return var

    def _tick(self) -> int:
        self._clock += 1
        return self._clock


def _ids(v: Variable | Sequence[Variable]) -> tuple[str, ...]:
    if isinstance(v, Variable):
        return (v.id,)
    return tuple(x.id for x in v)


def _values(v: Variable | Sequence[Variable]) -> Any:
    if isinstance(v, Variable):
        return v.value
    return [x.value for x in v]
