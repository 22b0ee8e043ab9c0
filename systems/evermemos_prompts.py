"""EverMemOS prompt components, their JSON schemas and the parsers of their replies.

Each LLM step of the system has one named, optimizable prompt (the system message); the data of a
call (messages, dates, memories) goes in the user message, rendered at call time, so an optimizer
rewriting a prompt can never break a placeholder. Every reply is JSON constrained by a schema
(small local models need grammar-constrained decoding); the parsers still accept a little noise
around the JSON and return ``None`` when a reply is unusable, so the op can record a failure.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Sequence

BOUNDARY = "boundary_detection"
EXTRACTION = "memcell_extraction"
SUFFICIENCY = "sufficiency_check"
REWRITE = "query_rewrite"

DEFAULT_PROMPTS: dict[str, str] = {
    BOUNDARY: (
        "You split a conversation into episodes (one topic or event each). You see the current episode "
        "and the newest messages. Decide whether the newest messages start a new topic or event "
        "(boundary: true) or continue the current episode (boundary: false).\n"
        'Reply with JSON: {"boundary": true or false, "reason": "<a few words>"}'
    ),
    EXTRACTION: (
        "You write the memory record of a conversation segment. Reply with JSON:\n"
        '- "episode": 2-4 sentences in the third person that name the speakers and say what happened, '
        "with absolute dates (turn \"yesterday\", \"last week\" into dates using the conversation date).\n"
        '- "facts": short standalone facts, each naming its person, with absolute dates.\n'
        '- "foresight": plans or expectations about the future, each {"text": ..., "valid_until": '
        '"YYYY-MM-DD" or null}.\n'
        "Use only what the segment says."
    ),
    SUFFICIENCY: (
        "You check whether retrieved memories are enough to answer a question about a conversation.\n"
        'Reply with JSON: {"sufficient": true or false, "missing": "<the missing information, or empty>"}'
    ),
    REWRITE: (
        "The memories retrieved for a question lack some information. Write 2 or 3 short search queries, "
        "each different from the question, that could find the missing information (names, events, dates).\n"
        'Reply with JSON: {"queries": ["...", "..."]}'
    ),
}

# Length caps keep a small model from rambling past its token budget (a truncated reply is a failure).
_REASON = {"type": "string", "maxLength": 100}
BOUNDARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"boundary": {"type": "boolean"}, "reason": _REASON},
    "required": ["boundary", "reason"],
}
EXTRACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "episode": {"type": "string", "minLength": 1, "maxLength": 600},
        "facts": {"type": "array", "items": {"type": "string", "maxLength": 150}, "maxItems": 6},
        "foresight": {
            "type": "array",
            "maxItems": 2,
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "maxLength": 150},
                    "valid_until": {"anyOf": [{"type": "string", "maxLength": 20}, {"type": "null"}]},
                },
                "required": ["text", "valid_until"],
            },
        },
    },
    "required": ["episode", "facts", "foresight"],
}
#: The sufficiency check's default cap on its "missing" reason (the rewrite's hint), in characters.
REASON_CHARS = 150


def sufficiency_schema(reason_chars: int = REASON_CHARS) -> dict[str, Any]:
    """The verdict's grammar: a boolean and, unless ``reason_chars`` is 0, a capped reason."""
    if reason_chars <= 0:
        return {"type": "object", "properties": {"sufficient": {"type": "boolean"}}, "required": ["sufficient"]}
    return {"type": "object",
            "properties": {"sufficient": {"type": "boolean"}, "missing": {"type": "string", "maxLength": reason_chars}},
            "required": ["sufficient", "missing"]}


def sufficiency_max_tokens(reason_chars: int = REASON_CHARS) -> int:
    """Room for the verdict's JSON under its grammar: 96 for the default reason, 16 for a bare verdict."""
    return 16 if reason_chars <= 0 else max(24, 16 + reason_chars * 80 // REASON_CHARS)


SUFFICIENCY_SCHEMA: dict[str, Any] = sufficiency_schema()
REWRITE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"queries": {"type": "array", "items": {"type": "string", "maxLength": 100},
                               "minItems": 1, "maxItems": 3}},
    "required": ["queries"],
}


