"""The memory evolution graph: a bipartite DAG of versioned variables and operations.

Variables are values a memory system produced or consumed (a message, an extracted fact list, a
memory unit, a retrieved context, an answer); operations are the steps that turned some variables
into others. Edges only ever join a variable and an operation, so "which op made this memory, from
which messages, with which prompt" is a walk on the graph. A memory unit that is updated gets a new
version ``name@v+1`` produced by the updating op, which consumes ``name@v``; a deletion is an op that
consumes the last version and produces a tombstone version (value ``None``), so a unit's whole life
stays visible.

Ids are self-describing strings: a variable is ``name@version`` (the version is split at the *last*
``@``; names may contain ``:`` and ``@``), an operation is ``session/op_name#ordinal``. The two
never collide because one ends in ``@<int>`` and the other in ``#<int>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

import networkx as nx

from memtrace_opt.errors import GraphError

VAR = "variable"
OP = "operation"

# Variable categories used across systems (free-form strings are allowed; these are the shared ones).
MESSAGE = "message"
MEMORY_UNIT = "memory-unit"
PROMPT = "prompt"
QUERY = "query"
RETRIEVED = "retrieved-context"
ANSWER = "answer"
GOLD = "gold-answer"
JUDGEMENT = "judgement"
INTERMEDIATE = "intermediate"

# Operation categories.
EXTRACTION = "extraction"
UPDATE = "update"
DELETION = "deletion"
EMBEDDING = "embedding"
RETRIEVAL = "retrieval"
BOUNDARY = "boundary-detection"
QA = "question-answering"
JUDGE = "llm-judge"
BUFFER = "buffer"


def var_id(name: str, version: int) -> str:
    """The id of version ``version`` of variable ``name``."""
    return f"{name}@{version}"


def split_var_id(vid: str) -> tuple[str, int]:
    """Split ``name@version`` at the last ``@``; raises GraphError on a malformed id."""
    name, sep, ver = vid.rpartition("@")
    if not sep or not name or not ver.isdigit():
        raise GraphError(f"malformed variable id {vid!r}: expected 'name@<version>'")
    return name, int(ver)


def op_name(op_id: str | None) -> str:
    """``answer:conv/q1/qa.answer#0`` → ``qa.answer`` (sessions and qa ids may hold '/'; op names do not)."""
    if not op_id:
        return "(no operation)"
    return op_id.rsplit("/", 1)[-1].rsplit("#", 1)[0]


@dataclass(frozen=True, slots=True)
class Variable:
    """One version of a named value. ``value is None`` with ``deleted`` marks a tombstone."""

    name: str
    version: int
    category: str
    value: Any
    time: int
    session: str | None = None
    comment: str = ""
    deleted: bool = False

    @property
    def id(self) -> str:
        return f"{self.name}@{self.version}"


@dataclass(frozen=True, slots=True)
class PromptRef:
    """The prompt component an operation used: its name and a short hash of the exact text."""

    component: str
    sha: str


