"""One short rule per failure, in SIMBA's form — a proposal a small reflection model can make.

Asked to rewrite a whole prompt, a 1.5B model hands it back unchanged or restates it. Asked for
one sentence "If the step receives X, it should Y" about one failure it is shown (the step's
input, its output, the correct output, the error type and the reason), it usually says something
usable. Several samples are drawn, each asking for a different variant at temperature 0 — the
prompt varies, not the sampler, so every sample is cached and a resumed run proposes exactly the same
rules (a temperature-0.7 sample is not cached and differs on every run); a rule that restates an
existing rule or instruction line is dropped (:func:`is_restated`), so is one whose condition holds
for every input of the step (:func:`generic_condition`), and the rule list is edited by
small deltas (add one, drop the oldest past a cap), never rewritten whole.

A rule about *this* case's people cannot fire on another conversation, and the split is
conversation-disjoint, so such a rule can only pass a minibatch by luck: the 1.5B writes "If the step
receives a question about Tom's dietary preferences, …" although the template forbids it. Speaker names
of the record become "a person" (:func:`generalize_names`); a rule still naming another proper noun of
the case (a place, a pet) is dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from memtrace_opt.attribution.text import content_tokens
from memtrace_opt.lm.base import LMClient

__all__ = ["RULE_TEMPLATE", "RuleProposal", "extract_rule", "generalize_names", "generic_condition", "is_restated",
           "propose_rules", "update_rules"]

RULE_TEMPLATE = """A step "{component}" of an LLM memory system follows this instruction:
<<<
{instruction}
>>>

It made this mistake:
{record}

