"""Iterative subgraph tracing: the earliest decisive faulty operation of a failed answer.

For every fact the answer needs (one per evidence message), the fact's fate is decided by
deterministic content checks, stage by stage, as the reference taxonomy defines them:

(a) no memory unit ever held it                 → ExtractionError at the op that lost it
(b) a unit held it, a later update degraded it  → UpdateError at that update
(c) a unit holding it was deleted (or emptied)  → DeletionError at that op
(d) a live unit holds it, the context lacks it  → RetrievalError at the retrieval op that dropped it —
    unless the copy of the unit that retrieval reads (an index entry written from it) lacks it: then
    the fact never entered the searchable memory → ExtractionError at the op that wrote that copy
(e) the context holds every fact                → ResponseError at the answer op

Before any of this, two non-memory verdicts: an ``audit_wrong_gold`` case is an AnnotationError when
the wrong gold is what failed it (the prediction matches the audit's corrected answer, or there is
none to check) — a prediction wrong against both is traced, against the corrected answer, like any
other — and a failed answer that a stricter second judgement accepts (:func:`judged_wrongly`) is a
JudgeError of the judge op; neither names a prompt, so neither reaches the optimizer. Where the audit
corrects a question's evidence citation, the corrected turns are the evidence traced.

Facts that fail give candidates; the earliest in execution order is the blame (later faults are
"fixed" by the definition of decisiveness). An update that replaces a fact with a *later* evidence
fact is a legitimate update, not a degradation.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from memtrace_opt.attribution.answer_match import carries_gold, names_part_of_gold
from memtrace_opt.attribution.blame import MEMORY_ERROR_TYPES, BlameSignal
from memtrace_opt.attribution.content import ContentJudge, Fact, Holding, TokenJudge, make_fact, message_source
from memtrace_opt.attribution.cost import CostMeter, MeteredLM
from memtrace_opt.attribution.evidence import EmbedFn, default_embed, starting_points
from memtrace_opt.attribution.failures import FailureCase
from memtrace_opt.attribution.priors import prior_for
from memtrace_opt.attribution.text import content_tokens, short, value_text
from memtrace_opt.attribution.view import answer_ops, live_units, unit_chain
from memtrace_opt.attribution.walk import Walk, forward_walk
from memtrace_opt.eval.judge import DeterministicJudge, is_abstention
from memtrace_opt.graph.model import DELETION, EXTRACTION, JUDGE, MEMORY_UNIT, QA, QUERY, RETRIEVED, MemoryGraph, Operation, split_var_id

__all__ = ["Candidate", "TraceResult", "TracingAttributor", "blame_from", "dedup_candidates", "necessary_facts"]


@dataclass(frozen=True)
class Candidate:
    """A possible earliest decisive fault, with what a counterfactual fix of it would be (``fix``)."""

    error_type: str
    op_id: str | None
    time: int
    reason: str
    fact_id: str | None = None
    fix: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class TraceResult:
    """Candidates (earliest first), the facts traced and how much of the graph was opened."""

    candidates: list[Candidate]
    facts: list[str]
    evidence_source: str
    visited_ops: int = 0
    truncated: int = 0


def _annotation_verdict(case: FailureCase) -> Candidate | None:
    """An AnnotationError when the wrong gold is what made the answer fail: the audit gives no corrected
    answer (nothing to check against), or the prediction matches the corrected one. A prediction that is
    wrong against both (an abstention, another fact) has a pipeline cause: None, trace it."""
    why = f"the dataset audit flags the gold answer {case.gold!r} as wrong"
    if not case.corrected_answer:
        return Candidate("AnnotationError", None, 0, why)
    verdict = _STRICT.judge(case.question, case.corrected_answer, case.prediction)
    if verdict.score == 1:
        return Candidate("AnnotationError", None, 0, f"{why}; the answer matches the corrected "
                                                    f"{case.corrected_answer!r}")
    return None


@dataclass
class TracingAttributor:
    """The main attribution method. ``evidence``: annotated, pseudo, or auto (annotated when present)."""

    judge: ContentJudge = field(default_factory=lambda: TokenJudge(miss_below=TokenJudge.hold_at))
    evidence: str = "auto"
    embed: EmbedFn | None = default_embed
    max_frontier: int = 16
    pseudo_top: int = 8
    meters: list[MeteredLM] = field(default_factory=list)
    name: str = "tracing"

    def attribute(self, graph: MemoryGraph, case: FailureCase) -> BlameSignal:
        meter = CostMeter(self.meters).start()
        result = self.trace(graph, case)
        top = result.candidates[0]
        return blame_from(graph, case, top, method=self.name, evidence=tuple(result.facts), confidence=0.7,
                          cost=meter.cost())

    def trace(self, graph: MemoryGraph, case: FailureCase) -> TraceResult:
        """All candidates for ``case``, earliest decisive first (never empty)."""
        if "audit_wrong_gold" in case.flags:
            annotation = _annotation_verdict(case)
            if annotation is not None:
                return TraceResult([annotation], [], "audit")
            case = replace(case, gold=str(case.corrected_answer))  # wrong either way: trace the corrected answer
        misjudged = judged_wrongly(case)
        if misjudged:
            return TraceResult([_judge_error(graph, case, misjudged)], [], "judge")
        result = self._trace_system(graph, case)
        partial = _partly_right(case) if result.candidates[0].error_type == "ResponseError" else None
        if partial:  # the context held it all and the answer named part of it: right by a generous judge
            return replace(result, candidates=[_judge_error(graph, case, partial), *result.candidates])
        return result

    def _trace_system(self, graph: MemoryGraph, case: FailureCase) -> TraceResult:
        """The candidates inside the memory system (the judge already found right to reject the answer)."""
        if "unanswerable" in case.flags or is_abstention(case.gold):
            return TraceResult([self._hallucination(graph, case)], [], "abstention")
        starts, source = starting_points(graph, case, mode=self.evidence, top=self.pseudo_top, embed=self.embed)
        speakers = tuple(graph.meta.get("speakers") or ())
        facts = [make_fact(s, graph.value(s), case.question, case.gold, speakers=speakers) for s in starts]
        if not facts:
            return TraceResult([self._no_evidence(graph, case)], [], source)
        stage = _Stages(graph, case, self.judge)
        walks = [self._walk(graph, case, f) for f in facts]
        fates = {f.id: c for i, (f, w) in enumerate(zip(facts, walks)) if (c := stage.fate(w, facts[i + 1:]))}
        needed = necessary_facts(facts, case)
        first = sorted((c for fid, c in fates.items() if fid in needed), key=lambda c: c.time) or [stage.response()]
        rest = sorted((c for fid, c in fates.items() if fid not in needed), key=lambda c: c.time)
        return TraceResult(dedup_candidates(first + rest), [f.id for f in facts], source,
                           sum(len(w.visited) for w in walks), sum(w.truncated for w in walks))

    def _walk(self, graph: MemoryGraph, case: FailureCase, fact: Fact) -> Walk:
        return forward_walk(graph, fact, fact.id, judge=self.judge, qa_id=case.qa_id,
                            prior=prior_for(case.system or graph.meta.get("system")), max_frontier=self.max_frontier)

    def _hallucination(self, graph: MemoryGraph, case: FailureCase) -> Candidate:
        """The conversation never says it: no memory op can have lost it, so answering anything but
        "not mentioned" is the answering op's fault (it should have abstained)."""
        qa_op = case.qa_op
        time = graph.ops[qa_op].time if qa_op in graph.ops else 0
        return Candidate("ResponseError", qa_op, time,
                         f"the conversation never states this (gold: {case.gold!r}), yet the answer "
                         f"{case.prediction!r} asserts something instead of abstaining", None, {"kind": "none"})

    def _no_evidence(self, graph: MemoryGraph, case: FailureCase) -> Candidate:
        gold_fact = make_fact("gold", case.gold, case.question, case.gold)
        stage = _Stages(graph, case, self.judge)
        if stage.context_holds(gold_fact):
            return stage.response()
        if stage.live_holders(gold_fact):
            op_id = stage.retrieval_op(gold_fact)
            return Candidate("RetrievalError", op_id, stage._time(op_id),
                             "no evidence message found; a live unit holds the gold answer, the context does not")
        return Candidate("ExtractionError", None, 0,
                         "no evidence message found and no memory unit holds the gold answer; the op is unknown")


