"""GEPA proposer of small deltas: a new set of worked examples, one new rule, or one line fewer —
never a whole rewrite.

GEPA calls the proposer with the parent candidate and the reflective records of a minibatch; this
one edits each requested component by one delta, cycling through the kinds (``deltas``, in order)
so GEPA's minibatch acceptance and Pareto front choose among them:

- **demos**: a subset of the component's demo pool (:mod:`.demos`: bootstrapped from correct
  answers, repaired from blamed failures) within the token budget, replacing the parent's examples —
  the first time for a component, the set that best covers the round's failures charged to it
  (:mod:`.demo_coverage`, with ``demo_selection="coverage"``), afterwards a fresh random subset;
- **rule**: one SIMBA-style rule proposed from the minibatch's records for this component
  (:mod:`.rules`), added to the parent's rule list; the parent's examples are kept;
- **line**: the instruction line blamed for the minibatch's failures (:mod:`.line_blame`) removed;
  rules and examples kept. A line already tried against the same instruction is not tried again.

A kind that cannot be made (no pool, no record, nothing droppable) passes to the next in the cycle;
a component with none left is left alone. Every step is logged as a
:class:`~memtrace_opt.optimizers.proposer.Proposal` (mode ``demos`` or ``rule``), so
``optimizer.json`` shows what was tried and why it was or was not used.
"""

from __future__ import annotations

import random
from typing import Any, Mapping, Sequence

from memtrace_opt.lm.base import LMClient
from memtrace_opt.optimizers.demo_coverage import select_covering_demos
from memtrace_opt.optimizers.demos import Demo, select_demos
from memtrace_opt.optimizers.line_blame import blame_line, drop_line
from memtrace_opt.graph.prompt_parts import PromptParts, split_prompt
from memtrace_opt.optimizers.proposer import ComponentProposer, Proposal
from memtrace_opt.optimizers.rules import propose_rules, update_rules

__all__ = ["DELTA_KINDS", "DeltaProposer"]

#: The delta kinds, in the default cycle order.
DELTA_KINDS = ("demos", "rules", "lines")


