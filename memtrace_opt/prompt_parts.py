"""A prompt component as three editable parts: the instruction, learned rules, worked examples.

Small models improve prompts best by small deltas (add a rule, swap an example), not by whole
rewrites. The candidate GEPA sees stays ``{component: text}``; this module renders the three
parts into that text under fixed headers and reads them back, so a later round edits the rules
and examples of the text an earlier round produced, and the report's prompt diff shows exactly
which rule or example was added.

>>> text = compose_prompt("Answer briefly.", ["If asked when, give a date."], ["Input: q\\nOutput: a"])
>>> split_prompt(text)
PromptParts(instruction='Answer briefly.', rules=('If asked when, give a date.',), examples=('Input: q\\nOutput: a',))
>>> split_prompt("Just an instruction.").rules
()
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

__all__ = ["EXAMPLES_HEADER", "RULES_HEADER", "PromptParts", "compose_prompt", "split_prompt"]

RULES_HEADER = "Rules learned from past mistakes:"
EXAMPLES_HEADER = "Worked examples (input, then the correct output):"
_EXAMPLE_SEP = "\n---\n"


@dataclass(frozen=True)
class PromptParts:
    """The instruction, the learned rules (one line each) and the worked examples of one prompt."""

    instruction: str
    rules: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()

    def render(self) -> str:
        return compose_prompt(self.instruction, self.rules, self.examples)


def compose_prompt(instruction: str, rules: Sequence[str] = (), examples: Sequence[str] = ()) -> str:
    """The prompt text: the instruction, then the rules block, then the examples block (each only if non-empty)."""
    text = instruction.rstrip()
    if rules:
        text += "\n\n" + RULES_HEADER + "\n" + "\n".join(f"- {r.strip()}" for r in rules)
    if examples:
        text += "\n\n" + EXAMPLES_HEADER + "\n" + _EXAMPLE_SEP.join(e.strip() for e in examples)
    return text


def split_prompt(text: str) -> PromptParts:
    """The parts of a prompt written by :func:`compose_prompt` (any other text is all instruction)."""
    body, _, examples = text.partition("\n\n" + EXAMPLES_HEADER + "\n")
    instruction, _, rules = body.partition("\n\n" + RULES_HEADER + "\n")
    rule_lines = tuple(re.sub(r"^-\s*", "", ln).strip() for ln in rules.splitlines() if ln.strip())
    example_items = tuple(e.strip() for e in examples.split(_EXAMPLE_SEP) if e.strip()) if examples else ()
    return PromptParts(instruction.rstrip(), rule_lines, example_items)
