"""Long-Context: the whole conversation is the memory, cut oldest-first to a token budget.

One memory unit ``mem:context`` is a list of message records; every turn makes a new version of it
(op ``long_context.memory_update``). When the unit grows past ``settings.context_tokens`` a
separate op ``long_context.trim`` drops the oldest messages into a ``trimmed:<n>`` variable, so the
graph shows exactly what was forgotten and when: an answer that needed a trimmed message is an
UpdateError of that trim, not a mystery. Retrieval (``long_context.retrieve``) hands the whole
unit to the shared QA op. No op calls an LM except question answering.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Mapping, Sequence

from memtrace_opt.data.model import QA, Session
from memtrace_opt.graph import New, Next, OpContext, Variable, operation
from memtrace_opt.graph.model import MEMORY_UNIT, RETRIEVAL, RETRIEVED, UPDATE
from memtrace_opt.systems.base import MemorySystem, SystemSettings, approx_tokens, format_message
from memtrace_opt.systems.registry import register_system

__all__ = ["CONTEXT_UNIT", "TRIMMED", "LongContextSettings", "LongContextSystem", "record_tokens", "split_to_budget"]

CONTEXT_UNIT = "mem:context"
#: Category of the variables holding what a trim dropped.
TRIMMED = "trimmed-context"


class LongContextSettings(SystemSettings):
    """``context_tokens``: the memory's budget (approximate tokens, see :func:`approx_tokens`)."""

    #: The answer prompt's memory budget: the most recent messages that fit in this many approximate tokens.
    context_tokens: int = 4000


@lru_cache(maxsize=65536)
def _line_tokens(line: str) -> int:
    return approx_tokens(line)


def record_tokens(record: Mapping[str, Any]) -> int:
    """Tokens one message takes in the answer prompt (its dated line)."""
    return _line_tokens(f"- [{record.get('date') or ''}] {format_message(record)}")


def split_to_budget(records: Sequence[Mapping[str, Any]], budget: int) -> tuple[list[Any], list[Any]]:
    """``(kept, dropped)``: drop the oldest records until the rest fit in ``budget`` tokens."""
    total = sum(record_tokens(r) for r in records)
    cut = 0
    while cut < len(records) and total > budget:
        total -= record_tokens(records[cut])
        cut += 1
    return list(records[cut:]), list(records[:cut])


@operation("long_context.memory_update", category=UPDATE)
def _memory_update(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Append the message to the context (the first message starts it)."""
    return {"memory": list(inputs.get("memory") or []) + [inputs["message"]]}


@operation("long_context.trim", category=UPDATE)
def _trim(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Cut the context to ``params["budget"]`` tokens; the dropped messages become their own variable."""
    kept, dropped = split_to_budget(inputs["memory"], params["budget"])
    return {"memory": kept, "trimmed": dropped}


@operation("long_context.retrieve", category=RETRIEVAL)
def _retrieve(ctx: OpContext, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The whole context, as dated records for the answer prompt."""
    records = inputs.get("memory") or []
    return {"context": [{"text": format_message(r), "date": r.get("date"), "turn_id": r.get("turn_id")}
                        for r in records]}


@register_system
class LongContextSystem(MemorySystem):
    """Keeps the most recent ``context_tokens`` of the conversation verbatim."""

    name = "long_context"
    default_prompts: Mapping[str, str] = {}
    settings_model = LongContextSettings
    op_settings = {"long_context.trim": ("context_tokens",)}
    settings: LongContextSettings

    def __init__(self, tracer: Any, settings: Any = None) -> None:
        super().__init__(tracer, settings)
        self.unit: Variable | None = None
        self.tokens = 0
        self.trims = 0

    def ingest_session(self, session: Session, messages: list[Variable]) -> None:
        for message in messages:
            self._update(message)

    def _update(self, message: Variable) -> None:
        inputs: dict[str, Any] = {"message": message}
        if self.unit is None:
            out: Any = New(CONTEXT_UNIT, MEMORY_UNIT, "the conversation so far")
        else:
            inputs["memory"], out = self.unit, Next(self.unit)
        self.unit = self.tracer.call("long_context.memory_update", inputs=inputs, outputs={"memory": out})["memory"]
        self.tokens += record_tokens(message.value)
        if self.tokens > self.settings.context_tokens:
            self._trim()

    def _trim(self) -> None:
        self.trims += 1
        made = self.tracer.call(
            "long_context.trim", inputs={"memory": self.unit}, params={"budget": self.settings.context_tokens},
            outputs={"memory": Next(self.unit), "trimmed": New(f"trimmed:{self.trims}", TRIMMED, "dropped oldest")},
        )
        self.unit = made["memory"]
        self.tokens = sum(record_tokens(r) for r in self.unit.value)

    def retrieve(self, qa: QA, question: Variable) -> Variable:
        inputs: dict[str, Any] = {"memory": self.unit} if self.unit is not None else {}
        return self.tracer.call("long_context.retrieve", inputs=inputs,
                                outputs={"context": New(f"retrieved:{qa.id}", RETRIEVED)})["context"]
