"""The bundled mini dataset and its (deliberately strict) loader.

LoCoMo cannot ship with the project (CC BY-NC) and a full conversation takes hours on a CPU, so
the quickstart runs on nine short conversations written for this project (``mini/mini.json``).
The format is a plain transcription of the data model; users may write their own files in it.
Unlike the benchmark loaders this one tolerates nothing: every evidence id must name a turn,
every flag and category must be known, so a typo in a hand-written file fails loudly.

Format (``"format": "memtrace-mini/1"``)::

    {"name": str, "conversations": [{"id": str, "speakers": [str, str],
      "sessions": [{"date_time": "7:30 pm on 4 March, 2024", "turns": [{"speaker", "text"}]}],
      "qa": [{"question", "answer", "category", "evidence": ["D1:2"], "flags"?: [..],
              "question_date"?: str}]}]}
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from memtrace_opt.data._fields import check_type, optional, read_json, require
from memtrace_opt.data.model import CATEGORIES, FLAGS, QA, Conversation, Dataset, Session, Turn, turn_id
from memtrace_opt.errors import DatasetError

__all__ = ["MINI_FORMAT", "bundled_path", "load_mini"]

MINI_FORMAT = "memtrace-mini/1"


def bundled_path() -> Path:
    """The mini dataset shipped as package data."""
    return Path(str(resources.files("memtrace_opt.data") / "mini" / "mini.json"))


def load_mini(path: str | Path | None = None) -> Dataset:
    """Load the bundled mini dataset, or a file in the same format."""
    p = Path(path) if path is not None else bundled_path()
    source = str(p)
    raw = read_json(p)
    check_type(raw, dict, path=source, item="top level", what="the dataset")
    fmt = require(raw, "format", str, path=source, item="top level")
    if fmt != MINI_FORMAT:
        raise DatasetError(source, "top level", f"format {fmt!r} is not {MINI_FORMAT!r}")
    name = require(raw, "name", str, path=source, item="top level")
    convs_raw = require(raw, "conversations", list, path=source, item="top level")
    conversations = tuple(_parse_conversation(c, i, source) for i, c in enumerate(convs_raw))
    ids = [c.id for c in conversations]
    if len(set(ids)) != len(ids):
        raise DatasetError(source, "conversations", f"duplicate conversation ids in {ids}")
    return Dataset(name=name, source=source, conversations=conversations, warnings=[])


def _parse_conversation(raw: Any, ci: int, path: str) -> Conversation:
    check_type(raw, dict, path=path, item=f"conversation {ci}", what="a conversation")
    conv_id = require(raw, "id", str, path=path, item=f"conversation {ci}")
    item = f"conversation {ci} ({conv_id})"
    speakers = tuple(require(raw, "speakers", list, path=path, item=item))
    for s in speakers:
        check_type(s, str, path=path, item=item, what="a speaker")
    sessions = []
    for si, session in enumerate(require(raw, "sessions", list, path=path, item=item), 1):
        where = f"{item}: sessions[{si - 1}]"
        check_type(session, dict, path=path, item=where, what="a session")
        date = require(session, "date_time", str, path=path, item=where)
        turns = []
        for ti, turn in enumerate(require(session, "turns", list, path=path, item=where), 1):
            tw = f"{where}: turns[{ti - 1}]"
            check_type(turn, dict, path=path, item=tw, what="a turn")
            speaker = require(turn, "speaker", str, path=path, item=tw)
            if speaker not in speakers:
                raise DatasetError(path, tw, f"speaker {speaker!r} is not one of {list(speakers)}")
            text = require(turn, "text", str, path=path, item=tw)
            turns.append(Turn(id=turn_id(si, ti), speaker=speaker, text=text, session=si, index=ti, date=date))
        sessions.append(Session(index=si, date_time=date, turns=tuple(turns)))
    turn_ids = {t.id for s in sessions for t in s.turns}
    qa_raw = require(raw, "qa", list, path=path, item=item)
    qa = tuple(_parse_qa(q, qi, conv_id, f"{item}: qa[{qi}]", path, turn_ids) for qi, q in enumerate(qa_raw))
    return Conversation(id=conv_id, speakers=speakers, sessions=tuple(sessions), qa=qa)


def _parse_qa(raw: Any, qi: int, conv_id: str, item: str, path: str, turn_ids: set[str]) -> QA:
    check_type(raw, dict, path=path, item=item, what="a question")
    category = require(raw, "category", str, path=path, item=item)
    if category not in CATEGORIES:
        raise DatasetError(path, item, f"category {category!r} is not one of {list(CATEGORIES)}")
    flag_list = optional(raw, "flags", list, path=path, item=item, default=[])
    evidence = tuple(require(raw, "evidence", list, path=path, item=item))
    for value in (*flag_list, *evidence):
        check_type(value, str, path=path, item=item, what="a flag or evidence id")
    flags = frozenset(flag_list)
    if not flags <= FLAGS:
        raise DatasetError(path, item, f"unknown flags {sorted(flags - FLAGS)}; known: {sorted(FLAGS)}")
    missing = [e for e in evidence if e not in turn_ids]
    if missing:
        raise DatasetError(path, item, f"evidence {missing} names no turn (ids look like D1:3)")
    if bool(evidence) == ("unanswerable" in flags):
        raise DatasetError(path, item, "unanswerable questions have no evidence; all others need some")
    return QA(
        id=f"{conv_id}/q{qi}",
        question=require(raw, "question", str, path=path, item=item),
        answer=require(raw, "answer", str, path=path, item=item),
        category=category,
        evidence=evidence,
        flags=flags,
        question_date=optional(raw, "question_date", str, path=path, item=item),
    )
