"""The blame signal: the one record attribution produces and everything downstream consumes.

The optimizer, the report and the benchmark read nothing else from attribution: which question
failed, what kind of memory error it was, which operation is the earliest decisive faulty one, which
prompt component that op used (``None`` when the op has no prompt, e.g. vector retrieval: such blame
is counted as unoptimizable), why, and what the attribution cost. ``error_type`` is None only for a
failed attribution (an LLM method whose reply could not be read): recorded, never raised.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

ErrorType = Literal[
    "ExtractionError", "UpdateError", "DeletionError", "RetrievalError", "ResponseError",
    "AnnotationError", "JudgeError",
]
MEMORY_ERROR_TYPES: tuple[str, ...] = (
    "ExtractionError", "UpdateError", "DeletionError", "RetrievalError", "ResponseError",
)
ERROR_TYPES: tuple[str, ...] = MEMORY_ERROR_TYPES + ("AnnotationError", "JudgeError")


@dataclass(frozen=True)
class AttributionCost:
    """What finding the blame cost."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    replays: int = 0


@dataclass(frozen=True)
class BlameSignal:
    """Attribution of one failed question to its earliest decisive faulty operation."""

    case_id: str
    question: str
    gold: str
    prediction: str
    error_type: str | None
    op_id: str | None
    prompt_component: str | None
    reason: str
    evidence: tuple[str, ...] = ()
    confidence: float = 0.5
    method: str = "tracing"
    counterfactual_rescued: bool | None = None
    cost: AttributionCost = field(default_factory=AttributionCost)

    @property
    def optimizable(self) -> bool:
        """Blame can reach the optimizer only through a prompt component."""
        return self.prompt_component is not None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["evidence"] = list(self.evidence)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "BlameSignal":
        d = dict(d)
        d["evidence"] = tuple(d.get("evidence", ()))
        d["cost"] = AttributionCost(**d.get("cost", {}))
        return cls(**d)
