"""Judges: decide whether a predicted answer matches the gold one.

``LLMJudge`` follows mem0's LoCoMo judge (temperature 0, a JSON ``{"label": "CORRECT"|"WRONG"}``
reply, generous about wording and date formats), so accuracies are comparable with the Mem0
paper's. The reply is constrained with a JSON schema because small local models otherwise wrap
the label in prose; parsing still degrades step by step (JSON, embedded JSON, a bare label), and
a reply that yields no label is a recorded judge failure (score 0, label ``FAILED``), never a crash.

``DeterministicJudge`` needs no model: abstention matching, normalised containment, date
comparison and a token-F1 threshold. Use it when the judge model is too weak to trust, and to
cross-check the LLM judge.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Protocol

from memtrace_opt.data.dates import before_windows, find_dates
from memtrace_opt.eval.metrics import normalize_tokens, token_f1
from memtrace_opt.lm.base import LMClient, LMResult

__all__ = [
    "JUDGE_KINDS",
    "JUDGE_PROMPT",
    "JUDGE_SCHEMA",
    "DeterministicJudge",
    "HybridJudge",
    "Judge",
    "JudgeVerdict",
    "LLMJudge",
    "make_judge",
    "is_abstention",
    "parse_label",
]

JUDGE_PROMPT = """\
Label a generated answer to a question as CORRECT or WRONG.

The question is one person asking about something the other person should remember from \
their earlier conversations. You get the question, the gold (ground-truth) answer, and the \
generated answer.

The gold answer is usually short and names the topic, for example:
Question: What did I bring back from my last trip to Lisbon?
Gold answer: A blue ceramic tile
The generated answer may be much longer. Be generous: if it is about the same thing as the gold \
answer, label it CORRECT.

For questions about time the gold answer is a date, month, year or period. The generated answer \
may be longer, use another format ("May 7th" or "7 May") or a relative expression ("last \
Tuesday", "the week before"). Be generous: if it refers to the same date or period, label it \
CORRECT.

If the gold answer says the information is not available, only an answer that also says so is \
CORRECT.

Question: {question}
Gold answer: {gold}
Generated answer: {prediction}

Reply with JSON only, in the form {{"label": "CORRECT"}} or {{"label": "WRONG"}}."""

JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"label": {"type": "string", "enum": ["CORRECT", "WRONG"]}},
    "required": ["label"],
    "additionalProperties": False,
}

_LABEL_RE = re.compile(r"\b(CORRECT|WRONG)\b", re.IGNORECASE)
_OBJECT_RE = re.compile(r"\{[^{}]*\}", re.DOTALL)
_ABSTAIN_RE = re.compile(
    r"\b(not mentioned|no information|not (?:been )?(?:stated|specified|provided|discussed|available)"
    r"|(?:is|was|remains) unknown|^\s*unknown|(?:can ?not|can't|unable to) (?:be )?(?:determined|answer|tell|know)"
    r"|does not (?:say|mention)|doesn't (?:say|mention)|no (?:record|mention)|don't know|do not know)\b",
    re.IGNORECASE,
)
_ARTICLES = {"a", "an", "the"}


@dataclass(frozen=True)
class JudgeVerdict:
    """A judge's decision. ``label`` is CORRECT, WRONG or FAILED (no label could be read)."""

    score: int
    label: str
    reason: str
    raw: str = ""
    lm_result: LMResult | None = None

    @property
    def failed(self) -> bool:
        return self.label == "FAILED"


class Judge(Protocol):
    """Anything that scores a prediction against the gold answer."""

    def judge(self, question: str, gold: str, prediction: str) -> JudgeVerdict: ...


def parse_label(text: str) -> str | None:
    """CORRECT/WRONG from a judge reply: JSON, JSON inside prose, or exactly one bare label."""
    candidates = [text.strip()] + _OBJECT_RE.findall(text)
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except (json.JSONDecodeError, ValueError):
            continue
        raw = data.get("label") if isinstance(data, dict) else None
        if isinstance(raw, str):
            label = raw.strip().upper()
            if label in ("CORRECT", "WRONG"):
                return label
    labels = {m.upper() for m in _LABEL_RE.findall(text)}
    return labels.pop() if len(labels) == 1 else None


class LLMJudge:
    """mem0's LLM-as-judge over any :class:`LMClient`."""

    def __init__(self, lm: LMClient, *, prompt: str = JUDGE_PROMPT, max_tokens: int = 32) -> None:
        self.lm = lm
        self.prompt = prompt
        self.max_tokens = max_tokens

    def judge(self, question: str, gold: str, prediction: str) -> JudgeVerdict:
        """One chat call at temperature 0; LM errors propagate (a broken model is not a verdict)."""
        if not prediction.strip():
            return JudgeVerdict(0, "WRONG", "empty prediction; judge not called")
        message = self.prompt.format(question=question, gold=gold, prediction=prediction)
        result = self.lm.chat(
            [{"role": "user", "content": message}],
            max_tokens=self.max_tokens,
            temperature=0.0,
            json_schema=JUDGE_SCHEMA,
        )
        label = parse_label(result.text)
        if label is None:
            why = "reply cut off at max_tokens" if result.finish_reason == "length" else "no CORRECT/WRONG label"
            return JudgeVerdict(0, "FAILED", f"judge failure: {why}", result.text, result)
        return JudgeVerdict(int(label == "CORRECT"), label, f"LLM judge ({result.model})", result.text, result)


