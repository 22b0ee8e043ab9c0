"""A prompt component as three editable parts: the instruction, learned rules, worked examples.

Small models improve prompts best by small deltas (add a rule, swap an example), not by whole
rewrites. The candidate GEPA sees stays ``{component: text}``; this module renders the three
parts into that text under fixed headers and reads them back, so a later round edits the rules
and examples of the text an earlier round produced, and the report's prompt diff shows exactly
which rule or example was added. It lives with the graph because the tracer applies it: an op of a
conversation sees its prompt with that conversation's own worked examples withheld (:func:`seen_prompts`).

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

__all__ = ["EXAMPLES_HEADER", "RULES_HEADER", "PromptParts", "WorkedExample", "compose_prompt", "example_source_line",
           "parse_example", "render_example", "split_prompt", "seen_prompts", "withhold_examples"]

RULES_HEADER = "Rules learned from past mistakes:"
EXAMPLES_HEADER = "Worked examples (input, then the correct output):"
_EXAMPLE_SEP = "\n---\n"
_SOURCE = re.compile(r"^Example from another conversation \((?P<conversation>[^\n]*)\):\n")
_INPUT_ROLE = re.compile(r"^(?P<role>[a-z_][a-z0-9_]*):(?: (?P<text>.*))?$")
_INPUT = "Input:"
_OUTPUT = "Correct output:"


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


@dataclass(frozen=True)
class WorkedExample:
    """One worked example read back: the op's inputs by role, the output it should give, its source."""

    inputs: dict[str, str]
    output: str
    conversation: str = ""


def render_example(inputs: Sequence[tuple[str, str]], output: str, conversation: str = "") -> str:
    """A worked example as prompt text: an optional source line, ``Input:``, one ``role: text`` entry per
    input (a value starting with a newline starts on the next line), then ``Correct output:``.
    :func:`parse_example` reads it back."""
    lines = [example_source_line(conversation)] if conversation else []
    lines += [_INPUT] + [f"{role}:{'' if text.startswith(chr(10)) else ' '}{text}" for role, text in inputs]
    lines.append(f"{_OUTPUT} {output}")
    return "\n".join(lines)


def parse_example(text: str) -> WorkedExample | None:
    r"""A worked example written by :func:`render_example`, or None for text of another shape (a
    hand-written example stays prompt text) or with a role given twice.

    An op reads its examples back to lay them out as it sees fit: the answer op shows them as prior
    chat turns, the layout DSPy's adapters use, because a 1.5B model copies inline examples' content.

    >>> ex = parse_example(render_example([("context", "\n- a\n- b"), ("question", "q?")], "a", "c1"))
    >>> ex.inputs, ex.output, ex.conversation
    ({'context': '- a\n- b', 'question': 'q?'}, 'a', 'c1')
    >>> parse_example("Q: q? A: a") is None
    True
    """
    m = _SOURCE.match(text + "\n")
    body = text[m.end():] if m else text
    head, sep, output = body.rpartition("\n" + _OUTPUT)
    if not sep or not head.startswith(_INPUT + "\n"):
        return None
    inputs: dict[str, list[str]] = {}
    role = None
    for line in head[len(_INPUT) + 1:].splitlines():
        found = _INPUT_ROLE.match(line)
        if found:
            role = found.group("role")
            if role in inputs:
                return None
            inputs[role] = [found.group("text") or ""]
        elif role is None:
            return None
        else:
            inputs[role].append(line)
    return WorkedExample({r: "\n".join(v).strip() for r, v in inputs.items()}, output.strip(),
                         m.group("conversation") if m else "")


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
