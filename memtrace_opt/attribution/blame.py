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
class ChainedFault:
    """A fault still standing downstream once the blamed op's output is corrected: a compound failure.

    Counterfactual replay fixes the earliest faulty op; when the answer stays wrong, the replayed graph
    is traced again and the first fault it names (the answer op misreading evidence it now has, say) is
    a link of the chain. ``rescued`` says whether fixing every link up to this one rescued the answer
    (None: this link has no fix short of the gold answer, as a ResponseError).
    """

    error_type: str
    op_id: str | None
    prompt_component: str | None
    reason: str
    rescued: bool | None = None


#: The ``method`` of the unattributed ablation's signals: a label sent to every prompt, not an attribution.
UNATTRIBUTED_METHOD = "unattributed"


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
    #: Faults that remain once this op's output is corrected, earliest first (empty when the fix alone
    #: rescues, or nothing was replayed): the blamed op stays the earliest decisive one, but it is not
    #: the only op whose prompt the failure speaks to.
    chain: tuple[ChainedFault, ...] = ()

    @property
    def optimizable(self) -> bool:
        """Blame can reach the optimizer only through a prompt component."""
        return self.prompt_component is not None

    @property
    def sent_to_every_prompt(self) -> bool:
        """An unattributed ablation's label, not a blame: no op was found at fault, and the optimizer sends
        the failure to every prompt (so "no prompt component" here does not mean "not optimizable")."""
        return self.method == UNATTRIBUTED_METHOD

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["evidence"] = list(self.evidence)
        d["chain"] = [asdict(link) for link in self.chain]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "BlameSignal":
        d = dict(d)
        d["evidence"] = tuple(d.get("evidence", ()))
        d["cost"] = AttributionCost(**d.get("cost", {}))
        d["chain"] = tuple(ChainedFault(**link) for link in d.get("chain", ()))
        return cls(**d)

    @property
    def chained_components(self) -> tuple[str, ...]:
        """The prompt components of the chain's links, in order, without repeats or the blamed one."""
        seen = {self.prompt_component}
        out = []
        for link in self.chain:
            if link.prompt_component and link.prompt_component not in seen:
                seen.add(link.prompt_component)
                out.append(link.prompt_component)
        return tuple(out)
