"""The data model every loader produces: conversations of dated sessions, and questions about them.

One shape for LoCoMo, LongMemEval and the bundled mini set means memory systems, attribution and
the optimizer never special-case a benchmark. Records are frozen: a slice of a dataset
(:func:`memtrace_opt.data.select`) is a new object, never an edit of the loaded one.

Turn ids are ``D{session}:{turn}`` (1-based both), the convention of LoCoMo's ``dia_id`` and its
evidence lists; every loader normalises evidence to exactly this form so evidence can be looked
up with :meth:`Conversation.turn`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property

__all__ = [
    "ADVERSARIAL",
    "CATEGORIES",
    "FLAGS",
    "LOCOMO_CATEGORIES",
    "LONGMEMEVAL_TYPES",
    "QA",
    "Conversation",
    "Dataset",
    "Session",
    "Turn",
    "turn_id",
]

#: Official LoCoMo category ids (mem0's maintainers published a different, wrong map).
LOCOMO_CATEGORIES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
ADVERSARIAL = "adversarial"
LONGMEMEVAL_TYPES: tuple[str, ...] = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "temporal-reasoning",
    "knowledge-update",
    "multi-session",
)
#: Every category name a QA may carry, in report order.
CATEGORIES: tuple[str, ...] = tuple(LOCOMO_CATEGORIES.values()) + LONGMEMEVAL_TYPES

#: Flags a QA may carry. ``unscored`` is what :meth:`Conversation.scored_qa` filters on.
FLAGS: frozenset[str] = frozenset(
    {
        "adversarial",  # LoCoMo category 5: the premise is false; the right reply is an abstention
        "unscored",  # excluded from scoring (category 5 unless include_adversarial)
        "audit_wrong_gold",  # the audit file says the gold answer is wrong (corrected_answer set)
        "audit_wrong_evidence",  # the audit file says only the cited evidence is wrong
        "no_evidence",  # the source gives no evidence at all
        "unresolved_evidence",  # some evidence reference names no existing turn
        "unanswerable",  # the conversation does not contain the answer (abstention expected)
        "update",  # the asked-about fact changes across sessions; the latest value is gold
        "deletion",  # the asked-about fact was retracted later in the conversation
    }
)


def turn_id(session: int, index: int) -> str:
    """The canonical id of turn ``index`` (1-based) of session ``session`` (1-based)."""
    return f"D{session}:{index}"


@dataclass(frozen=True)
class Turn:
    """One utterance. ``text`` already carries `` [shares <caption>]`` when an image was shared,
    so systems that only read text still see what the image showed."""

    id: str
    speaker: str
    text: str
    session: int
    index: int
    date: str
    image_caption: str | None = None


@dataclass(frozen=True)
class Session:
    """A dated block of turns. ``date_time`` is kept verbatim (formats differ per benchmark);
    ``source_id`` is the benchmark's own session id where it has one (LongMemEval)."""

    index: int
    date_time: str
    turns: tuple[Turn, ...]
    source_id: str | None = None


@dataclass(frozen=True)
class QA:
    """A question with its gold answer and the turns that support it.

    ``answer`` is the gold the benchmark ships; ``corrected_answer`` is the audit's fix when the
    gold is known to be wrong (flag ``audit_wrong_gold``), so a run can score either way.
    For LoCoMo category 5 ``answer`` is the abstention and ``adversarial_answer`` the trap.
    """

    id: str
    question: str
    answer: str
    category: str
    category_id: int | None = None
    evidence: tuple[str, ...] = ()
    flags: frozenset[str] = frozenset()
    corrected_answer: str | None = None
    question_date: str | None = None
    corrected_evidence: tuple[str, ...] | None = None
    adversarial_answer: str | None = None

    @property
    def scored(self) -> bool:
        """Whether the question counts in accuracy (not flagged ``unscored``)."""
        return "unscored" not in self.flags

    def gold(self, *, use_audit: bool = False) -> str:
        """The gold answer; with ``use_audit`` the audit's correction when there is one."""
        if use_audit and self.corrected_answer is not None:
            return self.corrected_answer
        return self.answer


@dataclass(frozen=True)
class Conversation:
    """A multi-session dialogue between ``speakers`` and the questions asked about it."""

    id: str
    speakers: tuple[str, ...]
    sessions: tuple[Session, ...]
    qa: tuple[QA, ...]

    @cached_property
    def _turn_index(self) -> dict[str, Turn]:
        return {t.id: t for s in self.sessions for t in s.turns}

    def turn(self, id: str) -> Turn:
        """The turn with canonical id ``id`` (``D3:7``); KeyError naming the conversation if absent."""
        try:
            return self._turn_index[id]
        except KeyError:
            raise KeyError(f"conversation {self.id} has no turn {id!r}") from None

    def has_turn(self, id: str) -> bool:
        """Whether ``id`` names a turn of this conversation."""
        return id in self._turn_index

    def turns(self) -> Iterator[Turn]:
        """All turns in conversation order (session by session)."""
        for session in self.sessions:
            yield from session.turns

    def scored_qa(self) -> tuple[QA, ...]:
        """The questions that count in accuracy (category 5 is left out unless asked for)."""
        return tuple(q for q in self.qa if q.scored)


@dataclass(frozen=True)
class Dataset:
    """A loaded benchmark. ``warnings`` lists recoverable data problems (each names its QA id)."""

    name: str
    source: str
    conversations: tuple[Conversation, ...]
    warnings: list[str] = field(default_factory=list)

    def conversation(self, id: str) -> Conversation:
        """The conversation with ``id``; KeyError listing the known ids if absent."""
        for conv in self.conversations:
            if conv.id == id:
                return conv
        known = ", ".join(c.id for c in self.conversations)
        raise KeyError(f"dataset {self.name} has no conversation {id!r} (known: {known})")

    def all_qa(self) -> Iterator[tuple[Conversation, QA]]:
        """Every (conversation, question) pair, in order."""
        for conv in self.conversations:
            for qa in conv.qa:
                yield conv, qa
