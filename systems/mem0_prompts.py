"""Mem0's two LLM prompts as named, optimizable components, and the pure helpers its LLM ops share.

The defaults are mem0 1.0.x's own prompts, read from the installed library (not copied), with one
change: mem0 freezes *today's* date into the fact-extraction prompt when it is imported, which is
wrong for a replayed conversation from 2023. The default component carries a ``{session_date}``
slot instead, filled with the session's date each time the prompt is rendered (:func:`render`).

Messages are built exactly as mem0 builds them (its ``parse_messages``, ``ensure_json_instruction``
and ``get_update_memory_messages``), and replies are parsed with mem0's own degrade-step-by-step
JSON helpers, so an op reproduces what mem0 would have sent and understood; an unusable reply is a
``ValueError`` here and a failed op in the graph, where mem0 would log and drop it.

Importing this module does not import mem0: :func:`load_mem0` does, on first use, after turning
mem0's telemetry off (it reads ``MEM0_TELEMETRY`` once, at import).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from types import SimpleNamespace
from typing import Any

from memtrace_opt.errors import ConfigError

__all__ = [
    "CHANGES_ONLY", "DATE_SLOT", "DECISION_SCHEMA", "FACTS_SCHEMA", "FACT_PROMPT", "UPDATE_PROMPT", "LazyPrompts",
    "add_messages", "decision_messages", "default_prompts", "extraction_messages", "load_mem0",
    "parse_events", "parse_facts", "render",
]

FACT_PROMPT = "fact_extraction"
UPDATE_PROMPT = "memory_update"
#: Replaced by the session date when a prompt is rendered.
DATE_SLOT = "{session_date}"
_TODAY = re.compile(r"Today's date is \d{4}-\d{2}-\d{2}\.")

#: What mem0 asks for with ``response_format={"type": "json_object"}``, as a schema a local model
#: can be constrained to (grammar decoding removes syntax failures at no speed cost).
FACTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"facts": {"type": "array", "items": {"type": "string"}}},
    "required": ["facts"],
}
DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "memory": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "text": {"type": "string"},
                    "event": {"type": "string", "enum": ["ADD", "UPDATE", "DELETE", "NONE"]},
                    "old_memory": {"type": "string"},
                },
                "required": ["id", "text", "event"],
            },
        }
    },
    "required": ["memory"],
}


@cache
def load_mem0() -> SimpleNamespace:
    """Import mem0 offline: ``main`` (Memory), ``prompts`` and ``utils`` modules.

    ConfigError when mem0ai is missing, is not the 1.0.x line (2.x dropped the update step this
    system is about), or was already imported by someone else with telemetry on.
    """
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import mem0
        from mem0.configs import prompts
        from mem0.memory import main, utils
    except ImportError as exc:
        raise ConfigError("system", "name", f"system 'mem0' needs mem0ai 1.0.x ({exc}); "
                          "install it with: pip install 'mem0ai>=1.0.11,<1.1'") from exc
    if not str(mem0.__version__).startswith("1.0.") or not hasattr(prompts, "get_update_memory_messages"):
        raise ConfigError("system", "name", f"system 'mem0' needs mem0ai 1.0.x, found {mem0.__version__}; "
                          "install it with: pip install 'mem0ai>=1.0.11,<1.1'")
    if main.MEM0_TELEMETRY:
        raise ConfigError("environment", "MEM0_TELEMETRY", "mem0 was imported with telemetry on before "
                          "memtrace-opt could turn it off; set MEM0_TELEMETRY=False")
    return SimpleNamespace(main=main, prompts=prompts, utils=utils)


def default_prompts() -> dict[str, str]:
    """mem0's user-memory extraction prompt (date made a slot) and its update-decision prompt."""
    p = load_mem0().prompts
    # Should mem0 reword that line, its prompt is kept as is and render(ensure_date=True) appends the date.
    extraction = _TODAY.sub(f"Today's date is {DATE_SLOT}.", p.USER_MEMORY_EXTRACTION_PROMPT)
    return {FACT_PROMPT: extraction, UPDATE_PROMPT: p.DEFAULT_UPDATE_MEMORY_PROMPT}


