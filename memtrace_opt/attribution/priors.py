"""Per-system priors: where each memory system tends to lose information, and how to say so to an LM.

From the reference method (NOTES.md §1): RAG stores raw text, so failures are retrieval → response;
Mem0 loses facts in extraction, then through its update/delete decisions, then in retrieval;
EverMemOS in segmentation (boundary detection) and memory formation, then in its retrieval branch;
Long-Context in trimming (an update that pushes old turns out), then in the response.
Tracing uses ``forming`` (op categories that may lose a fact before or inside a memory unit) and
``content_first`` (categories preferred when several ops lost it: ops that write content, not a
boundary decision, which carries none and is blamed only when nothing else lost the fact);
baselines put ``hint`` in the prompt.
"""

from __future__ import annotations

from dataclasses import dataclass

from memtrace_opt.graph.model import BOUNDARY, BUFFER, DELETION, EXTRACTION, UPDATE

__all__ = ["PRIORS", "SystemPrior", "prior_for"]


@dataclass(frozen=True)
class SystemPrior:
    """Where a system can lose a fact, most likely first."""

    name: str
    forming: tuple[str, ...]
    content_first: tuple[str, ...]
    hint: str


_ALL_FORMING = (EXTRACTION, UPDATE, DELETION, BOUNDARY, BUFFER)

PRIORS: dict[str, SystemPrior] = {
    "rag": SystemPrior("rag", (BUFFER, EXTRACTION, UPDATE), (EXTRACTION, UPDATE),
                       "RAG stores raw message chunks: check retrieval first, then the response."),
    "mem0": SystemPrior("mem0", _ALL_FORMING, (EXTRACTION, UPDATE),
                        "Mem0: check fact extraction, then follow the memory unit ids through update/delete "
                        "decisions, then retrieval, then the response."),
    "evermemos": SystemPrior("evermemos", _ALL_FORMING, (EXTRACTION, UPDATE),
                             "EverMemOS: check boundary detection and memory formation, then the retrieval "
                             "branch (bm25/embedding/agentic rounds/rerank), then the response."),
    "long_context": SystemPrior("long_context", (UPDATE, BUFFER, DELETION), (UPDATE,),
                                "Long-Context: check whether trimming pushed the evidence out of the context, "
                                "then the response."),
}

DEFAULT_PRIOR = SystemPrior("default", _ALL_FORMING, (EXTRACTION, UPDATE),
                            "Follow the evidence through extraction, memory updates and deletions, retrieval, "
                            "then the response.")


def prior_for(system: str | None) -> SystemPrior:
    """The prior of ``system`` (by registry name; ``long-context`` and ``long_context`` both work): a built-in
    one, else the ``attribution_prior`` the system class declares, else the default."""
    key = (system or "").lower().replace("-", "_")
    if key in PRIORS:
        return PRIORS[key]
    if system:
        from memtrace_opt.errors import ConfigError
        from memtrace_opt.systems.registry import get_system

        try:
            declared = get_system(system).attribution_prior
        except ConfigError:
            declared = None
        if isinstance(declared, SystemPrior):
            return declared
    return DEFAULT_PRIOR
