""""Does this value still hold that piece of evidence?" — the content test tracing is built on.

Tracing follows a fact (one evidence message) through extraction, memory units, updates, deletions
and retrieval; at every step it must decide whether a value still carries the fact. That decision
is a pluggable :class:`ContentJudge`:

- :class:`TokenJudge` is deterministic and free: normalised overlap of the gold answer's tokens
  (when the evidence message contains them) or, failing that, of the evidence's key tokens. It says
  ``None`` (inconclusive) in the grey zone instead of guessing, unless asked to decide.
- :class:`LLMContentJudge` asks an LM (JSON-schema constrained) and caches by (fact, text).
- :class:`CascadeJudge` uses the token test where it is conclusive and the LM only in the grey zone.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Mapping, Protocol

from memtrace_opt.attribution.text import content_tokens, value_items, value_text
from memtrace_opt.lm.base import LMClient

__all__ = ["CascadeJudge", "ContentJudge", "Fact", "Holding", "LLMContentJudge", "TokenJudge", "make_fact",
           "meaning_changed", "message_source", "related", "said_by_other", "without_other_speakers"]


@dataclass(frozen=True)
class Fact:
    """One piece of information the answer needs: an evidence message and the tokens that identify it.

    ``gold_tokens`` are the gold answer's tokens that this message itself contains (empty when the
    answer is inferred, e.g. a date computed from "last Saturday"); ``key_tokens`` weight the
    message's content words, question and gold words double.
    """

    id: str
    text: str
    question: str
    gold: str
    gold_tokens: frozenset[str]
    key_tokens: Mapping[str, float]
    drop: frozenset[str] = frozenset()
    #: Who said the evidence, and the conversation's other speakers: a line another speaker said
    #: ("Melanie: I ran a charity race too") does not carry what this speaker said.
    speaker: str | None = None
    others: tuple[str, ...] = ()
    #: When the evidence happened (years it names, or its session's year when it speaks relatively:
    #: "this month") and whether it is negated: an item that keeps the words but moves the event to
    #: another year, or flips the negation, no longer carries the fact.
    years: frozenset[str] = frozenset()
    negated: bool = False


def make_fact(var_id: str, value: Any, question: str, gold: str, *, speakers: tuple[str, ...] = ()) -> Fact:
    """The fact carried by evidence variable ``var_id`` (usually a ``message:<turn>`` variable)."""
    speaker = value.get("speaker") if isinstance(value, dict) else None
    drop = tuple(speakers) + ((speaker,) if isinstance(speaker, str) else ())
    text = value_text(value)
    msg = content_tokens(text, drop=drop)
    q, g = content_tokens(question, drop=drop), content_tokens(gold, drop=drop)
    weights = {t: (2.0 if related(t, q | g) else 1.0) for t in msg}
    own = speaker if isinstance(speaker, str) and speaker else None
    others = tuple(s for s in speakers if s and s != own) if own else ()
    years = set(_YEAR.findall(text))
    date = value.get("date") if isinstance(value, dict) else None
    if _RELATIVE.search(text) and isinstance(date, str):
        years |= set(_YEAR.findall(date))
    return Fact(var_id, text, question, gold, frozenset(g & msg), weights, content_tokens(" ".join(drop)), own, others,
                frozenset(years), bool(_NEGATION.search(text)))


def related(token: str, words: frozenset[str]) -> bool:
    """Whether ``token`` is one of ``words`` or shares its stem with one beyond the stemmer's reach.

    Porter stems a word's forms apart when their endings differ ("allergic" -> ``allerg``, "allergies"
    -> ``allergi``), so a question about "her allergies" would not mark the evidence's "allergic" as
    the word it asks about. One stem that begins the other, five letters or more, counts as the same
    word here; it only decides which of the evidence's words the question is about, never whether a
    value holds a word.
    """
    return token in words or any(len(short) >= 5 and long.startswith(short)
                                 for short, long in (sorted((token, w), key=len) for w in words))


_YEAR = re.compile(r"\b(1[89]\d\d|20\d\d)\b")
_RELATIVE = re.compile(r"\b(?:today|yesterday|tonight|tomorrow|this (?:week|month|year|weekend|morning)|last "
                       r"(?:night|week|weekend|month|year|\w+day)|recently|just|ago|next (?:week|month|year))\b", re.I)
_NEGATION = re.compile(r"\b(?:not|never|no longer|didn't|don't|doesn't|won't|wasn't|isn't|haven't|hasn't|can't)\b",
                       re.I)


def meaning_changed(fact: Fact, text: str) -> str | None:
    """Why ``text``, though it may share the evidence's words, says something else (None if it does not):
    it places the event in a year the evidence rules out, or it flips the evidence's negation while
    keeping its content. Relative dates resolved to the right year ("yesterday" → "7 May 2023") pass."""
    shared = content_tokens(text) & set(fact.key_tokens)
    if len(shared) < 2:
        return None
    years = set(_YEAR.findall(text))
    if fact.years and years and not years & fact.years:
        return f"moves the event to {sorted(years)} (evidence: {sorted(fact.years)})"
    if bool(_NEGATION.search(text)) != fact.negated:
        return "flips the evidence's negation"
    return None


def spoken(value: Any) -> Any:
    """``value`` with each record that names its speaker read as the line ``"<speaker>: <text>"``.

    A stored record keeps who said it apart from what was said (``{"speaker": "Maria", "text": "We
    made pizza!"}``), while a rendered context writes the two as one line. Read by its text alone,
    a record whose speaker was rewritten (John's line now Maria's, or "It is not true that John")
    would still carry John's fact in the store and lose it only in the rendered context, and the
    loss would be blamed on retrieval instead of on the op that wrote the record.
    """
    if isinstance(value, (list, tuple)):
        return [spoken(x) for x in value]
    if isinstance(value, Mapping):
        who, text = value.get("speaker"), value.get("text")
        if isinstance(who, str) and who.strip() and isinstance(text, str) and not text.startswith(f"{who}:"):
            return {**value, "text": f"{who}: {text}"}
    return value


def said_by_other(fact: Fact, line: str) -> bool:
    """Whether ``line`` is a verbatim line of another speaker ("<other>: ...") than the fact's."""
    if not fact.others or ":" not in line:
        return False
    return line.lstrip().split(":", 1)[0].strip() in fact.others


def without_other_speakers(fact: Fact, text: str) -> str:
    """``text`` without the lines that cannot carry the fact: verbatim lines of other speakers, and lines
    that keep its words but change its meaning (:func:`meaning_changed`). A chunk keeps its other lines."""
    return "\n".join(line for line in text.splitlines()
                     if not said_by_other(fact, line) and meaning_changed(fact, line) is None)


@dataclass(frozen=True)
class Holding:
    """A content verdict: ``holds`` True/False, or None when the judge cannot tell."""

    holds: bool | None
    score: float
    reason: str
    method: str = "tokens"


class ContentJudge(Protocol):
    """Decides whether a graph value still carries a fact."""

    def holds(self, fact: Fact, value: Any) -> Holding: ...


@dataclass
class TokenJudge:
    """Deterministic token-overlap test. ``decide`` resolves the grey zone by score (no ``None``)."""

    hold_at: float = 0.6
    miss_below: float = 0.25
    decide: bool = True

    def holds(self, fact: Fact, value: Any) -> Holding:
        sourced = from_source(fact, value)
        if sourced is not None and not sourced:
            return Holding(False, 0.0, f"no record from the evidence turn {turn_of(fact.id)} (records name their turns)")
        items = [t for t in (without_other_speakers(fact, i)
                             for i in value_items(spoken(value if sourced is None else sourced)) if i) if t.strip()]
        if not items:
            return Holding(False, 0.0, "empty value, or only other speakers' lines")
        if fact.gold_tokens:
            return self._by_gold(fact, items)
        return self._by_key(fact, items)

    def _by_gold(self, fact: Fact, items: list[str]) -> Holding:
        """Gold-token coverage, counted in full only where the item also shares a key word of the
        evidence: "Biscuit says hello" does not carry "I adopted a cat called Biscuit" for
        "What is the name of Priya's cat?"."""
        others = {t: w for t, w in fact.key_tokens.items() if t not in fact.gold_tokens}
        support = {t for t, w in others.items() if w > 1.0} or set(others)  # question words when there are any
        # A paraphrase may keep the question's words ("the road trip") and drop the turn's own ("thanks
        # for asking"): the question's words tie an item to it too, but only one that carries two gold
        # words or more; a single common answer word ("month") plus the question's topic is any turn.
        asked = (content_tokens(fact.question) - fact.drop) - fact.gold_tokens
        best, supported_items = 0.0, []
        for text in items:
            toks = content_tokens(text)
            ok = not support or bool(toks & support) or (bool(toks & asked) and len(toks & fact.gold_tokens) >= 2)
            if ok:
                supported_items.append(text)
            best = max(best, _share(fact.gold_tokens, toks) * (1.0 if ok else 0.3))
        # Items count jointly only when each is itself about the question: a fact split into
        # "Adopted a cat" and "Grey tabby called Biscuit" no longer says the cat is called Biscuit.
        joined = _share(fact.gold_tokens, content_tokens("\n".join(supported_items))) * 0.9
        score = max(best, joined)
        return self._verdict(score, f"gold tokens {sorted(fact.gold_tokens)} covered {score:.2f}")

    def _by_key(self, fact: Fact, items: list[str]) -> Holding:
        total = sum(fact.key_tokens.values()) or 1.0
        best = 0.0
        for text in items:
            toks = content_tokens(text) - fact.drop
            overlap = toks & fact.key_tokens.keys()
            recall = sum(fact.key_tokens[t] for t in overlap) / total
            relevant = any(fact.key_tokens[t] > 1.0 for t in overlap)
            precision = len(overlap) / len(toks) if toks and len(overlap) >= 2 and relevant else 0.0
            best = max(best, recall, 0.8 * precision)
        return self._verdict(best, f"evidence key tokens covered {best:.2f}")

    def _verdict(self, score: float, reason: str) -> Holding:
        if score >= self.hold_at:
            return Holding(True, score, reason)
        if score < self.miss_below:
            return Holding(False, score, reason)
        if self.decide:
            return Holding(score >= (self.hold_at + self.miss_below) / 2, score, reason + " (grey zone)")
        return Holding(None, score, reason + " (inconclusive)")


def turn_of(fact_id: str) -> str | None:
    """The dialogue turn a fact's evidence message is (``message:D1:8@1`` → ``D1:8``), else None."""
    name = fact_id.split("@", 1)[0]
    return name.removeprefix("message:") if name.startswith("message:") else None


def message_source(fact_id: str, value: Any) -> dict[str, str]:
    """Who said an evidence message, what, when and in which turn (the fields a record built to carry it
    should take from it); empty fields are left out."""
    if not isinstance(value, dict):
        return {"turn_id": turn_of(fact_id) or ""} if turn_of(fact_id) else {}
    out = {"speaker": value.get("speaker"), "text": value.get("text"),
           "date": value.get("date") or value.get("date_time"), "turn_id": value.get("turn_id") or turn_of(fact_id)}
    return {k: str(v) for k, v in out.items() if v}


def from_source(fact: Fact, value: Any) -> list[Any] | None:
    """Provenance before content: when every record of a list names the turn(s) it came from (``turn_id``
    or ``turn_ids``: Long-Context's context, RAG documents, EverMemOS cells), only the records from the
    fact's own turn can carry it — a later line that merely shares the gold word (another person's
    pendant) does not. None when the value records no provenance (content decides alone)."""
    turn = turn_of(fact.id)
    if turn is None or not isinstance(value, (list, tuple)) or not value:
        return None
    if not all(isinstance(x, Mapping) and ("turn_id" in x or "turn_ids" in x) for x in value):
        return None
    return [x for x in value if x.get("turn_id") == turn or turn in (x.get("turn_ids") or ())]


def _share(wanted: frozenset[str], have: frozenset[str]) -> float:
    return len(wanted & have) / len(wanted) if wanted else 0.0


HOLDS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reason": {"type": "string"}, "holds": {"type": "boolean"}},
    "required": ["reason", "holds"],
}

HOLDS_PROMPT = """You check whether a piece of stored memory still carries a specific piece of information.
Question: {question}
Gold answer: {gold}
Evidence (the original message): {evidence}
Memory text:
{text}

Does the memory text carry the information of the evidence that is needed to answer the question
(same meaning counts; paraphrase is fine)? Reply as JSON {{"reason": "<one sentence>", "holds": true|false}}."""


class LLMContentJudge:
    """Asks ``lm`` whether a value holds a fact; results are cached by (fact id, text)."""

    def __init__(self, lm: LMClient, *, max_chars: int = 2400) -> None:
        self.lm = lm
        self.max_chars = max_chars
        self._cache: dict[tuple[str, str], Holding] = {}

    def holds(self, fact: Fact, value: Any) -> Holding:
        text = value_text(spoken(value))[: self.max_chars]
        key = (fact.id, text)
        if key not in self._cache:
            self._cache[key] = self._ask(fact, text)
        return self._cache[key]

    def _ask(self, fact: Fact, text: str) -> Holding:
        if not text.strip():
            return Holding(False, 0.0, "empty value", "llm")
        prompt = HOLDS_PROMPT.format(question=fact.question, gold=fact.gold, evidence=fact.text, text=text)
        reply = self.lm.chat([{"role": "user", "content": prompt}], max_tokens=160, temperature=0.0,
                             json_schema=HOLDS_SCHEMA)
        verdict = parse_bool_field(reply.text, "holds")
        if verdict is None:
            return Holding(None, 0.5, f"unparsable content-judge reply {reply.text[:80]!r}", "llm")
        return Holding(verdict, 1.0 if verdict else 0.0, _reason(reply.text), "llm")


def parse_bool_field(text: str, field: str) -> bool | None:
    """``field`` of a JSON object in ``text`` as a bool; tolerant of fences, prose and yes/no strings."""
    obj = parse_json_object(text)
    if obj is not None and field in obj:
        raw = obj[field]
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in ("true", "yes", "false", "no"):
            return raw.strip().lower() in ("true", "yes")
    m = re.search(rf'"?{field}"?\s*[:=]\s*"?(true|false|yes|no)', text, re.IGNORECASE)
    return m.group(1).lower() in ("true", "yes") if m else None


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (code fences and surrounding prose allowed), or None."""
    start = text.find("{")
    while start != -1:
        depth = 0
        for i in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                try:
                    obj = json.loads(text[start: i + 1])
                except json.JSONDecodeError:
                    break
                return obj if isinstance(obj, dict) else None
        start = text.find("{", start + 1)
    return None


def _reason(text: str) -> str:
    obj = parse_json_object(text) or {}
    return str(obj.get("reason") or obj.get("explanation") or "")[:300]


@dataclass
class CascadeJudge:
    """The token test where it is conclusive; the LM judge only in its grey zone."""

    tokens: TokenJudge
    llm: ContentJudge | None = None

    def holds(self, fact: Fact, value: Any) -> Holding:
        quick = TokenJudge(self.tokens.hold_at, self.tokens.miss_below, decide=False).holds(fact, value)
        if quick.holds is not None or self.llm is None:
            return quick if quick.holds is not None else self.tokens.holds(fact, value)
        slow = self.llm.holds(fact, value)
        return slow if slow.holds is not None else self.tokens.holds(fact, value)
