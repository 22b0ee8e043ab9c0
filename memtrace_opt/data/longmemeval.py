"""LongMemEval loader (xiaowu0162/LongMemEval, MIT; hosted on HF only, so the user supplies the file).

Each LongMemEval item is one question over its own haystack of chat sessions, so each becomes a
:class:`Conversation` of those sessions (speakers ``user`` and ``assistant``) with a single QA.
Turns marked ``has_answer`` are the evidence; ids ending in ``_abs`` are abstention questions
(flag ``unanswerable``) and ``knowledge-update`` questions are flagged ``update`` so the mini set,
LoCoMo and LongMemEval can be sliced by the same flags.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memtrace_opt.data._fields import as_text, check_type, check_unique_ids, optional, read_json, require
from memtrace_opt.data.model import LONGMEMEVAL_TYPES, QA, Conversation, Dataset, Session, Turn, turn_id
from memtrace_opt.errors import DatasetError

__all__ = ["load_longmemeval"]

SPEAKERS = ("user", "assistant")


def load_longmemeval(path: str | Path) -> Dataset:
    """Load a LongMemEval json file (``longmemeval_s.json``, ``_m`` or ``_oracle``)."""
    source = str(path)
    raw = read_json(Path(path))
    check_type(raw, list, path=source, item="top level", what="the list of questions")
    warnings: list[str] = []
    conversations = tuple(_parse_item(entry, i, source, warnings) for i, entry in enumerate(raw))
    check_unique_ids(conversations, source, "question_id")
    return Dataset(name="longmemeval", source=source, conversations=conversations, warnings=warnings)


def _parse_item(raw: Any, i: int, path: str, warnings: list[str]) -> Conversation:
    check_type(raw, dict, path=path, item=f"item {i}", what="a question")
    qid = require(raw, "question_id", str, path=path, item=f"item {i}")
    item = f"item {i} ({qid})"
    qtype = require(raw, "question_type", str, path=path, item=item)
    if qtype not in LONGMEMEVAL_TYPES:
        warnings.append(f"{qid}/q0: unknown question_type {qtype!r}; kept as its category")
    question = require(raw, "question", str, path=path, item=item)
    answer = as_text(require(raw, "answer", (str, int, float), path=path, item=item))
    question_date = optional(raw, "question_date", str, path=path, item=item)
    dates = require(raw, "haystack_dates", list, path=path, item=item)
    sessions_raw = require(raw, "haystack_sessions", list, path=path, item=item)
    session_ids = optional(raw, "haystack_session_ids", list, path=path, item=item, default=None)
    if len(dates) != len(sessions_raw) or (session_ids is not None and len(session_ids) != len(sessions_raw)):
        raise DatasetError(
            path, item, f"haystack lists differ in length: {len(sessions_raw)} sessions, {len(dates)} dates"
            + (f", {len(session_ids)} session ids" if session_ids is not None else "")
        )
    sessions = []
    evidence: list[str] = []
    for s, turns_raw in enumerate(sessions_raw, 1):
        where = f"{item}: haystack_sessions[{s - 1}]"
        date = check_type(dates[s - 1], str, path=path, item=item, what=f"haystack_dates[{s - 1}]")
        check_type(turns_raw, list, path=path, item=where, what="a session")
        turns = []
        for t, turn in enumerate(turns_raw, 1):
            turn_where = f"{where}[{t - 1}]"
            check_type(turn, dict, path=path, item=turn_where, what="a turn")
            role = require(turn, "role", str, path=path, item=turn_where)
            content = require(turn, "content", str, path=path, item=turn_where)
            if optional(turn, "has_answer", bool, path=path, item=turn_where, default=False):
                evidence.append(turn_id(s, t))
            turns.append(Turn(id=turn_id(s, t), speaker=role, text=content, session=s, index=t, date=date))
        source_id = as_text(session_ids[s - 1]) if session_ids is not None else None
        sessions.append(Session(index=s, date_time=date, turns=tuple(turns), source_id=source_id))
    qa = QA(
        id=f"{qid}/q0",
        question=question,
        answer=answer,
        category=qtype,
        evidence=tuple(evidence),
        flags=_flags(qid, qtype, bool(evidence)),
        question_date=question_date,
    )
    return Conversation(id=qid, speakers=SPEAKERS, sessions=tuple(sessions), qa=(qa,))


def _flags(qid: str, qtype: str, has_evidence: bool) -> frozenset[str]:
    """Abstention questions have no evidence by design; any other question without it is flagged."""
    flags = set()
    if qid.endswith("_abs"):
        flags.add("unanswerable")
    elif not has_evidence:
        flags.add("no_evidence")
    if qtype == "knowledge-update":
        flags.add("update")
    return frozenset(flags)