class _Stages:
    """The stage checks (b)–(e) of one case."""

    def __init__(self, graph: MemoryGraph, case: FailureCase, judge: ContentJudge, scan_judged: int = 3) -> None:
        self.graph, self.case, self.judge = graph, case, judge
        rec = graph.sessions.get(f"answer:{case.qa_id}")
        self.qtime = rec.time if rec else min((o.time for o in answer_ops(graph, case.qa_id)), default=10**12)
        self.prior = prior_for(case.system or graph.meta.get("system"))
        self.scan_judged = scan_judged
        self._cache: dict[tuple[str, str], bool] = {}

    def holds(self, fact: Fact, vid: str) -> bool:
        key = (fact.id, vid)
        if key not in self._cache:
            var = self.graph.variables[vid]
            self._cache[key] = not var.deleted and bool(self.judge.holds(fact, var.value).holds)
        return self._cache[key]

    def scan(self, fact: Fact, vids: list[str]) -> list[str]:
        """The variables among ``vids`` that hold ``fact``: token test first; the (possibly costly) judge
        only for the ``scan_judged`` best grey-zone ones."""
        quick = TokenJudge(decide=False)
        sure, grey = [], []
        for vid in vids:
            var = self.graph.variables[vid]
            verdict = Holding(False, 0.0, "deleted") if var.deleted else quick.holds(fact, var.value)
            if verdict.holds:
                sure.append(vid)
            elif verdict.holds is None:
                grey.append((verdict.score, vid))
        grey.sort(key=lambda x: -x[0])
        checked = [vid for _, vid in grey[: self.scan_judged] if self.holds(fact, vid)]
        return [v for v in vids if v in set(sure) | set(checked)]

    def fate(self, walk: Walk, later: list[Fact]) -> Candidate | None:
        """The fact's failure candidate, or None when it reached the answer's context.

        Lineage first: if the walk shows the fact lost before any unit, that loss is the earliest
        fault even when another unit happens to hold similar content; then the holder units'
        degradations; only then the store as a whole (any live unit holding it) against the context.
        """
        fact = walk.fact
        holders = walk.unit_holders
        if not holders:
            if walk.losses:
                return self._lost(walk)
            holders = self._any_unit_holders(fact)
            if not holders:
                return self._lost(walk)
        lost = self._degradations(fact, holders, later)
        if lost:
            return lost[0]
        live = self.live_holders(fact)
        if not live:
            return self._lost(walk)
        if self.context_holds(fact):
            return None
        lost_copy = self._copy_loss(fact, live)
        if lost_copy is not None:
            return lost_copy
        op_id = self.retrieval_op(fact)
        return Candidate("RetrievalError", op_id, self._time(op_id),
                         f"live unit {live[0]} holds the evidence {fact.id} but the retrieved context lacks it",
                         fact.id, {"kind": "add_record", "unit": live[0], "value": self.graph.value(live[0])})

    def response(self) -> Candidate:
        return Candidate("ResponseError", self.case.qa_op, self._time(self.case.qa_op),
                         f"the retrieved context holds the evidence, yet the answer {self.case.prediction!r} is wrong",
                         None, {"kind": "none"})

    def live_holders(self, fact: Fact) -> list[str]:
        return self.scan(fact, [u.id for u in live_units(self.graph, self.qtime)])

    def context_holds(self, fact: Fact) -> bool:
        return any(self.holds(fact, v) for v in self._context_vars())

    def retrieval_op(self, fact: Fact) -> str | None:
        """The answer-session op that dropped the fact: the first whose inputs hold it and outputs do not,
        else the first retrieval-branch op, else the producer of the retrieved context."""
        ops = [o for o in answer_ops(self.graph, self.case.qa_id)
               if o.category not in (QA, JUDGE) and self._passes_records(o)]
        for op in ops:
            inputs = [v for v in op.input_ids() if self.graph.variables[v].category != QUERY]
            if any(self.holds(fact, v) for v in inputs) and not any(self.holds(fact, v) for v in op.output_ids()):
                return op.id
        retrieval = [o.id for o in ops if o.category == "retrieval"] or [o.id for o in ops]
        if retrieval:
            return retrieval[0]
        return self.graph.producer.get(self.case.retrieved_var or "")

    def _copy_loss(self, fact: Fact, live: list[str]) -> Candidate | None:
        """An op that copied a holder unit into what retrieval reads (an index entry) and lost the fact."""
        g = self.graph
        read = {split_var_id(v)[0] for o in answer_ops(g, self.case.qa_id) if o.category not in (QA, JUDGE)
                for v in o.input_ids() if g.variables[v].category not in (QUERY, MEMORY_UNIT)}
        for unit in live:
            for op_id in sorted(g.consumers(unit), key=self._time):
                op = g.ops[op_id]
                if op.time >= self.qtime:
                    continue
                copies = [v for v in op.output_ids() if split_var_id(v)[0] in read]
                if copies and not any(self.holds(fact, v) for v in copies):
                    return Candidate("ExtractionError", op_id, op.time,
                                     f"unit {unit} holds the evidence {fact.id}, but {op_id} wrote a copy without it "
                                     f"({copies[0]}) into the store retrieval searches", fact.id,
                                     _inject_fix(g, fact))
        return None

    def _passes_records(self, op: Operation) -> bool:
        """Whether ``op`` outputs retrieved records (not a verdict or rewritten queries)."""
        for vid in op.output_ids():
            var = self.graph.variables[vid]
            if var.category == RETRIEVED or (isinstance(var.value, list)
                                              and all(isinstance(x, dict) for x in var.value)):
                return True
        return False

    def _context_vars(self) -> list[str]:
        if self.case.retrieved_var:
            return [self.case.retrieved_var]
        op = self.graph.ops.get(self.case.qa_op or "")
        return [v for v in op.input_ids() if self.graph.variables[v].category != QUERY] if op else []

    def _any_unit_holders(self, fact: Fact) -> list[str]:
        units = [v.id for v in self.graph.variables.values() if v.category == MEMORY_UNIT and v.time < self.qtime]
        return self.scan(fact, units)

    def _lost(self, walk: Walk) -> Candidate:
        """(a): the fact never reached a unit. Blame the op that lost it, else the first extraction that read it."""
        g, fact = self.graph, walk.fact
        op_id = walk.first_loss(g, self.prior.content_first)
        if op_id is None:
            readers = [o for o in g.consumers(fact.id) if g.ops[o].category not in (QA, JUDGE)]
            extraction = [o for o in readers if g.ops[o].category == EXTRACTION]
            op_id = extraction[0] if extraction else readers[0] if readers else None
        return Candidate("ExtractionError", op_id, self._time(op_id),
                         f"the evidence {fact.id} ({short(fact.text, 80)!r}) never reached any memory unit",
                         fact.id, _inject_fix(g, fact))

    def _degradations(self, fact: Fact, holders: list[str], later: list[Fact]) -> list[Candidate]:
        """(b)/(c): transitions of holder units from holding to not holding, earliest first (units that
        hold the fact again by question time are left out)."""
        out = []
        for name in dict.fromkeys(split_var_id(h)[0] for h in holders):
            chain = [v for v in unit_chain(self.graph, name) if v.time < self.qtime]
            if not chain or self.holds(fact, chain[-1].id):
                continue  # the unit still holds it when the question is asked: no decisive loss
            for prev, cur in zip(chain, chain[1:]):
                if not self.holds(fact, prev.id) or self.holds(fact, cur.id):
                    continue
                if not cur.deleted and any(self.holds(f, cur.id) and not self.holds(f, prev.id) for f in later):
                    continue  # replaced by a later evidence fact this very change brought in: a legitimate update
                out.append(self._transition(fact, prev, cur))
        return sorted(out, key=lambda c: c.time)

    def _transition(self, fact: Fact, prev: Any, cur: Any) -> Candidate:
        executor = self.graph.producer.get(cur.id)
        op = self.graph.ops.get(executor or "")
        emptied = cur.deleted or not value_text(cur.value).strip() or (op is not None and op.category == DELETION)
        kind = "DeletionError" if emptied else "UpdateError"
        verb = "deleted" if emptied else "degraded"
        blamed = self._responsible(fact, op).id if op is not None else None
        via = f" as decided by {blamed}" if blamed != executor else ""
        return Candidate(kind, blamed, self._time(blamed),
                         f"unit {prev.id} held the evidence {fact.id}; {executor} {verb} it ({cur.id}){via}",
                         fact.id, {"kind": "restore", "var": cur.id, "value": prev.value, "executor": executor})

    def _responsible(self, fact: Fact, op: Operation) -> Operation:
        """The op locally at fault for a unit change made by ``op``.

        An executor without a prompt (a store write, a vector delete) only carries out a decision made by
        an earlier op with a prompt (mem0's update decision). A deletion executor is then never at fault;
        a write is at fault only if the decision it carried out still held the fact."""
        if op.prompt is not None:
            return op
        previous = set(op.inputs.get("_previous", ()))
        deciders = [self.graph.ops[p] for v in op.input_ids() if v not in previous
                    and (p := self.graph.producer.get(v)) and self.graph.ops[p].prompt is not None]
        if not deciders:
            return op
        decider = max(deciders, key=lambda d: d.time)
        if op.category == DELETION or self.graph.variables[op.output_ids()[0]].deleted:
            return decider
        return op if any(self.holds(fact, v) for v in decider.output_ids()) else decider

    def _time(self, op_id: str | None) -> int:
        op = self.graph.ops.get(op_id or "")
        return op.time if op else 10**12