Write ONE short general rule that would have prevented this mistake, in the form:
If the step receives <kind of input>, it should <what to do>.
Do not name the specific people, places or facts of this case. Reply with the rule only.{variant}"""

_RULE = re.compile(r"\bif\b.{3,}?\b(?:should|must)\b.{3,}", re.I | re.S)


@dataclass(frozen=True)
class RuleProposal:
    """One sampled rule: the reply, the rule read from it (or ""), and why it was kept or dropped."""

    component: str
    rule: str
    kept: bool
    reason: str
    raw: str


def extract_rule(reply: str) -> str:
    """The first "If …, … should …" sentence of a reply (bullets, quotes and labels stripped), or ""."""
    for line in reply.replace("```", "").splitlines():
        line = re.sub(r"^\s*(?:[-*\u2022]|\d+[.)]|rule\s*:)\s*", "", line.strip(), flags=re.I).strip().strip('"')
        match = _RULE.search(line)
        if match:
            rule = match.group(0).strip()
            return rule if rule.endswith((".", "!")) else rule + "."
    return ""


def _words(text: str) -> frozenset[str]:
    return frozenset(re.findall(r"[a-z0-9]+", text.lower()))


def is_restated(rule: str, known: Sequence[str], threshold: float = 0.6) -> bool:
    """Whether ``rule`` says nearly what one of ``known`` (rules or instruction lines) says: Jaccard
    overlap of their words at least ``threshold``."""
    words = _words(rule)
    for line in known:
        other = _words(line)
        if words and other and len(words & other) / len(words | other) >= threshold:
            return True
    return False


_CONDITION = re.compile(r"\bif\b(?P<cond>.+?)(?:,|\bit (?:should|must)\b|\bshould\b|\bmust\b)", re.I | re.S)
#: Words every rule condition may use without picking out a kind of input.
_FILLER = ("step receives receive received input inputs",)


def generic_condition(rule: str, instruction: str) -> bool:
    """Whether the rule's condition holds for every input of the step: all its words come from the
    instruction's first line, which says what the step receives ("If the step receives a question
    about a long conversation, …" for a step that answers questions about a long conversation).
    Such a rule is an unconditional instruction in disguise, usually a restatement of the prompt;
    a condition that picks out a kind of input ("a question about dates") is not generic."""
    match = _CONDITION.search(rule)
    first = next((ln for ln in instruction.splitlines() if ln.strip()), "")
    if match is None or not first:
        return False
    condition = content_tokens(match.group("cond"), drop=_FILLER)
    return bool(condition) and condition <= content_tokens(first, drop=_FILLER)


_NAME = re.compile(r"\b([A-Z][a-z]+)(?:'s)?\b")
#: A capitalised word inside a sentence (after a lower-case word or a comma): a name, not an opener.
_MID_SENTENCE_NAME = re.compile(r"(?<=[a-z,;] )([A-Z][a-z]+)\b")
_SPEAKER = re.compile(r"(?:^|\]\s*|\n\s*)([A-Z][a-z]+):", re.M)
#: Capitalised words that are not a case's names (calendar words, the record's own labels).
_NOT_NAMES = frozenset(
    "If It The A An When Then Otherwise Always Never Do Use Answer Reply I Not Yes No Inputs Generated Outputs "
    "Feedback Correct Memories Question Monday Tuesday Wednesday Thursday Friday Saturday Sunday January "
    "February March April May June July August September October November December".split())


def generalize_names(rule: str, case_text: str, instruction: str) -> tuple[str, list[str]]:
    """``(rule with the case's speakers as "a person", the other case names it still holds)``.

    A name of the case is a speaker (a word opening a line of the record, ``Tom: …``) or a capitalised
    word the record uses inside a sentence ("moved to Leeds"); a rule word is one when the
    instruction does not use it too.
    """
    own = set(_NAME.findall(instruction))
    speakers = set(_SPEAKER.findall(case_text))
    in_case = speakers | set(_MID_SENTENCE_NAME.findall(case_text))
    names = [n for n in dict.fromkeys(_NAME.findall(rule)) if n in in_case and n not in own and n not in _NOT_NAMES]
    out = rule
    for name in names:
        if name in speakers:
            out = re.sub(rf"\b{name}'s\b", "a person's", out)
            out = re.sub(rf"\b{name}\b", "a person", out)
    return out, [n for n in names if n not in speakers]


def _render_record(record: Mapping[str, Any], max_chars: int = 1500) -> str:
    parts = []
    for key in ("Inputs", "Generated Outputs", "Feedback"):
        value = record.get(key)
        if isinstance(value, Mapping):
            value = "\n".join(f"  {k}: {v}" for k, v in value.items())
        parts.append(f"{key}:\n{value}")
    text = "\n".join(parts)
    return text if len(text) <= max_chars else text[: max_chars - 14] + " ...[truncated]"


def propose_rules(lm: LMClient, component: str, instruction: str, known: Sequence[str],
                  records: Sequence[Mapping[str, Any]], *, samples: int = 2, temperature: float = 0.0,
                  max_tokens: int = 80) -> list[RuleProposal]:
    """Up to ``samples`` rule samples per record; each kept rule is new against ``known`` and earlier samples."""
    out: list[RuleProposal] = []
    seen = list(known) + [ln for ln in instruction.splitlines() if ln.strip()]
    for record in records:
        shown = _render_record(record)
        for k in range(samples):
            variant = "" if k == 0 else f"\n(Give a different rule than the obvious one: variant {k + 1}.)"
            prompt = RULE_TEMPLATE.format(component=component, instruction=instruction, record=shown, variant=variant)
            reply = lm.chat([{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=temperature)
            rule, names = generalize_names(extract_rule(reply.text), shown, instruction)
            if not rule:
                out.append(RuleProposal(component, "", False, "no 'If …, should …' rule in the reply", reply.text[:400]))
            elif len(rule) > 240:
                out.append(RuleProposal(component, rule, False, "too long", reply.text[:400]))
            elif names:
                out.append(RuleProposal(component, rule, False, f"names this case's {', '.join(names)} "
                                        "(a rule must carry to other conversations)", reply.text[:400]))
            elif is_restated(rule, seen):
                out.append(RuleProposal(component, rule, False, "restates an existing rule", reply.text[:400]))
            elif generic_condition(rule, instruction):
                out.append(RuleProposal(component, rule, False, "its condition holds for every input of the step",
                                        reply.text[:400]))
            else:
                out.append(RuleProposal(component, rule, True, "new", reply.text[:400]))
                seen.append(rule)
    return out


def update_rules(rules: Sequence[str], new: Sequence[str], *, cap: int = 6) -> tuple[str, ...]:
    """The rule list after a delta: ``new`` appended, the oldest dropped past ``cap``."""
    merged = list(rules) + [r for r in new if r not in rules]
    return tuple(merged[-cap:]) if cap > 0 else ()
