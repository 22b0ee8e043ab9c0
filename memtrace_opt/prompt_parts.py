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
from typing import Mapping, Sequence

__all__ = ["EXAMPLES_HEADER", "RULES_HEADER", "PromptParts", "compose_prompt", "example_source_line", "split_prompt",
           "seen_prompts", "withhold_examples"]

RULES_HEADER = "Rules learned from past mistakes:"
EXAMPLES_HEADER = "Worked examples (input, then the correct output):"
_EXAMPLE_SEP = "\n---\n"
_SOURCE = re.compile(r"^Example from another conversation \((?P<conversation>[^\n]*)\):\n")


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


def example_source_line(conversation_id: str) -> str:
    """The first line of a worked example cut from ``conversation_id`` (read back by :func:`withhold_examples`)."""
    return f"Example from another conversation ({conversation_id}):"


def withhold_examples(text: str, conversation_id: str | None) -> str:
    """``text`` without the worked examples cut from ``conversation_id``: the prompt a run of that
    conversation must see.

    An example carries its question's gold answer. Scored on the conversation it came from, a demo
    set is scored on answers it was handed (a 1.5B model copies them), so a candidate could win its
    minibatch and validation there and lose on every other conversation. Withheld, a demo set can
    only win on conversations it did not come from — the held-out condition. DSPy's
    BootstrapFewShot likewise removes an example from its own demos. Text without such examples, or
    no conversation, comes back unchanged.

    >>> p = compose_prompt("Answer.", [], [example_source_line("c1") + "\\nInput: q\\nCorrect output: a", "Input: r"])
    >>> split_prompt(withhold_examples(p, "c1")).examples
    ('Input: r',)
    >>> withhold_examples(p, "c2") == p
    True
    """
    if not conversation_id or "\n\n" + EXAMPLES_HEADER not in text:
        return text
    parts = split_prompt(text)
    kept = tuple(e for e in parts.examples if (m := _SOURCE.match(e + "\n")) is None
                 or m.group("conversation") != conversation_id)
    return text if kept == parts.examples else PromptParts(parts.instruction, parts.rules, kept).render()


def seen_prompts(prompts: Mapping[str, str], conversation_id: str | None) -> dict[str, str]:
    """Each component's text as a run of ``conversation_id`` sees it (:func:`withhold_examples`)."""
    return {c: withhold_examples(text, conversation_id) for c, text in prompts.items()}