_STRICT = DeterministicJudge(f1_threshold=0.8)
#: Verdicts of the strict judge that no word-level match may overturn: the answer is wrong outright.
_OUTRIGHT_REJECTIONS = ("dates differ", "opposite yes/no answer", "only one side abstains")


def _judge_error(graph: MemoryGraph, case: FailureCase, why: str) -> Candidate:
    time = graph.ops[case.judge_op].time if case.judge_op in graph.ops else 10**12
    return Candidate("JudgeError", case.judge_op, time, why)


def _partly_right(case: FailureCase) -> str | None:
    """Why a failed answer the context fully supported is a correct part of a listing gold, or None.

    Asked only once tracing found no upstream loss: when the context lacked the other items (a
    partial extraction), the partial answer is that op's fault and stays blamed there.
    """
    why = names_part_of_gold(case.question, case.gold, case.prediction)
    if why is None:
        return None
    return (f"the context holds the evidence and the answer {case.prediction!r} is a correct part of the gold "
            f"{case.gold!r} ({why}); the judging protocol counts an answer on the same topic, yet the judge "
            f"scored it wrong")


def judged_wrongly(case: FailureCase) -> str | None:
    """Why a failed answer is in fact right (a JudgeError), or None.

    A second, stricter judgement than the run's: the rules that are sure (both abstain, the same yes/no,
    the prediction contains the gold, the same dates) or a token F1 of at least 0.8 — else, unless those
    rules rejected it outright, every answer-bearing word of the gold in the prediction
    (:func:`~memtrace_opt.attribution.answer_match.carries_gold`). When it accepts
    an answer the run's judge rejected, the memory system is not at fault and nothing is optimized.
    """
    if not case.prediction.strip():
        return None
    verdict = _STRICT.judge(case.question, case.gold, case.prediction)
    why = verdict.reason.removeprefix("deterministic: ") if verdict.score == 1 else None
    if why is None and not verdict.reason.endswith(_OUTRIGHT_REJECTIONS):
        why = carries_gold(case.question, case.gold, case.prediction)
    if why is None:
        return None
    return (f"the answer {case.prediction!r} matches the gold {case.gold!r} by a stricter second judgement "
            f"({why}), yet the judge scored it wrong")