def is_abstention(text: str) -> bool:
    """Whether ``text`` says the information is not available ("Not mentioned", "unknown", ...)."""
    return bool(_ABSTAIN_RE.search(text))


class DeterministicJudge:
    """A model-free judge, in order: abstention, yes/no polarity, containment, dates, token F1.

    Dates decide when the gold has one: token overlap would accept "8 May 2023" for "7 May 2023".
    """

    def __init__(self, *, f1_threshold: float = 0.5) -> None:
        self.f1_threshold = f1_threshold

    def judge(self, question: str, gold: str, prediction: str) -> JudgeVerdict:
        if not prediction.strip():
            return self._verdict(False, "empty prediction")
        if is_abstention(gold) or is_abstention(prediction):
            both = is_abstention(gold) and is_abstention(prediction)
            return self._verdict(both, "both abstain" if both else "only one side abstains")
        gold_tokens = [t for t in normalize_tokens(gold) if t not in _ARTICLES]
        pred_tokens = [t for t in normalize_tokens(prediction) if t not in _ARTICLES]
        polarity = _polarity(gold_tokens), _polarity(pred_tokens)
        if None not in polarity:
            same = polarity[0] == polarity[1]
            return self._verdict(same, "same yes/no answer" if same else "opposite yes/no answer")
        if gold_tokens and _contains(pred_tokens, gold_tokens):
            return self._verdict(True, "prediction contains the gold answer")
        dates = dates_agree(gold, prediction)
        if dates is not None:
            return self._verdict(dates, "dates agree" if dates else "dates differ")
        f1 = token_f1(prediction, gold)
        ok = f1 >= self.f1_threshold
        return self._verdict(ok, f"token F1 {f1:.2f} {'>=' if ok else '<'} {self.f1_threshold}")

    @staticmethod
    def _verdict(ok: bool, reason: str) -> JudgeVerdict:
        return JudgeVerdict(int(ok), "CORRECT" if ok else "WRONG", f"deterministic: {reason}")


_DECISIVE_REASONS = ("both abstain", "only one side abstains", "same yes/no answer", "opposite yes/no answer",
                     "dates agree", "dates differ", "empty prediction")


class HybridJudge:
    """The deterministic judge where it is sure, the LLM judge only for what it cannot settle.

    Small local judges mislabel easy cases: measured on the mini dataset, the embedded 1.5B judge
    called 12 of 12 exact or near-exact matches ("Biscuit" vs "Biscuit", "Porto" vs "Porto") WRONG
    more often than not. So a prediction that contains the gold, an abstention, a yes/no or a date is
    decided by rule; the LLM is asked only about paraphrases the rules would reject (token F1 below
    threshold), where its generosity on topic is what the mem0 protocol wants.
    """

    def __init__(self, llm: LLMJudge, deterministic: DeterministicJudge | None = None) -> None:
        self.llm = llm
        self.deterministic = deterministic or DeterministicJudge()

    def judge(self, question: str, gold: str, prediction: str) -> JudgeVerdict:
        verdict = self.deterministic.judge(question, gold, prediction)
        if verdict.score == 1 or verdict.reason.removeprefix("deterministic: ") in _DECISIVE_REASONS:
            return verdict
        return self.llm.judge(question, gold, prediction)


#: The judge kinds a config's ``eval.judge`` may name.
JUDGE_KINDS: tuple[str, ...] = ("llm", "deterministic", "hybrid")


def make_judge(kind: str, lm: Any) -> "DeterministicJudge | LLMJudge | HybridJudge":
    """The judge of kind ``kind`` on ``lm`` — the one dispatch used by the traced judge op and MIPROv2's metric."""
    if kind == "deterministic":
        return DeterministicJudge()
    if kind == "llm":
        return LLMJudge(lm)
    if kind == "hybrid":
        return HybridJudge(LLMJudge(lm))
    raise ValueError(f"eval.judge: expected one of {JUDGE_KINDS}, got {kind!r}")


def _polarity(tokens: list[str]) -> str | None:
    """"yes"/"no" when an answer opens with one (within its first three tokens), else None."""
    return next((t for t in tokens[:3] if t in ("yes", "no")), None)


def _contains(haystack: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


def dates_agree(gold: str, prediction: str) -> bool | None:
    """None when the gold names no date; else whether the prediction names the same one(s)."""
    pred_dates = find_dates(prediction)
    windows = before_windows(gold)
    if windows:
        days = [day for day in (d.as_date() for d in pred_dates) if day is not None]
        return any(lo <= day <= hi for day in days for lo, hi in windows)
    gold_dates = find_dates(gold)
    if not gold_dates:
        return None
    return all(any(g.covers(p) for p in pred_dates) for g in gold_dates)
