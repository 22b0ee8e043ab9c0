"""Worked examples mined from the executable graph, per prompted operation.

A small reflection model cannot be trusted to rewrite a prompt, but the graph already holds what a
good prompt should show: the exact inputs an operation received and the output it should give.

- **Bootstrapped demos** (DSPy BootstrapFewShot's idea, per memory operation): for a training
  question answered correctly, every prompted op on the answer's lineage, with its own inputs and
  outputs — ingestion ops included, though they have no gold label of their own: the correct
  final answer vouches for them.
- **Repair demos**: for a blamed failure, the faulty op's inputs with the output it should have
  given. For a ResponseError that is the gold answer; for an ingestion fault it is the op's output
  with the evidence added, and only when counterfactual replay verified that this correction
  rescues the answer — or, for a compound failure, that it carried the evidence past the op to the
  next fault of the blame's ``chain``. A chain's ResponseError link gets its own demo: the answer op's
  inputs *with the evidence the fix delivered* put into its context, and the gold answer (its
  recorded inputs lack the evidence, and an example answering the gold from a context without it
  would teach guessing). Attributed mining gives a repair demo only to the blamed ops' prompts and
  none for blame no prompt can fix (a trim, vector retrieval, a wrong gold label); the
  unattributed ablation turns every failure into an answer-style demo and spreads them over every
  target prompt, as the reference's ablation spreads its feedback.

Long inputs (a whole conversation as context) are cut to the lines closest to the question and
gold answer, so a demo costs tens of tokens, and demos are chosen under a per-component token
budget (:func:`select_demos`).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any, Iterable, Literal, Mapping, Sequence

from memtrace_opt.attribution.blame import MEMORY_ERROR_TYPES, BlameSignal
from memtrace_opt.attribution.content import message_source, turn_of
from memtrace_opt.attribution.text import content_tokens
from memtrace_opt.graph import MemoryGraph
from memtrace_opt.graph.queries import lineage
from memtrace_opt.graph.prompt_parts import render_example
from memtrace_opt.systems.base import approx_tokens
from memtrace_opt.optimizers.cases import CaseTrace
from memtrace_opt.optimizers.feedback import render_value

__all__ = ["Demo", "DemoKind", "DemoPools", "mine_bootstrap_demos", "mine_repair_demos", "mine_unattributed_demos",
           "select_demos"]

DemoKind = Literal["bootstrap", "repair"]
#: Characters of one rendered input role (the question-nearest lines of a long context are kept).
INPUT_CHARS = 420
OUTPUT_CHARS = 300


@dataclass(frozen=True)
class Demo:
    """One worked example for one prompt component: the op's inputs and the output it should give."""

    component: str
    kind: DemoKind
    case_id: str
    op_name: str
    inputs: tuple[tuple[str, str], ...]
    output: str
    conversation: str = ""

    def render(self) -> str:
        """The example as prompt text (braces neutralised: some systems format their prompts).

        The first line names the conversation the example came from, so a run of that same
        conversation withholds it (:func:`memtrace_opt.graph.prompt_parts.withhold_examples`): a demo holds
        its question's gold answer, and a candidate scored on the questions its demos were cut from
        would be scored on answers it was handed.
        """
        return render_example(self.inputs, self.output, self.conversation).replace("{", "(").replace("}", ")")

    @property
    def tokens(self) -> int:
        return approx_tokens(self.render())


DemoPools = dict[str, list[Demo]]
"""Demos per prompt component."""


_SHOWN_NOTE = re.compile(r"\n\(\d+ of \d+ records shown[^)]*\)$")


def _render_inputs(graph: MemoryGraph, op_inputs: Mapping[str, Sequence[str]], focus: str,
                   evidence: Sequence[str] = (), added: Sequence[Mapping[str, Any]] = ()) -> tuple[tuple[str, str], ...]:
    """The op's inputs by role, the question last (next to the output), previous versions dropped; a long
    record list cut to its evidence records (when ``evidence`` names turns the records come from) or else
    to the lines nearest the question and gold, without the "N of M shown" note. ``added`` records are put
    first into every record-list input (the evidence a counterfactual fix delivered to a context)."""
    out = []
    turns = {t for t in (turn_of(e) for e in evidence) if t}
    for role, ids in op_inputs.items():
        if role.startswith("_"):
            continue
        values = [graph.variables[v].value for v in ids if v in graph.variables]
        value = values[0] if len(values) == 1 else values
        if added and isinstance(value, list) and all(isinstance(r, Mapping) for r in value):
            value = [*added, *value]
        value = _evidence_records(value, turns) or _relevant_records(value, focus, graph.meta.get("speakers") or ())
        text = _SHOWN_NOTE.sub("", render_value(value, max_chars=INPUT_CHARS, focus=focus))
        out.append((role, f"\n{text}" if "\n" in text else text))
    return tuple(sorted(out, key=lambda kv: (kv[0] == "question", -len(kv[1]))))


