"""The reflection step: ask the reflection LM for a better prompt, and read its reply defensively.

GEPA's default proposer expects the new text between ``` fences; a small local model also answers
with JSON, with a "New instruction:" label, with the fence never closed, or with something that is
not an instruction at all. :class:`ReflectionProposer` (passed to GEPA as
``custom_candidate_proposer``) renders the records with GEPA's own markdown renderer and a template
written for small models, extracts the text in every form above, and rejects replies that would
break the system — empty, truncated, unchanged, or dropping a ``{placeholder}`` the system fills in
at call time. When the rewrite is unusable (small models often hand the instruction back
unchanged), it asks once more, for a few rules to append. A rejected reply leaves the component
unchanged and is logged, never raised.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping, Sequence

from gepa.strategies.instruction_proposal import InstructionProposalSignature

from memtrace_opt.lm.base import LMClient

__all__ = ["REFLECTION_TEMPLATE", "RULES_TEMPLATE", "ComponentProposer", "Proposal", "ReflectionProposer", "extract_instruction",
           "extract_rules", "validate_instruction"]

REFLECTION_TEMPLATE = """You improve the instruction (prompt) used by one step, "<component>", of an LLM memory system.

Current instruction:
```
<curr_param>
```

Below are cases where this step contributed to a wrong final answer: the step's inputs, what it produced, and feedback saying what went wrong.

<side_info>

Write an improved version of the instruction that prevents these failures in general. Do not mention the specific people, places or facts of these cases. Keep every requirement of the current instruction that still applies, including its output format and any {placeholders} written in curly braces.
Reply with the complete new instruction only, between ``` fences."""

RULES_TEMPLATE = """A step, "<component>", of an LLM memory system follows this instruction:
```
<curr_param>
```

It made the mistakes below: the step's inputs, what it produced, and feedback saying what went wrong.

<side_info>

Write 1 to 3 short new rules that, added to the instruction, would prevent these mistakes in general. Do not mention the specific people, places or facts of these cases. Reply with the rules only, one per line, each starting with "- "."""

_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)
_LABEL = re.compile(r"^\s*(?:\*\*)?(?:new|improved|updated|revised)?\s*(?:instruction|prompt)s?\s*:(?:\*\*)?\s*", re.I)
_PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")


def extract_instruction(reply: str) -> str:
    """The instruction in a reflection reply: JSON ``new_instruction``, the longest fenced block,
    an unclosed fence's remainder, or the labelled/quoted plain text, in that order."""
    text = reply.strip()
    for blob in re.findall(r"\{.*\}", text, re.DOTALL):
        try:
            data = json.loads(blob)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("new_instruction"), str):
            return data["new_instruction"].strip()
    blocks = [b.strip() for b in _FENCE.findall(text) if b.strip()]
    if blocks:
        return max(blocks, key=len)
    if "```" in text:
        head, _, tail = text.partition("```")
        tail = re.sub(r"^[^\n]*\n", "", tail, count=1) if "\n" in tail else tail
        text = tail.strip() or head.strip()
    text = _LABEL.sub("", text).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text


def extract_rules(reply: str, current: str, limit: int = 3) -> list[str]:
    """New rules from a rules reply: bulleted or numbered lines (or the only lines), minus ones the
    instruction (or an earlier rule) already states in nearly the same words."""
    lines = [ln.strip() for ln in reply.replace("```", "").splitlines() if ln.strip()]
    bullets = [re.sub(r"^(?:[-*\u2022]|\d+[.)])\s*", "", ln) for ln in lines if re.match(r"^(?:[-*\u2022]|\d+[.)])\s", ln)]
    rules = bullets or (lines if len(lines) <= limit else [])
    known = [_words(line) for line in current.splitlines() if line.strip()]
    out: list[str] = []
    for rule in rules:
        rule = rule.strip().strip('"').strip()
        words = _words(rule)
        if 8 <= len(rule) <= 300 and not any(_similar(words, k) for k in known):
            out.append(rule)
            known.append(words)
    return out[:limit]


def _words(text: str) -> frozenset[str]:
    return frozenset(re.findall(r"[a-z0-9]+", text.lower()))


def _similar(a: frozenset[str], b: frozenset[str]) -> bool:
    """Near-duplicate lines (a restated rule adds nothing): Jaccard overlap of their words >= 0.6."""
    return bool(a) and len(a & b) / len(a | b) >= 0.6


