"""Attribution: blame each failed answer on its earliest decisive faulty operation.

The step between the graph and the optimizer: a blame names the op, its error type and the prompt
component it used, which is how the loop knows which prompt to edit.

- :mod:`.blame` — the :class:`BlameSignal` record everything downstream consumes.
- :mod:`.failures` — the failed questions of a graph (:func:`collect_failures`).
- :mod:`.evidence` — starting points: annotated evidence or BM25 ⊕ dense pseudo-evidence (RRF).
- :mod:`.content` — "does this value still hold the fact?": token, LLM and cascade judges.
- :mod:`.walk`, :mod:`.tracing` — the main method, iterative subgraph tracing (:class:`TracingAttributor`).
- :mod:`.counterfactual` — verification by replay with the blamed op fixed.
- :mod:`.baselines` — flat log, all-at-once, step-by-step, binary search (LLM methods).
- :mod:`.methods` — every method by name (:func:`make_attribution_method`): the one factory.
- :mod:`.aggregate` — blame grouped by prompt component, the optimizer's input.

How well each method does is measured elsewhere: the fault injectors and the benchmark live in
:mod:`memtrace_opt.bench`, which imports this package and is never imported by it.

Names are imported lazily, so ``import memtrace_opt.attribution.blame`` stays light. (The aggregation
function is ``memtrace_opt.attribution.aggregate.aggregate``: its module shares its name.)
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AttributionCost": "blame", "BlameSignal": "blame", "ChainedFault": "blame", "ERROR_TYPES": "blame",
    "MEMORY_ERROR_TYPES": "blame",
    "FailureCase": "failures", "collect_cases": "failures", "collect_failures": "failures",
    "pseudo_evidence": "evidence", "evidence_recall_at_k": "evidence", "starting_points": "evidence",
    "CascadeJudge": "content", "ContentJudge": "content", "LLMContentJudge": "content", "TokenJudge": "content",
    "TracingAttributor": "tracing", "CounterfactualAttributor": "counterfactual",
    "make_baseline": "baselines", "BASELINES": "baselines", "make_attribution_method": "methods",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'memtrace_opt.attribution' has no attribute {name!r}")
    return getattr(importlib.import_module(f"memtrace_opt.attribution.{module}"), name)
