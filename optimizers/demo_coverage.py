"""Worked examples chosen to cover the round's failures, not drawn at random.

A random demo set from a pool of a few dozen spends its four slots on whatever it drew: often
easy bootstrapped answers ("Sweden") while most failures share one pattern the examples never show
(a "when" question whose gold is relative to a session date, "The week before 9 June 2023"). A small
model imitates the *form* of its examples far more reliably than it follows an instruction, so the
examples worth showing are those whose form matches the most failures.

The form of a case is read from its text alone, so the selection is deterministic, costs no LM call
and works on any QA data: the question's opening words (``when did``, ``how long``, ``would``) and the
*shape* of the expected answer (each token mapped to a class: a year, a month, a number, a relative
time word, a yes/no, any other word). Selection is greedy facility location (Nemhauser et al.: within
1 - 1/e of the best set): each step adds the demo that most raises, summed over the failures, the
similarity of each failure to its closest chosen demo, under the token budget. The targets are the
failures charged to the component — for the attributed method the ones blamed on it, for the
unattributed ablation every failure of the round — so attribution decides which failures the
examples are fitted to.
"""

from __future__ import annotations

import re
from typing import Sequence

from memtrace_opt.optimizers.demos import Demo

__all__ = ["answer_shape", "case_similarity", "question_form", "select_covering_demos"]

_MONTHS = {"january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"}
_RELATIVE = {"before", "after", "ago", "last", "next", "week", "weeks", "month", "months", "year", "years", "day",
             "days", "weekend", "yesterday", "tomorrow", "today", "since", "earlier", "later", "during", "sunday",
             "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"}
_YESNO = {"yes", "no", "likely", "unlikely", "probably", "maybe"}
_WORD = re.compile(r"[a-z]+|\d+")
#: Opening words that carry a question's form; the rest of the question is its topic.
_FORM_WORDS = 2


def answer_shape(answer: str) -> tuple[str, ...]:
    """The answer as token classes: ``YEAR``, ``NUM``, ``MONTH``, a relative-time word itself, ``YESNO``, ``W``.

    >>> answer_shape("The week before 9 June 2023")
    ('W', 'week', 'before', 'NUM', 'MONTH', 'YEAR')
    >>> answer_shape("Sweden")
    ('W',)
    """
    out: list[str] = []
    for tok in _WORD.findall(answer.lower()):
        if tok.isdigit():
            out.append("YEAR" if len(tok) == 4 and tok[:2] in ("19", "20") else "NUM")
        elif tok in _MONTHS:
            out.append("MONTH")
        elif tok in _RELATIVE:
            out.append(tok)
        elif tok in _YESNO:
            out.append("YESNO")
        else:
            out.append("W")
    return tuple(out)


def question_form(question: str) -> tuple[str, ...]:
    """The question's opening words (lower case): ``("when", "did")``, ``("how", "long")``."""
    return tuple(_WORD.findall(question.lower())[:_FORM_WORDS])


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def case_similarity(question_a: str, answer_a: str, question_b: str, answer_b: str) -> float:
    """How alike two cases' forms are, in [0, 1]: half the question's opening, half the answer's shape.

    The shape compares the set of token classes, with a word-class-only answer ("W") distinct from one
    holding dates or numbers, so a relative-date answer and a plain name share little.
    """
    qa, qb = question_form(question_a), question_form(question_b)
    opening = 1.0 if qa == qb else 0.5 if qa[:1] == qb[:1] else 0.0
    shape = _jaccard(set(answer_shape(answer_a)), set(answer_shape(answer_b)))
    return 0.5 * opening + 0.5 * shape


def _demo_case(demo: Demo) -> tuple[str, str]:
    question = next((text for role, text in demo.inputs if role == "question"), "")
    return question.strip(), demo.output


def select_covering_demos(pool: Sequence[Demo], targets: Sequence[tuple[str, str]], *, budget_tokens: int,
                          max_demos: int) -> list[Demo]:
    """Up to ``max_demos`` demos of ``pool`` within ``budget_tokens`` that best cover ``targets``
    (``(question, expected answer)`` of each failure), greedily; ties go to the earlier demo in the pool.

    Returns ``[]`` when there is no target or no demo fits. A demo adds nothing once every target's
    closest chosen demo is as close as it would be, so fewer than ``max_demos`` may be chosen.
    """
    if not targets or not pool:
        return []
    cases = [_demo_case(d) for d in pool]
    sim = [[case_similarity(q, a, tq, ta) for tq, ta in targets] for q, a in cases]
    best = [0.0] * len(targets)
    chosen: list[int] = []
    used = 0
    while len(chosen) < max_demos:
        pick, pick_gain = -1, 1e-9
        for i, demo in enumerate(pool):
            if i in chosen or used + demo.tokens > budget_tokens:
                continue
            gain = sum(max(0.0, s - b) for s, b in zip(sim[i], best))
            if gain > pick_gain:
                pick, pick_gain = i, gain
        if pick < 0:
            break
        chosen.append(pick)
        used += pool[pick].tokens
        best = [max(b, s) for b, s in zip(best, sim[pick])]
    return [pool[i] for i in chosen]
