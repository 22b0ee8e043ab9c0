"""LLM attribution baselines, on the same cases and the same LM as tracing.

- ``flat_log``: the reference paper's baseline — a flat, time-ordered op log (a window around the
  evidence and the question's answer session) and one call naming the op and the error type.
- ``all_at_once``: the question's whole slice (its ops with inputs and outputs) in one prompt.
- ``step_by_step``: the slice's ops in execution order, one call each — "is this the decisive
  error?" — until one says yes.
- ``binary_search``: halve the op list, asking "is the decisive error in the first half?", then
  ask the remaining op's error type.

Replies are JSON-schema constrained and parsed tolerantly; an unusable reply is a failed
attribution (``error_type=None``) recorded on the signal, never an exception.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.attribution.content import parse_json_object
from memtrace_opt.attribution.cost import CostMeter, MeteredLM
from memtrace_opt.attribution.evidence import EmbedFn, default_embed, starting_points
from memtrace_opt.attribution.failures import FailureCase
from memtrace_opt.attribution.priors import prior_for
from memtrace_opt.attribution.slices import case_ops
from memtrace_opt.attribution.view import render_op
from memtrace_opt.graph import queries
from memtrace_opt.graph.model import MemoryGraph, Operation
from memtrace_opt.lm.base import LMClient

__all__ = ["BASELINES", "AllAtOnce", "BinarySearch", "Constant", "FlatLog", "StepByStep", "make_baseline",
           "parse_blame"]

_TIME_STAMP = re.compile(r"\[?\s*(\d+)\s*\]?")
LABELS = ("ExtractionError", "UpdateError", "DeletionError", "RetrievalError", "ResponseError", "AnnotationError")

TAXONOMY = """Error types (for the earliest decisive faulty operation: locally wrong for its role, and fixing it alone
- earlier ops unchanged, later ops ideal - would have given the right answer):
- ExtractionError: the needed information never entered any memory unit.
- UpdateError: a memory unit held it; a later update removed or degraded it.
- DeletionError: a memory unit holding it was deleted.
- RetrievalError: the memory store held it, but the retrieved context for the question lacks it.
- ResponseError: the retrieved context held what was needed, the answer is still wrong.
- AnnotationError: the gold answer or its evidence is itself wrong."""

BLAME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reason": {"type": "string"}, "op_id": {"type": "string"},
                   "error_type": {"type": "string", "enum": list(LABELS)}},
    "required": ["reason", "op_id", "error_type"],
}
STEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reason": {"type": "string"}, "decisive": {"type": "boolean"},
                   "error_type": {"type": "string", "enum": list(LABELS)}},
    "required": ["reason", "decisive", "error_type"],
}
HALF_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"reason": {"type": "string"}, "first_half": {"type": "boolean"}},
    "required": ["reason", "first_half"],
}


def parse_blame(text: str, graph: MemoryGraph, candidates: list[str] | None = None) -> tuple[str | None, str | None, str]:
    """``(error_type, op_id, reason)`` from an LM reply; None parts when they cannot be read."""
    obj = parse_json_object(text) or {}
    error_type = normalise_type(str(obj.get("error_type", "")))
    op_id = match_op(str(obj.get("op_id", "")), graph, candidates)
    return error_type, op_id, str(obj.get("reason", ""))[:400] or f"unparsable reply {text[:80]!r}"


def normalise_type(raw: str) -> str | None:
    """An error type label from loose text ("retrieval error", "Extraction") or None."""
    key = raw.lower().replace(" ", "").replace("_", "").replace("-", "")
    if len(key) < 4:
        return None
    for label in LABELS:
        stem = label.lower()[:-5]  # "extraction" of "ExtractionError"
        if key.startswith(stem) or stem.startswith(key):
            return label
    return None


def match_op(raw: str, graph: MemoryGraph, candidates: list[str] | None = None) -> str | None:
    """The op id the LM meant: exact, else the only candidate that ends with the text ("tt.delete#0" for
    "ingest:s3/tt.delete#0") or is quoted inside it, else the op shown at that log time ("72" or
    "[72]" for the line "[72] answer:q3/qa.answer#0 ..."; small models answer with the number the
    line starts with). Short or ambiguous text matches nothing."""
    raw = raw.strip().strip("`'\" ")
    if raw in graph.ops:
        return raw
    if (stamp := _TIME_STAMP.fullmatch(raw)) is not None:
        hits = [o for o in (candidates or graph.ops) if o in graph.ops and graph.ops[o].time == int(stamp[1])]
        return hits[0] if len(hits) == 1 else None
    if len(raw) < 6 or "#" not in raw:
        return None
    pool = candidates or list(graph.ops)
    hits = [o for o in pool if o.endswith(raw) or o in raw]
    return hits[0] if len(hits) == 1 else None


@dataclass
class _LLMBaseline:
    """Shared plumbing: metered LM, evidence, prompt header, signal assembly."""

    lm: LMClient
    evidence: str = "auto"
    embed: EmbedFn | None = default_embed
    max_ops: int = 60
    value_chars: int = 160
    max_tokens: int = 320
    name: str = "baseline"
    _meter: MeteredLM = field(init=False)

    def __post_init__(self) -> None:
        self._meter = self.lm if isinstance(self.lm, MeteredLM) else MeteredLM(self.lm)

    @property
    def meters(self) -> list[MeteredLM]:
        return [self._meter]

    def attribute(self, graph: MemoryGraph, case: FailureCase) -> BlameSignal:
        meter = CostMeter([self._meter]).start()
        starts, _ = starting_points(graph, case, mode=self.evidence, embed=self.embed)
        error_type, op_id, reason = self._run(graph, case, starts)
        op = graph.ops.get(op_id or "")
        return BlameSignal(
            case_id=case.case_id, question=case.question, gold=case.gold, prediction=case.prediction,
            error_type=error_type, op_id=op_id,
            prompt_component=op.prompt.component if op is not None and op.prompt else None,
            reason=reason, evidence=tuple(starts), confidence=0.5 if error_type else 0.0, method=self.name,
            cost=meter.cost(),
        )

    def _run(self, graph: MemoryGraph, case: FailureCase, starts: list[str]) -> tuple[str | None, str | None, str]:
        raise NotImplementedError

    def _header(self, graph: MemoryGraph, case: FailureCase, starts: list[str]) -> str:
        hint = prior_for(case.system or graph.meta.get("system")).hint
        return (f"A memory system answered a question wrongly. Find the earliest decisive faulty operation.\n"
                f"{TAXONOMY}\nSystem hint: {hint}\n\nQuestion: {case.question}\nGold answer: {case.gold}\n"
                f"System answer: {case.prediction}\nEvidence messages: {', '.join(starts) or '(unknown)'}\n")

    def _ask(self, prompt: str, schema: dict[str, Any]) -> str:
        return self._meter.chat([{"role": "user", "content": prompt}], max_tokens=self.max_tokens, temperature=0.0,
                                json_schema=schema).text

    def _ops(self, graph: MemoryGraph, case: FailureCase, starts: list[str]) -> list[Operation]:
        return case_ops(graph, case, starts, max_ops=self.max_ops)

    def _render(self, graph: MemoryGraph, ops: list[Operation], *, edges: bool = True) -> str:
        return "\n".join(render_op(graph, op, limit=self.value_chars, edges=edges) for op in ops)


@dataclass
class FlatLog(_LLMBaseline):
    """The reference baseline: a flat time-ordered op log window, one call."""

    name: str = "flat_log"
    log_chars: int = 60

    def _run(self, graph: MemoryGraph, case: FailureCase, starts: list[str]) -> tuple[str | None, str | None, str]:
        keep = {o.id for o in self._ops(graph, case, starts)}
        lines = [e.line() for e in queries.flat_op_log(graph, width=self.log_chars) if e.op_id in keep]
        prompt = (self._header(graph, case, starts) + "\nOperation log (time-ordered, no edges):\n" + "\n".join(lines)
                  + '\n\nReply as JSON {"reason": "...", "op_id": "<an op id from the log>", "error_type": "..."}.')
        return parse_blame(self._ask(prompt, BLAME_SCHEMA), graph, sorted(keep))


@dataclass
class AllAtOnce(_LLMBaseline):
    """The whole case slice (ops with inputs and outputs) in one prompt."""

    name: str = "all_at_once"

    def _run(self, graph: MemoryGraph, case: FailureCase, starts: list[str]) -> tuple[str | None, str | None, str]:
        ops = self._ops(graph, case, starts)
        prompt = (self._header(graph, case, starts) + "\nOperations (with the variables they read and wrote):\n"
                  + self._render(graph, ops)
                  + '\n\nReply as JSON {"reason": "...", "op_id": "<an op id above>", "error_type": "..."}.')
        return parse_blame(self._ask(prompt, BLAME_SCHEMA), graph, [o.id for o in ops])


@dataclass
class StepByStep(_LLMBaseline):
    """One call per op in execution order until one is judged the decisive error."""

    name: str = "step_by_step"
    max_steps: int = 40

    def _run(self, graph: MemoryGraph, case: FailureCase, starts: list[str]) -> tuple[str | None, str | None, str]:
        ops = self._ops(graph, case, starts)[: self.max_steps]
        seen: list[str] = []
        for op in ops:
            prompt = (self._header(graph, case, starts) + "\nOperations so far:\n" + ("\n".join(seen) or "(none)")
                      + "\n\nCurrent operation:\n" + render_op(graph, op, limit=self.value_chars)
                      + '\n\nIs the current operation the earliest decisive error? Reply as JSON '
                        '{"reason": "...", "decisive": true|false, "error_type": "..."}.')
            reply = self._ask(prompt, STEP_SCHEMA)
            obj = parse_json_object(reply)
            if obj is None:
                return None, None, f"unparsable step reply at {op.id}: {reply[:80]!r}"
            if obj.get("decisive") is True:
                return normalise_type(str(obj.get("error_type", ""))), op.id, str(obj.get("reason", ""))[:400]
            seen.append(render_op(graph, op, limit=60, edges=False))
        return None, None, f"no step of {len(ops)} was judged decisive"


@dataclass
class BinarySearch(_LLMBaseline):
    """Halve the op list by asking which half holds the decisive error; then ask the error type."""

    name: str = "binary_search"

    def _run(self, graph: MemoryGraph, case: FailureCase, starts: list[str]) -> tuple[str | None, str | None, str]:
        ops = self._ops(graph, case, starts)
        lo, hi = 0, len(ops)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            prompt = (self._header(graph, case, starts) + "\nFirst half:\n" + self._render(graph, ops[lo:mid])
                      + "\n\nSecond half:\n" + self._render(graph, ops[mid:hi])
                      + '\n\nIs the earliest decisive error in the first half? Reply as JSON '
                        '{"reason": "...", "first_half": true|false}.')
            reply = self._ask(prompt, HALF_SCHEMA)
            obj = parse_json_object(reply)
            if obj is None or not isinstance(obj.get("first_half"), bool):
                return None, None, f"unparsable halving reply: {reply[:80]!r}"
            lo, hi = (lo, mid) if obj["first_half"] else (mid, hi)
        if lo >= len(ops):
            return None, None, "no operations to search"
        op = ops[lo]
        prompt = (self._header(graph, case, starts) + "\nThe decisive error is in this operation:\n"
                  + render_op(graph, op, limit=self.value_chars)
                  + f'\n\nReply as JSON {{"reason": "...", "op_id": "{op.id}", "error_type": "..."}}.')
        error_type, _, reason = parse_blame(self._ask(prompt, BLAME_SCHEMA), graph, [op.id])
        return error_type, op.id, reason


@dataclass
class Constant:
    """Blames every failure on the answer op as one fixed type: the paper's "no attribution" ablation."""

    error_type: str = "ResponseError"
    name: str = "always_response"
    meters: list[MeteredLM] = field(default_factory=list)

    def attribute(self, graph: MemoryGraph, case: FailureCase) -> BlameSignal:
        op = graph.ops.get(case.qa_op or "")
        return BlameSignal(case.case_id, case.question, case.gold, case.prediction, self.error_type, case.qa_op,
                           op.prompt.component if op is not None and op.prompt else None,
                           f"every failure labelled {self.error_type}", method=self.name, confidence=0.0)


BASELINES: dict[str, type[_LLMBaseline]] = {
    "flat_log": FlatLog, "all_at_once": AllAtOnce, "step_by_step": StepByStep, "binary_search": BinarySearch,
}


def make_baseline(name: str, lm: LMClient, **kw: Any) -> _LLMBaseline:
    """The baseline called ``name`` on ``lm`` (KeyError naming the known ones otherwise)."""
    try:
        return BASELINES[name](lm, **kw)
    except KeyError:
        raise KeyError(f"unknown attribution baseline {name!r}; known: {sorted(BASELINES)}") from None