class LazyPrompts(Mapping[str, str]):
    """The default prompt set, read from mem0 on first access, so defining the system imports no mem0."""

    def _data(self) -> dict[str, str]:
        return _defaults()

    def __getitem__(self, key: str) -> str:
        return self._data()[key]

    def __iter__(self) -> Iterator[str]:
        return iter((FACT_PROMPT, UPDATE_PROMPT))

    def __len__(self) -> int:
        return 2

    def __repr__(self) -> str:
        return "LazyPrompts(fact_extraction, memory_update)"


@cache
def _defaults() -> dict[str, str]:
    return default_prompts()


def render(prompt: str, date: str | None, *, ensure_date: bool = False) -> str:
    """Fill the ``{session_date}`` slot with ``date``.

    With ``ensure_date`` (the extraction prompt) a prompt without the slot, say one a rewrite
    dropped it from, gets the date appended, so relative dates can still be resolved. Plain
    replacement, not ``str.format``: mem0's prompts are full of literal JSON braces.
    """
    when = date or "unknown"
    if DATE_SLOT in prompt:
        return prompt.replace(DATE_SLOT, when)
    return f"{prompt}\n- Today's date is {when}." if ensure_date else prompt


def add_messages(records: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """What ``Memory.add`` receives for message records: one conversation memory, so every turn is a
    ``user`` message prefixed with its speaker (mem0's extraction prompt reads only user turns)."""
    return [{"role": "user", "content": f"{r['speaker']}: {r['text']}"} for r in records]


def extraction_messages(prompt: str, records: Sequence[Mapping[str, Any]], date: str | None) -> list[dict[str, str]]:
    """The fact-extraction chat exactly as mem0 builds it with a custom extraction prompt."""
    u = load_mem0().utils
    system, user = u.ensure_json_instruction(render(prompt, date, ensure_date=True), f"Input:\n{u.parse_messages(add_messages(records))}")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


#: Appended after mem0's decision message when only the changes are asked for (``decision_output:
#: changes``): an output-format rule, not part of the optimizable prompt, so every candidate gets it.
CHANGES_ONLY = ("Output only the entries whose event is ADD, UPDATE or DELETE. Leave out every memory that "
                "stays unchanged (event NONE): anything you do not list is kept as it is.")


def decision_messages(prompt: str, memories: Sequence[str], facts: Sequence[str], date: str | None, *,
                      only_changes: bool = False) -> list[dict[str, str]]:
    """The update-decision chat exactly as mem0 builds it: memories shown with ids ``"0"``, ``"1"``, …
    ``only_changes`` appends :data:`CHANGES_ONLY` (mem0 applies nothing for a NONE entry, so omitting
    them is within its contract)."""
    shown = [{"id": str(i), "text": text} for i, text in enumerate(memories)]
    content = load_mem0().prompts.get_update_memory_messages(shown, list(facts), render(prompt, date))
    if only_changes and memories:
        content = f"{content}\n\n{CHANGES_ONLY}"
    return [{"role": "user", "content": content}]


def _loads(text: str) -> Any:
    """mem0's parse: strip a code fence and ``<think>``, try JSON, then the outermost ``{...}``."""
    u = load_mem0().utils
    try:
        return json.loads(u.remove_code_blocks(text), strict=False)
    except json.JSONDecodeError:
        return json.loads(u.extract_json(text), strict=False)


def parse_facts(text: str) -> list[str]:
    """The fact list of an extraction reply; ValueError when it has none (an empty reply is no facts, as in mem0)."""
    u = load_mem0().utils
    if not u.remove_code_blocks(text).strip():
        return []
    data = _loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("facts"), list):
        raise ValueError("reply is not a JSON object with a 'facts' list")
    return list(u.normalize_facts(data["facts"]))


def parse_events(text: str) -> list[Any]:
    """The event list of a decision reply; ValueError when it has none.

    Events are kept as the model wrote them (a bad id or event name is for mem0 to reject, and
    for the graph to record), so the decision op's output is what mem0 applies.
    """
    if not load_mem0().utils.remove_code_blocks(text).strip():
        raise ValueError("empty reply")
    data = _loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("memory"), list):
        raise ValueError("reply is not a JSON object with a 'memory' list")
    return list(data["memory"])