def necessary_facts(facts: list[Fact], case: FailureCase) -> set[str]:
    """The facts whose failure can be decisive.

    Annotated evidence often lists supporting turns the answer does not need. When the messages that
    contain the gold answer's words cover all of them, the other evidence is supporting only — unless
    the question is multi-hop, where a bridging fact is needed as much as the answer-bearing one.
    Supporting facts' failures are still candidates, ranked after the necessary ones.
    """
    gold = content_tokens(case.gold)
    bearing = [f for f in facts if f.gold_tokens]
    covered = set().union(*(f.gold_tokens for f in bearing)) if bearing else set()
    if not bearing or not gold <= covered or case.meta.get("category") == "multi-hop":
        return {f.id for f in facts}
    return {f.id for f in bearing}


def _inject_fix(graph: MemoryGraph, fact: Fact) -> dict[str, Any]:
    """The fix of a lost fact: its line put into the op's output, in a record made from its own message."""
    source = message_source(fact.id, graph.value(fact.id) if fact.id in graph.variables else None)
    return {"kind": "inject", "text": _fact_line(graph, fact), "source": source}


def _fact_line(graph: MemoryGraph, fact: Fact) -> str:
    value = graph.value(fact.id) if fact.id in graph.variables else None
    if isinstance(value, dict) and value.get("speaker"):
        return f"{value['speaker']}: {value.get('text', '')}"
    return fact.text


def dedup_candidates(candidates: list[Candidate]) -> list[Candidate]:
    """``candidates`` without repeats of an (error type, op) pair, first kept."""
    seen: set[tuple[str, str | None]] = set()
    out = []
    for c in candidates:
        if (c.error_type, c.op_id) not in seen:
            seen.add((c.error_type, c.op_id))
            out.append(c)
    return out


def blame_from(graph: MemoryGraph, case: FailureCase, cand: Candidate, **kw: Any) -> BlameSignal:
    """The blame signal for ``case`` blaming ``cand``; the prompt component is read off the op (none for
    non-memory errors: a judge's or an annotator's mistake is never sent to the system's prompts)."""
    op = graph.ops.get(cand.op_id or "") if cand.error_type in MEMORY_ERROR_TYPES else None
    return BlameSignal(
        case_id=case.case_id, question=case.question, gold=case.gold, prediction=case.prediction,
        error_type=cand.error_type, op_id=cand.op_id,
        prompt_component=op.prompt.component if op is not None and op.prompt else None,
        reason=cand.reason, **kw,
    )
