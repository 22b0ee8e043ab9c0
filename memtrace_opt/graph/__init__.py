"""The executable memory evolution graph: model, tracer, registered ops, replay, queries and storage.

The first step of a run: a memory system's ops, run through the :class:`Tracer`, record every message,
fact, memory version, retrieval and answer as a variable and every step as an operation with its
prompt and LM calls. Attribution walks the graph; the loop replays it with changed prompts.
"""

from memtrace_opt.graph.io_json import load_json, save_json
from memtrace_opt.graph.io_sqlite import list_graphs, load_graph, save_graph
from memtrace_opt.graph.model import (
    LMCall,
    MemoryGraph,
    Operation,
    PromptRef,
    SessionRecord,
    Variable,
    split_var_id,
    var_id,
)
from memtrace_opt.graph.ops import REGISTRY, OpContext, OpFailure, OpSpec, operation
from memtrace_opt.graph.outcome import JudgedOutcome, MissingOutcomeError, read_judged_outcome
from memtrace_opt.graph.queries import (
    OpLogEntry,
    OpView,
    UnitEvent,
    flat_op_log,
    forward_impact,
    lineage,
    lineage_messages,
    live_units,
    op_subgraph,
    question_slice,
    unit_lifetime,
)
from memtrace_opt.graph.cone import upstream_cone
from memtrace_opt.graph.replay import ReplayResult, changed_answers, replay
from memtrace_opt.graph.tracer import End, Memo, New, Next, Overrides, TraceStats, Tracer
from memtrace_opt.graph.validate import problems, validate

__all__ = [
    "End", "JudgedOutcome", "LMCall", "Memo", "MemoryGraph", "MissingOutcomeError", "New", "Next", "OpContext",
    "OpFailure", "OpLogEntry", "OpSpec", "OpView", "Operation", "Overrides", "PromptRef", "REGISTRY", "ReplayResult",
    "SessionRecord", "TraceStats", "Tracer", "UnitEvent", "Variable", "changed_answers", "flat_op_log",
    "forward_impact", "lineage", "lineage_messages", "list_graphs", "live_units", "load_graph",
    "load_json", "op_subgraph", "operation", "problems", "question_slice", "read_judged_outcome", "replay",
    "save_graph", "save_json", "split_var_id", "unit_lifetime", "upstream_cone", "validate", "var_id",
]