class DeltaProposer(ComponentProposer):
    """GEPA ``custom_candidate_proposer`` editing prompts by demo-set and rule deltas (see module docstring)."""

    def __init__(self, pools: Mapping[str, Sequence[Demo]], lm: LMClient | None, *, budget_tokens: int = 400,
                 max_demos: int = 4, rule_samples: int = 2, rule_records: int = 2, seed: int = 0,
                 kinds: Sequence[str] = DELTA_KINDS, failure_outputs: Mapping[str, Sequence[str]] | None = None,
                 failure_cases: Mapping[str, Sequence[tuple[str, str]]] | None = None,
                 demo_selection: str = "random") -> None:
        super().__init__()
        unknown = [k for k in kinds if k not in DELTA_KINDS]
        if unknown or not kinds:
            raise ValueError(f"delta kinds must be a non-empty subset of {DELTA_KINDS}, got {list(kinds)}")
        self.kinds = tuple(kinds)
        #: Per component, the wrong outputs of every failure of the round charged to it (line evidence).
        self.failure_outputs = {c: list(o) for c, o in (failure_outputs or {}).items()}
        if demo_selection not in ("coverage", "random"):
            raise ValueError(f"demo_selection must be coverage or random, got {demo_selection!r}")
        #: Per component, ``(question, expected answer)`` of the round's failures charged to it: what a
        #: covering demo set is fitted to.
        self.failure_cases = {c: list(v) for c, v in (failure_cases or {}).items()}
        self.demo_selection = demo_selection
        self._covered: set[str] = set()
        self.pools = {c: list(p) for c, p in pools.items()}
        self.lm = lm
        self.budget_tokens = budget_tokens
        self.max_demos = max_demos
        self.rule_samples = rule_samples
        self.rule_records = rule_records
        self.rng = random.Random(seed)
        self.steps = 0
        self.rules_log: list[dict[str, Any]] = []
        self.lines_log: list[dict[str, Any]] = []
        self._tried_lines: set[tuple[str, str, str]] = set()

    def begin_step(self) -> None:
        self.steps += 1

    def propose(self, component: str, current: str, records: Sequence[Mapping[str, Any]]) -> Proposal:
        """One delta for ``component``: the kind this step's turn in the cycle names, or the next one that can be made."""
        parts = split_prompt(current)
        pool = self.pools.get(component) or []
        start = (self.steps - 1) % len(self.kinds)
        declined: list[Proposal] = []
        for kind in self.kinds[start:] + self.kinds[:start]:
            if kind == "demos" and pool:
                return self._demos(component, current, parts, pool, len(records))
            if kind == "rules" and records and self.lm is not None:
                return self._rule(component, current, parts, records)
            if kind == "lines" and records:
                proposal = self._line(component, parts, records)
                if proposal.accepted:
                    return proposal
                declined.append(proposal)
        if declined:
            return declined[0]
        return Proposal(component, False, "no demo pool and no record for a rule", "", "", len(records), "rule")

    def _demos(self, component: str, current: str, parts: PromptParts, pool: Sequence[Demo], n: int) -> Proposal:
        chosen, how = self._pick_demos(component, pool)
        new = PromptParts(parts.instruction, parts.rules, tuple(d.render() for d in chosen)).render()
        kinds = ", ".join(f"{d.kind}:{d.case_id}" for d in chosen) + (" covering the round's failures" if how else "")
        if not chosen:
            return Proposal(component, False, f"no demo fits the {self.budget_tokens}-token budget", "", "", n, "demos")
        if new == current:
            return Proposal(component, False, "same demos as the parent", "", kinds, n, "demos")
        return Proposal(component, True, f"{len(chosen)} demos ({kinds})", new, kinds, n, "demos")

    def _pick_demos(self, component: str, pool: Sequence[Demo]) -> tuple[list[Demo], bool]:
        """The covering set on the component's first demo step (``True``), a random subset afterwards."""
        targets = self.failure_cases.get(component) or []
        if self.demo_selection == "coverage" and component not in self._covered and targets:
            self._covered.add(component)
            chosen = select_covering_demos(pool, targets, budget_tokens=self.budget_tokens, max_demos=self.max_demos)
            if chosen:
                return chosen, True
        return select_demos(pool, budget_tokens=self.budget_tokens, max_demos=self.max_demos, rng=self.rng), False

    def _rule(self, component: str, current: str, parts: PromptParts, records: Sequence[Mapping[str, Any]]) -> Proposal:
        assert self.lm is not None
        picked = self.rng.sample(list(records), min(self.rule_records, len(records)))
        samples = propose_rules(self.lm, component, parts.instruction, parts.rules, picked, samples=self.rule_samples)
        self.rules_log.extend({"component": s.component, "rule": s.rule, "kept": s.kept, "reason": s.reason}
                              for s in samples)
        kept = [s.rule for s in samples if s.kept]
        raw = " | ".join(s.raw for s in samples)[:2000]
        if not kept:
            reasons = sorted({s.reason for s in samples})
            return Proposal(component, False, f"no new rule ({'; '.join(reasons)})", "", raw, len(records), "rule")
        new = PromptParts(parts.instruction, update_rules(parts.rules, kept[:1]), parts.examples).render()
        return Proposal(component, True, f"rule added: {kept[0]}", new, raw, len(records), "rule")

    def _line(self, component: str, parts: PromptParts, records: Sequence[Mapping[str, Any]]) -> Proposal:
        """The instruction without the line blamed for ``records`` (quoted by an output, else named by the LM)."""
        shuffled = self.rng.sample(list(records), len(records))
        tried = {text for c, instruction, text in self._tried_lines if c == component and instruction == parts.instruction}
        blame = blame_line(self.lm, component, parts.instruction, shuffled, skip=tried, max_records=self.rule_records,
                           round_outputs=self.failure_outputs.get(component, ()))
        if blame is None:
            return Proposal(component, False, "no untried droppable instruction line blamed", "", "", len(records),
                            "line")
        self._tried_lines.add((component, parts.instruction, blame.text))
        self.lines_log.append({"component": component, **blame.to_dict()})
        new = PromptParts(drop_line(parts.instruction, blame.line), parts.rules, parts.examples).render()
        return Proposal(component, True, f"line {blame.line} dropped ({blame.how}): {blame.text}", new, blame.raw,
                        len(records), "line")
