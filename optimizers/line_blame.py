"""Blame one line of a step's instruction for its failures, and propose the instruction without it.

Rules and examples can only *add* to a prompt. When the failure comes from the instruction itself —
a line that dictates the wrong output ("If the memories do not contain the answer, reply exactly:
Not mentioned."), or one whose format contradicts what is asked ("Answer in at most 6 words" for a
question whose answer is a list) — adding a rule that contradicts it leaves the small model torn
between two orders. The fix is to remove the line, and a small reflection model can point at the
line even when it cannot rewrite the prompt: it is a multiple-choice question over numbered lines.

Attribution goes one level finer here: from the faulty operation to the faulty line of its prompt.

1. *Quoted*: a wrong output that an instruction line spells out word for word (at least two words)
   was dictated by that line; no LM call is needed.
2. *Asked*: otherwise the reflection LM is shown the numbered lines and the failure records and
   answers with one number (temperature 0, so the answer is cached and a resumed run repeats it).

The first line (the step's task statement) and lines holding a ``{placeholder}`` the system fills
in are never dropped.

>>> lines = ["You answer questions.", "Answer in at most 6 words.", "If unsure, reply exactly: Not mentioned."]
>>> quoted_line(lines, ["Not mentioned."])
3
>>> quoted_line(lines, ["Paris"]) is None
True
>>> drop_line("You answer questions.\\nAnswer in at most 6 words.", 2)
'You answer questions.'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Collection, Mapping, Sequence

from memtrace_opt.lm.base import LMClient

__all__ = ["LINE_TEMPLATE", "LineBlame", "blame_line", "droppable", "drop_line", "instruction_lines", "quoted_line"]

LINE_TEMPLATE = """A step "{component}" of an LLM memory system follows this instruction, shown line by line:
{numbered}

It gave wrong outputs on these cases:
{records}

Which ONE numbered line of the instruction most likely made the step give the wrong output instead of the correct one? Reply with the line number only."""

_PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")


@dataclass(frozen=True)
class LineBlame:
    """The blamed line (1-based among the non-empty instruction lines), how it was found, the LM's reply."""

    line: int
    text: str
    how: str
    raw: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "text": self.text, "how": self.how, "raw": self.raw}


def instruction_lines(instruction: str) -> list[str]:
    """The non-empty lines of an instruction, stripped: the units a line blame numbers."""
    return [ln.strip() for ln in instruction.splitlines() if ln.strip()]


def droppable(lines: Sequence[str], number: int) -> bool:
    """Whether line ``number`` (1-based) may be removed: not the task statement, no placeholder."""
    return 1 < number <= len(lines) and not _PLACEHOLDER.search(lines[number - 1])


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def quoted_line(lines: Sequence[str], outputs: Sequence[str], skip: Collection[str] = ()) -> int | None:
    """The first droppable line (not in ``skip``) that spells out one of ``outputs`` word for word
    (two words or more)."""
    for output in outputs:
        said = _norm(output)
        if len(said.split()) < 2:
            continue
        for number in range(1, len(lines) + 1):
            if lines[number - 1] in skip or not droppable(lines, number):
                continue
            if f" {said} " in f" {_norm(lines[number - 1])} ":
                return number
    return None


def most_quoted_line(lines: Sequence[str], outputs: Sequence[str], skip: Collection[str] = (), *,
                     at_least: int = 1) -> int | None:
    """The droppable line (not in ``skip``) that the most ``outputs`` spell out word for word, if at least
    ``at_least`` of them do: the round's failures as evidence, not one minibatch's (ties: the first line)."""
    counts: dict[int, int] = {}
    for output in outputs:
        number = quoted_line(lines, [output], skip)
        if number is not None:
            counts[number] = counts.get(number, 0) + 1
    best = max(counts.items(), key=lambda kv: (kv[1], -kv[0]), default=None)
    return best[0] if best is not None and best[1] >= at_least else None


def _outputs(record: Mapping[str, Any]) -> list[str]:
    value = record.get("Generated Outputs")
    if isinstance(value, Mapping):
        return [str(v) for v in value.values()]
    return [str(value)] if value is not None else []


def _render(record: Mapping[str, Any], max_chars: int = 700) -> str:
    """A failure for the line question: the (short) inputs, what the step gave and the feedback."""
    inputs = record.get("Inputs")
    if isinstance(inputs, Mapping):
        inputs = "; ".join(f"{k}: {str(v)[:200]}" for k, v in inputs.items())
    text = f"Input: {inputs}\nOutput: {'; '.join(_outputs(record))}\nFeedback: {record.get('Feedback', '')}"
    return text if len(text) <= max_chars else text[: max_chars - 3] + "..."


def _first_number(reply: str) -> int | None:
    match = re.search(r"\d+", reply)
    return int(match.group(0)) if match else None


def blame_line(lm: LMClient | None, component: str, instruction: str, records: Sequence[Mapping[str, Any]], *,
               skip: Collection[str] = (), max_records: int = 2, max_tokens: int = 8,
               round_outputs: Sequence[str] = ()) -> LineBlame | None:
    """The line of ``instruction`` to blame for ``records``' wrong outputs, or None: nothing droppable
    outside ``skip`` (lines already tried), or the LM named no such line. In order: a line quoted by a
    record's output; the line quoted most often by ``round_outputs`` (the wrong outputs of every
    failure of the round charged to this component: evidence a 6-question minibatch may miss; one
    quote suffices, as it does in the minibatch); the
    line the LM names, shown the first ``max_records`` records."""
    lines = instruction_lines(instruction)
    open_lines = [n for n in range(1, len(lines) + 1) if droppable(lines, n) and lines[n - 1] not in skip]
    if not open_lines or not records:
        return None
    quoted = quoted_line(lines, [o for r in records for o in _outputs(r)], skip)
    if quoted is not None:
        return LineBlame(quoted, lines[quoted - 1], "quoted")
    quoted = most_quoted_line(lines, round_outputs, skip)
    if quoted is not None:
        return LineBlame(quoted, lines[quoted - 1], "quoted by the round")
    if lm is None:
        return None
    prompt = LINE_TEMPLATE.format(
        component=component, numbered="\n".join(f"{i}. {ln}" for i, ln in enumerate(lines, 1)),
        records="\n\n".join(_render(r) for r in records[:max_records]))
    reply = lm.chat([{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=0.0).text
    number = _first_number(reply)
    if number not in open_lines:
        return None
    return LineBlame(number, lines[number - 1], "asked", reply[:200])


def drop_line(instruction: str, number: int) -> str:
    """``instruction`` without its ``number``-th non-empty line (1-based); the other lines unchanged."""
    kept, seen = [], 0
    for line in instruction.splitlines():
        if line.strip():
            seen += 1
            if seen == number:
                continue
        kept.append(line)
    return "\n".join(kept).strip("\n")