@dataclass(frozen=True, slots=True)
class LMCall:
    """Accounting of one LM call made inside an operation."""

    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached: bool = False
    finish_reason: str = "stop"
    #: Prompt tokens the server took from its KV cache (a shared prefix) instead of processing them.
    reused_prompt_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Operation:
    """One executed step. ``inputs`` maps a role to the variable ids it read, ``outputs`` a role to the id it made.

    ``params`` are the non-variable arguments (top_k, a session date) kept so the op can be re-run;
    ``memo_key`` identifies (op, prompt text, params, input values) for reuse during replay;
    ``status`` is ``"failed"`` when the op could not do its job (an unparsable LM reply): the run
    continues with the op's fallback outputs and ``raw`` keeps what the LM actually said.
    """

    id: str
    name: str
    category: str
    inputs: Mapping[str, tuple[str, ...]]
    outputs: Mapping[str, str]
    time: int
    session: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    prompt: PromptRef | None = None
    lm_calls: tuple[LMCall, ...] = ()
    status: str = "ok"
    error: str | None = None
    raw: str | None = None
    memo_key: str | None = None
    reused: bool = False
    comment: str = ""

    def input_ids(self) -> list[str]:
        """All input variable ids, in role order, without duplicates."""
        seen: dict[str, None] = {}
        for ids in self.inputs.values():
            for vid in ids:
                seen[vid] = None
        return list(seen)

    def output_ids(self) -> list[str]:
        return list(dict.fromkeys(self.outputs.values()))


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A span of work: ingesting one conversation session, or answering one question."""

    id: str
    kind: str
    time: int
    meta: Mapping[str, Any] = field(default_factory=dict)


class MemoryGraph:
    """Variables, operations and sessions of one run (or one conversation of a run).

    The structure lives in a networkx DiGraph whose nodes are variable and operation ids (node
    attribute ``kind``); the records live in dicts keyed by the same ids, in execution order.
    Graph algorithms are module-level functions in :mod:`memtrace_opt.graph.queries`.
    """

    def __init__(self, meta: Mapping[str, Any] | None = None) -> None:
        self.meta: dict[str, Any] = dict(meta or {})
        self.variables: dict[str, Variable] = {}
        self.ops: dict[str, Operation] = {}
        self.sessions: dict[str, SessionRecord] = {}
        self.producer: dict[str, str] = {}
        self.latest: dict[str, int] = {}
        self.nx = nx.DiGraph()

    # -- building -------------------------------------------------------------------------------
    def add_variable(self, var: Variable) -> None:
        vid = var.id
        if vid in self.variables or vid in self.ops:
            raise GraphError(f"duplicate node id {vid!r}")
        self.variables[vid] = var
        if var.version > self.latest.get(var.name, 0):
            self.latest[var.name] = var.version
        self.nx.add_node(vid, kind=VAR)

    def add_operation(self, op: Operation) -> None:
        """Add an op whose input and output variables are already in the graph."""
        if op.id in self.ops or op.id in self.variables:
            raise GraphError(f"duplicate node id {op.id!r}")
        in_ids, out_ids = op.input_ids(), op.output_ids()
        for vid in in_ids:
            if vid not in self.variables:
                raise GraphError(f"operation {op.id!r} reads unknown variable {vid!r}")
        for vid in out_ids:
            if vid not in self.variables:
                raise GraphError(f"operation {op.id!r} writes unknown variable {vid!r}")
            if vid in self.producer:
                raise GraphError(f"variable {vid!r} produced twice: by {self.producer[vid]!r} and {op.id!r}")
        self.ops[op.id] = op
        g = self.nx
        g.add_node(op.id, kind=OP)
        g.add_edges_from([(vid, op.id) for vid in in_ids] + [(op.id, vid) for vid in out_ids])
        for vid in out_ids:
            self.producer[vid] = op.id

    def add_session(self, rec: SessionRecord) -> None:
        self.sessions[rec.id] = rec

    # -- reading --------------------------------------------------------------------------------
    def value(self, vid: str) -> Any:
        return self.variables[vid].value

    def consumers(self, vid: str) -> list[str]:
        """Ops that read ``vid``, in execution order."""
        return sorted(self.nx.successors(vid), key=lambda o: self.ops[o].time)

    def latest_id(self, name: str) -> str:
        return f"{name}@{self.latest[name]}"

    def variables_of(self, category: str) -> Iterator[Variable]:
        return (v for v in self.variables.values() if v.category == category)

    def ops_of(self, category: str) -> Iterator[Operation]:
        return (o for o in self.ops.values() if o.category == category)

    def __len__(self) -> int:
        return len(self.ops)

    def __repr__(self) -> str:
        return f"MemoryGraph({len(self.variables)} variables, {len(self.ops)} ops, {len(self.sessions)} sessions)"

    def fingerprint(self) -> tuple[tuple[tuple[Any, ...], ...], tuple[tuple[str, str, str, bool], ...]]:
        """Structure and values, without accounting (latency, cache and reuse flags).

        Two runs of the same system on the same data with the same prompts have equal
        fingerprints; replay without overrides is checked against this.
        """
        ops = tuple(
            (o.id, o.name, o.category, tuple((k, tuple(v)) for k, v in o.inputs.items()),
             tuple(o.outputs.items()), o.prompt, o.status, o.raw)
            for o in self.ops.values()
        )
        variables = tuple((v.id, v.category, repr(v.value), v.deleted) for v in self.variables.values())
        return ops, variables