def _evidence_records(value: Any, turns: set[str]) -> list[Any] | None:
    """The records of a list that came from one of ``turns`` (``turn_id``/``turn_ids``), or None when there are
    none or the records name no source. A repair demo must show the evidence its gold answer rests on: the
    lines that merely share the gold's words ("last week", a date) are often another event's."""
    if not turns or not (isinstance(value, list) and value and all(isinstance(r, Mapping) for r in value)):
        return None
    kept = [r for r in value if r.get("turn_id") in turns or turns & set(r.get("turn_ids") or ())]
    return kept or None


def _relevant_records(value: Any, focus: str, speakers: Sequence[str] = ()) -> Any:
    """A record list cut to the records sharing a content word (not a speaker's name) with the question or
    gold (all of them when none does): unrelated chatter in an example is noise the small model copies."""
    if not (isinstance(value, list) and value and all(isinstance(r, Mapping) and "text" in r for r in value)):
        return value
    wanted = content_tokens(focus, drop=speakers)
    related = [r for r in value if content_tokens(str(r.get("text", ""))) & wanted]
    return related or value


def _render_output(value: Any) -> str:
    if isinstance(value, Mapping) and len(value) == 1:
        value = next(iter(value.values()))
    return render_value(value, max_chars=OUTPUT_CHARS)


def _prompted_ops(graph: MemoryGraph, answer_var: str) -> list[str]:
    """Prompted ops on the answer's lineage plus the answer op itself, in execution order."""
    ops = lineage(graph, answer_var, kind="operation")
    producer = graph.producer.get(answer_var)
    if producer:
        ops = set(ops) | {producer}
    return sorted((o for o in ops if graph.ops[o].prompt is not None), key=lambda o: graph.ops[o].time)


def _focus(trace: CaseTrace) -> str:
    return f"{trace.question} {trace.gold}"


def _overlap(text: str, focus: str) -> int:
    words = {w for w in focus.lower().split() if len(w) > 2}
    return len(words & set(text.lower().split()))


def mine_bootstrap_demos(traces: Iterable[CaseTrace]) -> DemoPools:
    """One demo per (correct trace, prompt component): the component's op on the answer's lineage whose
    inputs share most words with the question and gold answer (the op that handled the evidence)."""
    pools: DemoPools = {}
    for t in traces:
        if t.failed or f"answer:{t.case.qa_id}" not in t.graph.latest:
            continue
        graph, focus = t.graph, _focus(t)
        best: dict[str, tuple[int, Demo]] = {}
        for op_id in _prompted_ops(graph, graph.latest_id(f"answer:{t.case.qa_id}")):
            op = graph.ops[op_id]
            if op.status != "ok" or op.prompt is None:
                continue
            inputs = _render_inputs(graph, op.inputs, focus)
            outputs = {r: graph.variables[v].value for r, v in op.outputs.items() if v in graph.variables}
            demo = Demo(op.prompt.component, "bootstrap", t.case.qa_id, op.name, inputs, _render_output(outputs),
                        t.case.conversation_id)
            score = _overlap(" ".join(text for _, text in inputs), focus)
            if op.prompt.component not in best or score > best[op.prompt.component][0]:
                best[op.prompt.component] = (score, demo)
        for component, (_, demo) in best.items():
            pools.setdefault(component, []).append(demo)
    return pools


def _evidence_values(graph: MemoryGraph, blame: BlameSignal) -> list[tuple[str, Any]]:
    """``(ref, value)`` of each evidence message of the blame present in ``graph``."""
    out = []
    for ref in blame.evidence:
        var = graph.variables.get(ref) or (graph.variables.get(graph.latest_id(ref)) if ref in graph.latest else None)
        if var is not None:
            out.append((ref, var.value))
    return out


def _evidence_text(graph: MemoryGraph, blame: BlameSignal) -> str:
    texts = [value.get("text", "") if isinstance(value, Mapping) else str(value)
             for _, value in _evidence_values(graph, blame)]
    return "\n".join(t for t in texts if t)


def _evidence_records_of(graph: MemoryGraph, blame: BlameSignal) -> list[dict[str, Any]]:
    """The blame's evidence messages as context records (text with its speaker, date, source turn)."""
    out = []
    for ref, value in _evidence_values(graph, blame):
        src = message_source(ref, value)
        if src.get("text"):
            speaker = f"{src['speaker']}: " if src.get("speaker") else ""
            out.append({"text": f"{speaker}{src['text']}", "date": src.get("date", ""), "turn_id": src.get("turn_id", "")})
    return out


