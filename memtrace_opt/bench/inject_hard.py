"""The harder injection suite: faults that keep most of the evidence's words, so token overlap alone misleads.

The easy suite (:mod:`.inject`) drops the evidence outright. Failures found in real runs and in an
independent benchmark were subtler; each class here reproduces one, with its ground truth:

- ``partial``: extraction keeps half of the answer's words ("lives near the canal", not "in Leeds
  near the canal") → ExtractionError at that extraction.
- ``other-speaker``: extraction puts the other speaker's name on the fact → ExtractionError there.
- ``meaning-date`` / ``meaning-negation``: extraction keeps the words and changes the meaning (a
  year moved or a relative time replaced by a year long past, the statement negated) →
  ExtractionError there.
- ``index-write``: the copy that retrieval searches (an index entry written from a memory unit)
  loses the fact while the unit keeps it → ExtractionError at the write.
- ``trim``: an update of a unit holding two evidence facts drops one → UpdateError at that update.
- ``judged-wrongly``: a correct answer scored wrong by the judge → JudgeError at the judge op.

Every planner returns an :class:`~memtrace_opt.bench.inject.Injection` (its ``kind`` is the
class) or the reason it could not; :func:`~memtrace_opt.bench.inject.inject_case` replays it
and keeps it only if the answer then fails.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

from memtrace_opt.attribution.content import ContentJudge, Fact, TokenJudge
from memtrace_opt.attribution.failures import FailureCase
from memtrace_opt.attribution.priors import prior_for
from memtrace_opt.attribution.text import METADATA_KEYS, content_tokens
from memtrace_opt.attribution.view import answer_ops
from memtrace_opt.attribution.walk import forward_walk
from memtrace_opt.bench.inject import Injection, _facts, _holds, _unit_updates, drop_fact
from memtrace_opt.graph import MemoryGraph, Overrides
from memtrace_opt.graph.model import EXTRACTION, JUDGE, MEMORY_UNIT, QA, QUERY, split_var_id

__all__ = ["HARD_KINDS", "plan_hard_injections", "rewrite_fact"]

HARD_KINDS: tuple[str, ...] = ("partial", "other-speaker", "meaning-date", "meaning-negation", "index-write", "trim",
                               "judged-wrongly")
_YEAR = re.compile(r"\b(19|20)\d{2}\b")
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
_NEGATABLE = re.compile(r"\b(is|was|are|were|has|have|had|will|can|did|does|do)\b", re.I)
#: Relative times a date edit can replace as a phrase (detection, in :mod:`.content`, is broader).
_RELATIVE_TIME = re.compile(r"\b(?:today|yesterday|tonight|this (?:week|month|year|weekend|morning)|last (?:night|"
                            r"week|weekend|month|year|\w+day)|(?:a|one|two|three|a few|several) (?:days?|weeks?|"
                            r"months?|years?) ago|recently)\b", re.I)
_LONG_AGO = "back in 2009"

Edit = Callable[[str], str]


def rewrite_fact(value: Any, fact: Fact, judge: ContentJudge, edit: Edit, *, speaker_field: bool = False) -> Any:
    """``value`` with ``edit`` applied to the parts that carry ``fact`` (list items, record text fields,
    sentences of a text); everything else unchanged.

    A record's ``speaker`` field is who spoke, not what was said: only the other-speaker edit
    (``speaker_field=True``) rewrites it; a negation or date edit there would leave the line's
    words and meaning as they were. A text none of whose sentences carries the fact alone (the
    fact spans them) is edited whole.
    """
    if isinstance(value, list):
        return [rewrite_fact(x, fact, judge, edit, speaker_field=speaker_field) if _holds(judge, fact, x) else x
                for x in value]
    if isinstance(value, dict):
        return {k: v if k in METADATA_KEYS or (k == "speaker" and not speaker_field)
                else rewrite_fact(v, fact, judge, edit, speaker_field=speaker_field) for k, v in value.items()}
    if isinstance(value, str):
        parts = [p for p in _SENTENCE.split(value) if p]
        carrying = [_holds(judge, fact, p) for p in parts]
        if len(parts) > 1 and any(carrying):
            return " ".join(edit(p) if c else p for p, c in zip(parts, carrying))
        return edit(value)
    return value


def _without_words(text: str, words: set[str]) -> str:
    kept = [w for w in text.split() if not (content_tokens(w) & words)]
    return " ".join(kept)


def _partial_edit(fact: Fact, case: FailureCase) -> Edit | None:
    gold = [t for t in dict.fromkeys(re.findall(r"[a-z0-9]+", case.gold.lower())) if content_tokens(t)]
    gold_tokens = [t for t in gold if content_tokens(t) & fact.gold_tokens]
    if len(gold_tokens) < 2:
        return None
    dropped = set().union(*(content_tokens(t) for t in gold_tokens[len(gold_tokens) // 2:]))
    return lambda text: _without_words(text, dropped)


def _speaker_edit(graph: MemoryGraph, fact: Fact) -> Edit | None:
    message = graph.value(fact.id) if fact.id in graph.variables else None
    speaker = message.get("speaker") if isinstance(message, dict) else None
    others = [s for s in graph.meta.get("speakers") or () if s != speaker]
    if not speaker or not others:
        return None
    other = others[0]

    def edit(text: str) -> str:
        if re.search(rf"\b{re.escape(speaker)}\b", text):
            return re.sub(rf"\b{re.escape(speaker)}\b", other, text)
        return f"{other}: {re.sub(r'^[^:]{1,40}:[ ]', '', text)}"

    return edit


def _date_edit(text: str) -> str:
    """Move the event in time, keeping the other words: a year named in the text goes back three
    years; else the first relative time ("yesterday", "last week", "two days ago": how LoCoMo's
    turns date events, the session date supplying the year) becomes a year long past."""
    if _YEAR.search(text):
        return _YEAR.sub(lambda m: str(int(m.group(0)) - 3), text)
    return _RELATIVE_TIME.sub(_LONG_AGO, text, count=1)


def _negation_edit(text: str) -> str:
    if _NEGATABLE.search(text):
        return _NEGATABLE.sub(lambda m: f"{m.group(0)} not", text, count=1)
    return f"It is not true that {text[:1].lower()}{text[1:]}"


def _extraction_outputs(graph: MemoryGraph, case: FailureCase, fact: Fact,
                        judge: ContentJudge) -> list[tuple[str, str, str]]:
    """(op id, role, var id) of the first extraction (or memory-forming op) outputs that carry the fact."""
    prior = prior_for(case.system or graph.meta.get("system"))
    walk = forward_walk(graph, fact, fact.id, judge=judge, qa_id=case.qa_id, prior=prior)
    ops = sorted((graph.ops[o] for o in walk.visited), key=lambda o: o.time)
    path = [o for o in ops if o.category == EXTRACTION] or [
        o for o in ops if fact.id in o.input_ids() and o.category in prior.forming]
    return [(op.id, role, vid) for op in path for role, vid in op.outputs.items()
            if _holds(judge, fact, graph.value(vid))][:1]


def _plan_edit(graph: MemoryGraph, case: FailureCase, facts: Sequence[Fact], judge: ContentJudge, kind: str,
               make_edit: Callable[[Fact], Edit | None], *, speaker_field: bool = False) -> Injection | str:
    for fact in facts:
        edit = make_edit(fact)
        if edit is None:
            continue
        for op_id, role, vid in _extraction_outputs(graph, case, fact, judge):
            old = graph.value(vid)
            new = rewrite_fact(old, fact, judge, edit, speaker_field=speaker_field)
            if new != old:
                return Injection("ExtractionError", op_id, Overrides(op_outputs={op_id: {role: new}}),
                                 f"{kind}: rewrote {fact.id} in {vid}", kind)
    return f"no extraction output the {kind} edit changes"


def _plan_index_write(graph: MemoryGraph, case: FailureCase, facts: Sequence[Fact],
                      judge: ContentJudge) -> Injection | str:
    read = {split_var_id(v)[0] for o in answer_ops(graph, case.qa_id) if o.category not in (QA, JUDGE)
            for v in o.input_ids() if graph.variables[v].category not in (QUERY, MEMORY_UNIT)}
    for fact in facts:
        for unit in (v for v in graph.variables.values() if v.category == MEMORY_UNIT and _holds(judge, fact, v.value)):
            for op_id in graph.consumers(unit.id):
                op = graph.ops[op_id]
                for role, vid in op.outputs.items():
                    if split_var_id(vid)[0] in read and _holds(judge, fact, graph.value(vid)):
                        new = drop_fact(graph.value(vid), fact, judge)
                        if not _holds(judge, fact, new):
                            return Injection("ExtractionError", op_id, Overrides(op_outputs={op_id: {role: new}}),
                                             f"index-write: {vid} written without {fact.id}", "index-write")
    return "no copy of a memory unit that retrieval searches"


def _plan_trim(graph: MemoryGraph, case: FailureCase, facts: Sequence[Fact], judge: ContentJudge) -> Injection | str:
    if len(facts) < 2:
        return "fewer than two evidence facts"
    first = facts[0]
    for op_id, vid in _unit_updates(graph, case, first, judge):
        value = graph.value(vid)
        if sum(_holds(judge, f, value) for f in facts) < 2:
            continue
        new = drop_fact(value, first, judge)
        if not _holds(judge, first, new) and any(_holds(judge, f, new) for f in facts[1:]):
            role = next(r for r, v in graph.ops[op_id].outputs.items() if v == vid)
            return Injection("UpdateError", op_id, Overrides(op_outputs={op_id: {role: new}}),
                             f"trim: update {op_id} kept another evidence fact but dropped {first.id}", "trim")
    return "no update of a unit holding two evidence facts"


def _plan_judge(graph: MemoryGraph, case: FailureCase) -> Injection | str:
    if case.judge_op is None or case.judge_op not in graph.ops:
        return "no judge op"
    op = graph.ops[case.judge_op]
    role, vid = next(iter(op.outputs.items()))
    verdict = graph.value(vid)
    if not isinstance(verdict, dict):
        return "the judgement is not a record"
    wrong = {**verdict, "score": 0, "label": "WRONG", "reason": "injected: judged wrong"}
    return Injection("JudgeError", op.id, Overrides(op_outputs={op.id: {role: wrong}}),
                     "judged-wrongly: a correct answer scored WRONG", "judged-wrongly")


def plan_hard_injections(graph: MemoryGraph, case: FailureCase, *, judge: ContentJudge | None = None,
                         kinds: Sequence[str] = HARD_KINDS) -> tuple[list[Injection], dict[str, str]]:
    """The harder injections possible for correctly answered ``case`` (one per class), and why the
    others were skipped."""
    judge = judge or TokenJudge()
    if "audit_wrong_gold" in case.flags:
        return [], {k: "gold flagged wrong by the dataset audit" for k in kinds}
    facts = _facts(graph, case)
    planners: dict[str, Callable[[], Injection | str]] = {
        "partial": lambda: _plan_edit(graph, case, facts, judge, "partial", lambda f: _partial_edit(f, case)),
        "other-speaker": lambda: _plan_edit(graph, case, facts, judge, "other-speaker",
                                            lambda f: _speaker_edit(graph, f), speaker_field=True),
        "meaning-date": lambda: _plan_edit(graph, case, facts, judge, "meaning-date",
                                           lambda f: _date_edit if _YEAR.search(f.text + " " + case.gold) else None),
        "meaning-negation": lambda: _plan_edit(graph, case, facts, judge, "meaning-negation",
                                               lambda f: _negation_edit),
        "index-write": lambda: _plan_index_write(graph, case, facts, judge),
        "trim": lambda: _plan_trim(graph, case, facts, judge),
        "judged-wrongly": lambda: _plan_judge(graph, case),
    }
    planned, skipped = [], {}
    for kind in kinds:
        if not facts and kind != "judged-wrongly":
            skipped[kind] = "no annotated evidence message in the graph"
            continue
        result = planners[kind]()
        if isinstance(result, Injection):
            planned.append(result)
        else:
            skipped[kind] = result
    return planned, skipped