def validate_instruction(new: str, old: str) -> str | None:
    """Why ``new`` cannot replace ``old`` (None when it can)."""
    if not new.strip():
        return "empty reply"
    if " ".join(new.split()) == " ".join(old.split()):
        return "unchanged"
    if "<curr_param>" in new or "<side_info>" in new:
        return "reply echoes the reflection template"
    if len(new) < max(20, len(old) // 4):
        return f"too short ({len(new)} characters for a {len(old)}-character prompt)"
    if len(new) > 3 * len(old) + 1500:
        return f"too long ({len(new)} characters for a {len(old)}-character prompt)"
    missing = sorted(set(_PLACEHOLDER.findall(old)) - set(_PLACEHOLDER.findall(new)))
    if missing:
        return f"drops placeholders {missing}"
    return None


@dataclass(frozen=True)
class Proposal:
    """One reflection call: what was asked for, what came back, and whether it was used."""

    component: str
    accepted: bool
    reason: str
    new_text: str
    raw: str
    records: int
    mode: str = "rewrite"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ComponentProposer:
    """The GEPA ``custom_candidate_proposer`` skeleton every proposer here shares: one :meth:`propose`
    per requested component, every proposal logged, the first exception kept in ``error`` (GEPA
    isolates proposer errors; run_gepa re-raises it) and re-raised. Subclasses implement
    :meth:`propose` and may narrow the records (:meth:`records_for`) or count steps (:meth:`begin_step`)."""

    def __init__(self) -> None:
        self.log: list[Proposal] = []
        self.error: BaseException | None = None
        #: Told of each proposal as it is made (the loop prints it: a GEPA round is otherwise silent for minutes).
        self.on_proposal: Callable[[Proposal], None] | None = None

    def begin_step(self) -> None:
        """Called once per GEPA proposal step, before its components."""

    def records_for(self, records: list[Mapping[str, Any]]) -> list[Mapping[str, Any]] | None:
        """The records one component's proposal sees; None skips the component."""
        return records

    def propose(self, component: str, current: str, records: Sequence[Mapping[str, Any]]) -> Proposal:
        raise NotImplementedError

    def __call__(self, candidate: dict[str, str], reflective_dataset: Mapping[str, Sequence[Mapping[str, Any]]],
                 components_to_update: list[str]) -> dict[str, str]:
        self.begin_step()
        new_texts: dict[str, str] = {}
        for name in components_to_update:
            records = self.records_for(list(reflective_dataset.get(name) or ()))
            if records is None:
                continue
            try:
                proposal = self.propose(name, candidate[name], records)
            except Exception as err:
                self.error = err
                raise
            self.log.append(proposal)
            if self.on_proposal is not None:
                self.on_proposal(proposal)
            if proposal.accepted:
                new_texts[name] = proposal.new_text
        return new_texts


class ReflectionProposer(ComponentProposer):
    """GEPA ``custom_candidate_proposer``: one reflection LM call per component that has records.

    ``max_tokens`` None leaves the reply length to the client (a factory-built reflection client
    applies ``models.reflection.max_tokens``). At most ``max_records`` records are shown per call.
    """

    def __init__(self, lm: LMClient, *, template: str = REFLECTION_TEMPLATE, rules_template: str = RULES_TEMPLATE,
                 max_tokens: int | None = None, max_records: int = 6) -> None:
        super().__init__()
        self.lm = lm
        self.template = template
        self.rules_template = rules_template
        self.max_tokens = max_tokens
        self.max_records = max_records

    def records_for(self, records: list[Mapping[str, Any]]) -> list[Mapping[str, Any]] | None:
        return records[: self.max_records] or None

    def propose(self, component: str, current: str, records: Sequence[Mapping[str, Any]]) -> Proposal:
        """Ask for a rewrite of ``current`` given ``records``; if the reply is unusable, ask for rules to add.

        Small models often hand the instruction back unchanged; asking them for a few new rules
        instead gets an edit out of them (``mode="rules"``: the rules are appended as bullets).
        """
        reply = self._ask(self.template, component, current, records)
        if reply.finish_reason == "length":
            return Proposal(component, False, "reply cut off at max_tokens", "", reply.text[:2000], len(records))
        new = extract_instruction(reply.text)
        problem = validate_instruction(new, current)
        if problem is None:
            return Proposal(component, True, "ok", new, reply.text[:2000], len(records))
        rules_reply = self._ask(self.rules_template, component, current, records)
        rules = extract_rules(rules_reply.text, current)
        new = current.rstrip() + "\n" + "\n".join(f"- {r}" for r in rules) if rules else ""
        second = validate_instruction(new, current) if rules else "no usable rule in the reply"
        reason = f"rewrite rejected ({problem}); " + (f"rules rejected ({second})" if second else "rules added")
        return Proposal(component, second is None, reason, new if second is None else "",
                        rules_reply.text[:2000], len(records), "rules")

    def _ask(self, template: str, component: str, current: str, records: Sequence[Mapping[str, Any]]) -> Any:
        prompt = InstructionProposalSignature.prompt_renderer({
            "current_instruction_doc": current,
            "dataset_with_feedback": list(records),
            "prompt_template": template.replace("<component>", component),
        })
        options = {} if self.max_tokens is None else {"max_tokens": self.max_tokens}
        return self.lm.chat([{"role": "user", "content": str(prompt)}], **options)
