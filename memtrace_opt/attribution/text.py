"""Text views of graph values and the token normalisation every content test shares.

Variables hold whatever a system produced: a message dict, a list of extracted facts, a memory
unit (string or ``{"text", ...}`` record), a retrieved context (list of records). Attribution only
asks "does this value still carry that piece of information?", so every value is reduced to a list
of *items* (one per fact/record) and each item to plain text. Tokens are lower-cased,
punctuation-stripped, stopword-free and Porter-stemmed, so "adopted" matches "adopt" and
"Biscuit's" matches "biscuit".
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Iterable

__all__ = ["METADATA_KEYS", "STOPWORDS", "content_tokens", "value_items", "value_text", "short"]

#: Record fields that identify or date a record rather than say something.
METADATA_KEYS = frozenset({"date", "cell", "unit", "id", "memory_id", "turn_id", "turn_ids", "topic", "score", "segment",
                           "event", "target", "hash", "created_at", "updated_at", "session", "name", "old_memory"})
_WORD = re.compile(r"[a-z0-9]+")
_MONTHS = {
    "jan": "january", "feb": "february", "mar": "march", "apr": "april", "jun": "june", "jul": "july",
    "aug": "august", "sep": "september", "sept": "september", "oct": "october", "nov": "november",
    "dec": "december",
}

STOPWORDS: frozenset[str] = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just let me more most
    my myself no nor not now of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your yours
    yourself yourselves also oh hey hi hello yes yeah ok okay really so wow thanks thank great nice lovely
    just like well get got go going gonna im ive youre thats dont didnt its s t d ll m re ve""".split()
)


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    from nltk.stem import PorterStemmer

    return PorterStemmer()


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    word = _MONTHS.get(word, word)
    return word if word.isdigit() else _stemmer().stem(word)


def content_tokens(text: str, *, drop: Iterable[str] = ()) -> frozenset[str]:
    """The normalised content words of ``text`` (stopwords and the words in ``drop`` removed)."""
    tokens = _tokens(text)
    dropped = {_stem(w) for d in drop for w in _WORD.findall(d.lower())}
    return tokens - dropped if dropped else tokens


@lru_cache(maxsize=65536)
def _tokens(text: str) -> frozenset[str]:
    words = (w for w in _WORD.findall(text.lower().replace("'s ", " ")) if w not in STOPWORDS)
    return frozenset(_stem(w) for w in words)


def _item_text(item: Any) -> str:
    if item is None:
        return ""
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        text = item.get("text")
        if isinstance(text, str):
            return text
        parts = (_item_text(v) for k, v in item.items() if k not in METADATA_KEYS and isinstance(v, (str, list, dict)))
        return "\n".join(p for p in parts if p)
    if isinstance(item, (list, tuple)):
        return "\n".join(t for t in (_item_text(x) for x in item) if t)
    return str(item)


def value_items(value: Any) -> list[str]:
    """A value as the texts of its items: one per list element, else one for the whole value.

    A record (dict) is one item: its ``text``, or else all its non-metadata strings joined
    (an EverMemOS cell's episode, facts and foresight together). A memory-update event marked
    ``NONE`` or ``DELETE`` carries nothing forward (the decision chose not to store its text), so it
    is no item: a fact that only survives as such an event was dropped by that decision.
    """
    if isinstance(value, (list, tuple)):
        return [_item_text(x) for x in value if not _carries_nothing(x)]
    return [_item_text(value)]


def _carries_nothing(item: Any) -> bool:
    return isinstance(item, dict) and str(item.get("event", "")).upper() in ("NONE", "DELETE")


def value_text(value: Any) -> str:
    """A value as one text (items joined by newlines)."""
    return "\n".join(t for t in value_items(value) if t)


def short(value: Any, limit: int = 160) -> str:
    """A one-line preview of a value, for prompts and reasons."""
    text = " ".join(value_text(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
