"""Does a wrong-judged answer carry the whole gold answer? The word-level half of the JudgeError test.

The stricter second judgement (:func:`memtrace_opt.attribution.tracing.judged_wrongly`) first asks
the model-free judge with a high F1 bar. That bar rejects three kinds of correct answers that a
small model writes all the time, found in the hard attribution suite on LoCoMo:

- the question restated around the answer ("John's interest ... was sparked by seeing how lack of
  education ... affected his neighborhood" for "Seeing how lack of education ... affected his
  neighborhood while growing up"): the restated words dilute the F1, so they are left out — only
  the *answer-bearing* words (those not already in the question) are compared;
- the gold's words all present among extra detail ("finished her first full screenplay and printed
  it last Friday" for "finished her screenplay and printed it");
- a number written the other way ("3 years" for "three years").

It stays strict where leniency would hide real system errors: a partial answer ("Drama" for "drama
and romance") carries only part of the gold and is not accepted here; a negation the gold lacks, or
dates that differ, reject the answer outright. Whether a partial answer is the judge's error depends
on the graph — right by the generous protocol when the context held every item, the fault of the
op that lost the rest when it did not — so :func:`names_part_of_gold` only says that it is a clean
part, and tracing decides once it knows which.
"""

from __future__ import annotations

import re

from memtrace_opt.attribution.text import content_tokens
from memtrace_opt.data.dates import find_dates
from memtrace_opt.eval.judge import dates_agree

__all__ = ["carries_gold", "names_part_of_gold"]

_NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_NUMBER_WORD = re.compile(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", re.I)
_NEGATION = re.compile(r"\b(not|no|never|none|nothing|neither|nor|without)\b|n't\b", re.I)
#: Linking verbs carry no answer: "They look graceful" and "the dancers are graceful" say the same.
_LINKING = content_tokens("look looks looked seem seems seemed appear appears appeared sound sounds sounded "
                          "feel feels felt become becomes became")
#: How a gold answer lists its items ("Kickboxing, Taekwondo", "drama and romance").
_ITEM_SEP = re.compile(r"\s*(?:,|;|/|&|\band\b|\bor\b)\s*", re.I)
#: F1 over answer-bearing words at which an answer that misses a word or two still carries the gold.
BEARING_F1 = 0.8


def _words(text: str) -> frozenset[str]:
    return content_tokens(_NUMBER_WORD.sub(lambda m: _NUMBER_WORDS[m.group(1).lower()], text)) - _LINKING


def carries_gold(question: str, gold: str, prediction: str) -> str | None:
    """Why ``prediction`` carries all of ``gold`` (a reason to quote), or None.

    >>> carries_gold("How long has Nate had his turtles?", "three years", "3 years") is not None
    True
    >>> carries_gold("What genre is her screenplay?", "drama and romance", "Drama") is None
    True
    """
    if not prediction.strip() or dates_agree(gold, prediction) is False:
        return None
    if _NEGATION.search(prediction) and not _NEGATION.search(gold):
        return None
    asked = _words(question)
    gold_words, pred_words = _words(gold), _words(prediction)
    bearing = gold_words - asked or gold_words
    said = pred_words - asked
    if not bearing:
        return None
    if bearing <= pred_words:
        return "every answer-bearing word of the gold is in the prediction"
    common = len(bearing & said)
    if not said or not common:
        return None
    precision, recall = common / len(said), common / len(bearing)
    f1 = 2 * precision * recall / (precision + recall)
    if f1 >= BEARING_F1 and recall > 0.5:
        return f"answer-bearing words F1 {f1:.2f} >= {BEARING_F1} (question words left out)"
    return None


def names_part_of_gold(question: str, gold: str, prediction: str) -> str | None:
    """Why ``prediction`` is a correct part of a gold that lists several items (a reason), or None.

    The answer names one or more of the gold's items whole and says nothing the gold does not
    ("Kickboxing" for "Kickboxing, Taekwondo"). LoCoMo's judging protocol is generous ("as long as
    it touches on the same topic as the gold answer"), so such an answer is right by it; an answer
    that adds something the gold does not say ("Action and horror" for "action and sci-fi") is
    not. Only the caller knows whether the missing items were lost upstream, which makes the
    partial answer that op's fault, not the judge's (see
    :meth:`memtrace_opt.attribution.tracing.TracingAttributor.trace`).

    >>> names_part_of_gold("What martial arts has John done?", "Kickboxing, Taekwondo", "Kickboxing") is not None
    True
    >>> names_part_of_gold("What genres?", "action and sci-fi", "Action and horror") is None
    True

    A gold that names one date is one item, whatever its commas: "2023" for "May 1, 2023" is a
    coarser answer, not a correct part of a list.

    >>> names_part_of_gold("When did she go?", "A few days before May 24, 2023.", "2023") is None
    True
    """
    items = [i for i in _ITEM_SEP.split(gold) if _words(i)]
    if len(items) < 2 or len(find_dates(gold)) == 1 or (_NEGATION.search(prediction) and not _NEGATION.search(gold)):
        return None
    asked = _words(question)
    said = _words(prediction) - asked
    named = [i for i in items if carries_gold(question, i, prediction) is not None]
    if not said or not named or len(named) == len(items) or not said <= _words(gold):
        return None
    return f"it names {len(named)} of the gold's {len(items)} items ({', '.join(named)}) and nothing else"
