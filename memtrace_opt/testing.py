"""Scripted stand-ins for the LM and the embedder, for fast, offline, deterministic tests of a memory system.

Public, and what the project's own tests use: test a system you wrote (its ops, its graph, its
attribution, a round of optimization) without loading a model. Never for a figure you report.

``ScriptedLM`` answers by rules: the first rule whose regex matches the prompt (all message
contents joined by blank lines) gives the reply, either a fixed text or a callable of
``(messages, match) -> str``. A prompt no rule matches raises :class:`UnscriptedPrompt` unless a
``default`` reply is given, so a test fails loudly when the system sends a prompt it did not expect
(the GEPA habit of "fail on any prompt you have not seen"). Every call is kept in ``calls``.

``HashEmbedder`` replaces MiniLM in unit tests: bag-of-words vectors hashed into 384 dims,
L2-normalized, so texts sharing words are near each other and results never vary between runs.

Example::

    lm = ScriptedLM([(r"Extract", '{"facts": ["likes tea"]}'), (r"Question: (.+)\\n", lambda m, mt: mt[1])])
    lm.chat([{"role": "user", "content": "Extract facts ..."}]).text
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memtrace_opt.lm.base import LMResult

__all__ = ["Call", "HashEmbedder", "ScriptedLM", "UnscriptedPrompt", "judge_lm", "make_conversation", "prompt_text"]

Reply = str | Callable[[list[dict[str, str]], re.Match[str]], str]


class UnscriptedPrompt(AssertionError):
    """The system sent a prompt no rule of the scripted LM covers."""


@dataclass
class Call:
    """One recorded call: the messages, the keyword arguments and the reply given."""

    messages: list[dict[str, str]]
    kwargs: dict[str, Any]
    reply: str

    @property
    def prompt(self) -> str:
        return prompt_text(self.messages)


def prompt_text(messages: Sequence[dict[str, str]]) -> str:
    """What rules match against: every message content, joined by blank lines."""
    return "\n\n".join(str(m.get("content", "")) for m in messages)


@dataclass
class ScriptedLM:
    """An :class:`~memtrace_opt.lm.base.LMClient` that replies by regex rules and counts its calls.

    ``rules`` are ``(pattern, reply)`` pairs tried in order (``re.S`` so ``.`` spans lines);
    ``default`` answers unmatched prompts (None: raise). Token counts are word counts, so usage
    totals in tests are non-zero and reproducible.
    """

    rules: Sequence[tuple[str, Reply]] = ()
    default: Reply | None = None
    model_id: str = "scripted/lm"
    calls: list[Call] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._compiled = [(re.compile(p, re.S), r) for p, r in self.rules]

    @property
    def n_calls(self) -> int:
        return len(self.calls)

    def calls_matching(self, pattern: str) -> list[Call]:
        """The recorded calls whose prompt matches ``pattern``."""
        rx = re.compile(pattern, re.S)
        return [c for c in self.calls if rx.search(c.prompt)]

    def chat(self, messages: list[dict[str, str]], **kwargs: Any) -> LMResult:
        text = prompt_text(messages)
        reply = self._reply(messages, text)
        self.calls.append(Call(list(messages), dict(kwargs), reply))
        return LMResult(text=reply, model=self.model_id, prompt_tokens=len(text.split()),
                        completion_tokens=len(reply.split()), latency_s=0.0)

    def _reply(self, messages: list[dict[str, str]], text: str) -> str:
        for rx, reply in self._compiled:
            match = rx.search(text)
            if match is not None:
                return reply(messages, match) if callable(reply) else reply
        if self.default is None:
            raise UnscriptedPrompt(f"{self.model_id}: no rule matches prompt:\n{text[:600]}")
        if callable(self.default):
            return self.default(messages, re.match("", ""))  # type: ignore[arg-type]
        return self.default


def judge_lm(correct: Callable[[str, str], bool] | None = None, model_id: str = "scripted/judge") -> ScriptedLM:
    """A scripted judge replying ``{"label": "CORRECT"|"WRONG"}``.

    ``correct(gold, prediction)`` decides (default: the gold's lower-cased text occurs in the
    prediction). Gold and prediction are read from the ``Gold answer:`` and ``Generated answer:``
    lines of the judge prompt (the last of each: its worked example comes first); none → WRONG.
    """
    decide = correct or (lambda gold, pred: gold.strip().lower() in pred.strip().lower())

    def reply(messages: list[dict[str, str]], _m: re.Match[str]) -> str:
        text = prompt_text(messages)
        gold = re.findall(r"Gold(?:en)? answer:[ \t]*(.*)", text, re.I)
        pred = re.findall(r"(?:Generated|Predicted) answer:[ \t]*(.*)", text, re.I)
        ok = bool(gold and pred and decide(gold[-1], pred[-1]))
        return '{"label": "%s"}' % ("CORRECT" if ok else "WRONG")

    return ScriptedLM([(r".", reply)], model_id=model_id)


class HashEmbedder:
    """Deterministic bag-of-words embeddings (384 dims, unit length) — for unit tests only."""

    model_id = "test/hash-embedder"
    dim = 384

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                h = int.from_bytes(hashlib.md5(word.encode()).digest()[:4], "little")
                out[i, h % self.dim] += 1.0
            norm = float(np.linalg.norm(out[i]))
            out[i] = out[i] / norm if norm else out[i]
            if not norm:
                out[i, 0] = 1.0
        return out

    def embed_one(self, text: str) -> np.ndarray:
        row: np.ndarray = self.embed([text])[0]
        return row


def make_conversation(sessions: Sequence[Sequence[tuple[str, str]]], qas: Sequence[dict[str, Any]] = (),
                      conv_id: str = "c1") -> Any:
    """A small :class:`~memtrace_opt.data.Conversation` from ``[[(speaker, text), ...], ...]``.

    Session ``s`` is dated ``"1 May 2024"``, ``"2 May 2024"``, ...; each qa dict needs ``question``
    and ``answer`` and may give ``evidence`` (turn ids), ``category``, ``flags``.
    """
    from memtrace_opt.data import QA, Conversation, Session, Turn

    built = []
    for s, turns in enumerate(sessions, start=1):
        date = f"{s} May 2024"
        built.append(Session(s, date, tuple(Turn(f"D{s}:{t}", sp, text, s, t, date)
                                             for t, (sp, text) in enumerate(turns, start=1))))
    questions = tuple(
        QA(id=f"{conv_id}/q{i}", question=q["question"], answer=q["answer"], category=q.get("category", "single-hop"),
           evidence=tuple(q.get("evidence", ())), flags=frozenset(q.get("flags", ())))
        for i, q in enumerate(qas)
    )
    speakers = tuple(dict.fromkeys(sp for turns in sessions for sp, _ in turns)) or ("A", "B")
    return Conversation(conv_id, speakers, tuple(built), questions)
