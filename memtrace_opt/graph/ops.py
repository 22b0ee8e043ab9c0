"""Registered operations: what makes a recorded graph executable.

A memory system declares each step once with :func:`operation`; the tracer runs it through the
registry and records it, so the same implementation can be re-run later from the recorded inputs
(replay, counterfactual checks, optimizer rollouts). An implementation is a plain function
``fn(ctx, inputs, params) -> {output role: value}``: inputs arrive as values by role, the prompt
text and the LM come from ``ctx``. Keeping it a pure function of those is what makes reuse safe.
"""

from __future__ import annotations

import functools
import hashlib
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from memtrace_opt.errors import GraphError, UnknownOperationError
from memtrace_opt.lm.base import LMClient, LMResult


class OpFailure(Exception):
    """Raised by an op implementation that could not do its job on this input.

    The failure is data, not a crash: the tracer records the op as ``failed`` with ``raw`` (what the
    LM actually said) and continues with ``fallback`` as the op's outputs.
    """

    def __init__(self, message: str, *, fallback: Mapping[str, Any], raw: str | None = None) -> None:
        super().__init__(message)
        self.fallback = dict(fallback)
        self.raw = raw


@dataclass
class OpContext:
    """What an implementation may use besides its inputs: the LM, its prompt text and system resources."""

    op_id: str
    lms: Mapping[str, LMClient]
    prompt: str | None
    resources: Any = None
    session: str | None = None
    lm_results: list[LMResult] = field(default_factory=list)
    op_name: str | None = None

    def chat(self, messages: list[dict[str, str]], *, role: str = "task", **kw: Any) -> LMResult:
        """Call the run's LM for ``role`` (task, judge, ...) and keep the call's accounting on this op.

        A task-LM call from an op registered without a prompt component is reported once per op
        name (a warning, and :data:`UNOPTIMIZABLE_LM_OPS`): its prompt is hard-coded, so no optimizer
        can ever change it — attribution may blame it, nothing can fix it.
        """
        if self.prompt is None and role == "task" and self.op_name and self.op_name not in UNOPTIMIZABLE_LM_OPS:
            UNOPTIMIZABLE_LM_OPS.add(self.op_name)
            warnings.warn(f"operation {self.op_name!r} calls an LM but declares no prompt component: "
                          "its prompt cannot be optimized (register it with prompt=...)", stacklevel=2)
        lm = self.lms.get(role)
        if lm is None:
            raise GraphError(f"operation {self.op_id!r} needs an LM for role {role!r} but the tracer has none")
        result = lm.chat(messages, **kw)
        self.lm_results.append(result)
        return result


OpFn = Callable[[OpContext, dict[str, Any], dict[str, Any]], dict[str, Any]]

#: Names of ops seen calling the task LM without a prompt component (see :meth:`OpContext.chat`).
UNOPTIMIZABLE_LM_OPS: set[str] = set()


@dataclass(frozen=True)
class OpSpec:
    """A registered operation: name, category, default prompt component, and implementation.

    ``memoize`` says the op is a pure function of (prompt text, params, input values), so replay may
    reuse a recorded output instead of calling it again; ops with side effects on external state
    (a vector store insert) set it to False and always re-run, which is cheap.

    ``selects`` maps an input role to the record field that names an item (``{"cells": "cell"}``):
    the op's output records are a selection of that role's records (a search, a rerank). The op
    reads the whole store to rank it, but only the items it kept carry content onward, so the
    upstream cone of a minibatch (:mod:`memtrace_opt.graph.cone`) follows only those.

    ``reads_first`` maps an input role to ``(item field, param)``: the op reads only the first
    ``params[param]`` records of that role's list (an agentic check shown the top candidates), so
    the cone follows only those items into it, whatever the op's output names.
    """

    name: str
    category: str
    fn: OpFn
    prompt: str | None = None
    memoize: bool = True
    selects: Mapping[str, str] = field(default_factory=dict)
    reads_first: Mapping[str, tuple[str, str]] = field(default_factory=dict)


REGISTRY: dict[str, OpSpec] = {}


def operation(name: str, *, category: str, prompt: str | None = None, memoize: bool = True,
              selects: Mapping[str, str] | None = None,
              reads_first: Mapping[str, tuple[str, str]] | None = None) -> Callable[[OpFn], OpFn]:
    """Register ``fn`` as the implementation of operation ``name``.

    >>> @operation("doc.upper", category="intermediate")
    ... def upper(ctx, inputs, params):
    ...     return {"text": inputs["text"].upper()}
    >>> REGISTRY["doc.upper"].category
    'intermediate'
    """

    def register(fn: OpFn) -> OpFn:
        existing = REGISTRY.get(name)
        if existing is not None and existing.fn.__qualname__ != fn.__qualname__:
            raise GraphError(f"operation {name!r} registered twice ({existing.fn.__qualname__}, {fn.__qualname__})")
        REGISTRY[name] = OpSpec(name=name, category=category, fn=fn, prompt=prompt, memoize=memoize,
                                selects=dict(selects or {}), reads_first=dict(reads_first or {}))
        return fn

    return register


def get_spec(name: str) -> OpSpec:
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownOperationError(f"no operation registered as {name!r}; import the system that defines it") from None


@functools.lru_cache(maxsize=512)
def prompt_sha(text: str) -> str:
    """A short, stable hash of a prompt text (12 hex digits); cached, as every traced LM op asks for it."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