def _chain_repairs(t: CaseTrace, blame: BlameSignal) -> list[Demo]:
    """Demos for a compound failure's ResponseError links: the answer op's inputs with the evidence the
    upstream fix delivered, and the gold answer (none when the evidence cannot be shown)."""
    graph, out = t.graph, []
    added = _evidence_records_of(graph, blame) if blame.chain else []
    if not added:
        return out
    for link in blame.chain:
        op = graph.ops.get(link.op_id or "")
        if link.error_type != "ResponseError" or op is None or op.prompt is None or not link.prompt_component:
            continue
        out.append(Demo(op.prompt.component, "repair", t.case.qa_id, op.name,
                        _render_inputs(graph, op.inputs, _focus(t), blame.evidence, added), t.gold,
                        t.case.conversation_id))
    return out


def _repair(t: CaseTrace, blame: BlameSignal) -> Demo | None:
    """The blamed op's demo with its corrected output, or None when no verified correction exists."""
    graph = t.graph
    op = graph.ops.get(blame.op_id or "")
    if op is None or op.prompt is None or blame.error_type not in MEMORY_ERROR_TYPES:
        return None
    if blame.error_type == "ResponseError":
        corrected = t.gold
    elif blame.counterfactual_rescued is True or blame.chain:
        from memtrace_opt.attribution.counterfactual import inject_text

        evidence = _evidence_text(graph, blame)
        outputs = {r: graph.variables[v].value for r, v in op.outputs.items() if v in graph.variables}
        if not evidence or len(outputs) != 1:
            return None
        corrected = _render_output(inject_text(next(iter(outputs.values())), evidence))
    else:
        return None
    return Demo(op.prompt.component, "repair", t.case.qa_id, op.name,
                _render_inputs(graph, op.inputs, _focus(t), blame.evidence), corrected, t.case.conversation_id)


def mine_repair_demos(traces: Iterable[CaseTrace]) -> DemoPools:
    """Attributed repair demos: each blamed failure's corrected op output, for the blamed component only
    (and, for a compound failure, its chain's answer op)."""
    pools: DemoPools = {}
    for t in traces:
        if t.failed and t.blame is not None:
            demo = _repair(t, t.blame)
            for d in ([demo] if demo is not None else []) + _chain_repairs(t, t.blame):
                pools.setdefault(d.component, []).append(d)
    return pools


def mine_unattributed_demos(traces: Iterable[CaseTrace], components: Sequence[str]) -> DemoPools:
    """The ablation: every failure as an answer-style demo (question and retrieved context → gold), with
    no blame to say where it belongs, dealt round-robin over ``components``."""
    pools: DemoPools = {c: [] for c in components}
    if not components:
        return pools
    failed = [t for t in traces if t.failed and f"answer:{t.case.qa_id}" in t.graph.latest]
    for i, t in enumerate(failed):
        graph = t.graph
        op = graph.ops.get(graph.producer.get(graph.latest_id(f"answer:{t.case.qa_id}"), ""))
        if op is None:
            continue
        component = components[i % len(components)]
        pools[component].append(Demo(component, "repair", t.case.qa_id, op.name,
                                     _render_inputs(graph, op.inputs, _focus(t)), t.gold, t.case.conversation_id))
    return pools


def merge_pools(*pools: Mapping[str, Sequence[Demo]]) -> DemoPools:
    """Pools joined per component, duplicates (same case, kind and op) dropped, order kept."""
    out: DemoPools = {}
    for pool in pools:
        for component, demos in pool.items():
            seen = {(d.case_id, d.kind, d.op_name) for d in out.get(component, [])}
            for d in demos:
                if (d.case_id, d.kind, d.op_name) not in seen:
                    out.setdefault(component, []).append(d)
                    seen.add((d.case_id, d.kind, d.op_name))
    return out


def select_demos(pool: Sequence[Demo], *, budget_tokens: int, max_demos: int, rng: random.Random) -> list[Demo]:
    """A random subset of ``pool`` within ``budget_tokens``, repair demos and bootstrapped ones taken in
    turn (each kind shuffled), so every subset holds both what goes wrong and what goes right."""
    by_kind = {k: [d for d in pool if d.kind == k] for k in ("repair", "bootstrap")}
    for demos in by_kind.values():
        rng.shuffle(demos)
    order: list[Demo] = []
    while any(by_kind.values()):
        for kind in ("repair", "bootstrap"):
            if by_kind[kind]:
                order.append(by_kind[kind].pop())
    chosen: list[Demo] = []
    used = 0
    for demo in order:
        if len(chosen) >= max_demos:
            break
        if used + demo.tokens <= budget_tokens:
            chosen.append(demo)
            used += demo.tokens
    return chosen
