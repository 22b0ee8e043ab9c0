"""The executable memory evolution graph: model, tracer, registered ops and replay."""

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
from memtrace_opt.graph.replay import ReplayResult, changed_answers, replay
from memtrace_opt.graph.tracer import End, Memo, New, Next, Overrides, TraceStats, Tracer

__all__ = [
    "End", "LMCall", "Memo", "MemoryGraph", "New", "Next", "OpContext", "OpFailure", "OpSpec", "Operation",
    "Overrides", "PromptRef", "REGISTRY", "ReplayResult", "SessionRecord", "TraceStats", "Tracer", "Variable",
    "changed_answers", "operation", "replay", "split_var_id", "var_id",
]