# -- rendering the user message -------------------------------------------------------------------
def message_lines(messages: Sequence[Mapping[str, Any]]) -> str:
    """Buffered messages as ``Speaker: text`` lines."""
    return "\n".join(f"{m.get('speaker', '?')}: {m.get('text', '')}" for m in messages) or "(none)"


def render_boundary(current: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]) -> str:
    return f"Current episode:\n{message_lines(current)}\n\nNewest messages:\n{message_lines(new)}"


def render_extraction(messages: Sequence[Mapping[str, Any]], date: str | None) -> str:
    return f"Conversation date: {date or 'unknown'}\n\nSegment:\n{message_lines(messages)}"


def memory_lines(candidates: Sequence[Mapping[str, Any]]) -> str:
    """Candidate memories as numbered, dated lines for the agentic prompts."""
    if not candidates:
        return "(no memories)"
    return "\n".join(f"{i}. [{c.get('date') or 'unknown date'}] {c.get('text', '')}"
                     for i, c in enumerate(candidates, start=1))


def render_sufficiency(question: str, candidates: Sequence[Mapping[str, Any]]) -> str:
    return f"Question: {question}\n\nRetrieved memories:\n{memory_lines(candidates)}"


def render_rewrite(question: str, candidates: Sequence[Mapping[str, Any]], missing: str) -> str:
    return (f"Question: {question}\n\nRetrieved memories:\n{memory_lines(candidates)}\n\n"
            f"Missing information: {missing or 'unknown'}")


# -- parsing replies ------------------------------------------------------------------------------
def parse_json(text: str) -> Any:
    """The JSON value in ``text`` (whole reply, a fenced block, or the outermost braces); None if none."""
    text = (text or "").strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    candidates = [text, fenced[1] if fenced else None]
    for start, end in (("{", "}"), ("[", "]")):
        i, j = text.find(start), text.rfind(end)
        if 0 <= i < j:
            candidates.append(text[i : j + 1])
    for cand in candidates:
        if cand:
            try:
                return json.loads(cand)
            except json.JSONDecodeError:
                continue
    return None


def as_bool(value: Any) -> bool | None:
    """A JSON boolean, or the strings true/false/yes/no; None for anything else."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"true", "yes", "false", "no"}:
        return value.strip().lower() in {"true", "yes"}
    return None


def parse_boundary(text: str) -> dict[str, Any] | None:
    data = parse_json(text)
    flag = as_bool(data.get("boundary")) if isinstance(data, dict) else None
    if flag is None:
        return None
    return {"boundary": flag, "reason": str(data.get("reason", ""))[:200]}


def parse_sufficiency(text: str) -> dict[str, Any] | None:
    data = parse_json(text)
    flag = as_bool(data.get("sufficient")) if isinstance(data, dict) else None
    if flag is None:
        return None
    missing = data.get("missing", "")
    if isinstance(missing, list):
        missing = "; ".join(str(m) for m in missing)
    return {"sufficient": flag, "missing": str(missing or "")[:300]}


def parse_queries(text: str, question: str, limit: int = 3) -> list[str] | None:
    """2-3 distinct queries, none equal to the question; None when the reply holds no usable query."""
    data = parse_json(text)
    items = data.get("queries") if isinstance(data, dict) else data
    if not isinstance(items, list):
        return None
    seen = {question.strip().lower()}
    queries = []
    for q in items:
        q = str(q).strip() if isinstance(q, (str, int, float)) else ""
        if len(q) >= 3 and q.lower() not in seen:
            seen.add(q.lower())
            queries.append(q[:200])
    return queries[:limit] or None


def parse_memcell(text: str) -> dict[str, Any] | None:
    """``{episode, facts, foresight}`` from an extraction reply; None when there is no episode."""
    data = parse_json(text)
    if not isinstance(data, dict):
        return None
    episode = data.get("episode")
    if not isinstance(episode, str) or not episode.strip():
        return None
    facts = [str(f).strip() for f in data.get("facts") or [] if isinstance(f, (str, int, float)) and str(f).strip()]
    foresight = []
    for item in data.get("foresight") or []:
        if isinstance(item, dict) and str(item.get("text", "")).strip():
            until = item.get("valid_until")
            foresight.append({"text": str(item["text"]).strip(), "valid_until": str(until) if until else None})
        elif isinstance(item, str) and item.strip():
            foresight.append({"text": item.strip(), "valid_until": None})
    return {"episode": episode.strip(), "facts": facts, "foresight": foresight}
