"""LoCoMo loader (``locomo10.json``, snap-research/locomo, CC BY-NC 4.0: read it, never ship it).

Handles the file's known pitfalls so nothing downstream has to: date keys without sessions
(conv-26), int answers, category-5 items that carry ``adversarial_answer`` instead of ``answer``,
image turns whose content only lives in ``blip_caption``, and malformed evidence strings
(``"D8:6; D9:17"``, ``"D:11:26"``, ``"D30:05"``, ``"D"``). Problems that lose no data become
flags plus a line in ``Dataset.warnings``; structural problems raise :class:`DatasetError`.

Category 5 (adversarial) asks about something that never happened, e.g. attributes one
speaker's event to the other. LoCoMo's own evaluation scores it correct when the model abstains,
so ``answer`` is :data:`ABSTENTION_ANSWER` and the trap answer is kept in ``adversarial_answer``.
mem0's protocol skips the category: it is flagged ``unscored`` unless ``include_adversarial``.
"""

from __future__ import annotations

import hashlib
import os
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from memtrace_opt.data._fields import (
    as_text,
    check_type,
    check_unique_ids,
    normalise_ref,
    optional,
    read_json,
    require,
    split_evidence,
)
from memtrace_opt.data.model import LOCOMO_CATEGORIES, QA, Conversation, Dataset, Session, Turn, turn_id
from memtrace_opt.atomic import atomic_write_bytes
from memtrace_opt.errors import DatasetError

__all__ = ["ABSTENTION_ANSWER", "LOCOMO_URL", "fetch", "load_audit", "load_locomo"]

LOCOMO_URL = "https://raw.githubusercontent.com/snap-research/locomo/main/data/locomo10.json"
ABSTENTION_ANSWER = "Not mentioned in the conversation"
#: Audit error types that leave the gold answer right (only the cited evidence is wrong).
_CITATION_ONLY = frozenset({"WRONG_CITATION"})
_AUDIT_KEY = re.compile(r"locomo_(\d+)_qa(\d+)")
_SESSION_KEY = re.compile(r"session_(\d+)")


def default_cache_dir() -> Path:
    """Where downloads are kept: ``$MEMTRACE_CACHE`` or ``~/.cache/memtrace-opt``."""
    return Path(os.environ.get("MEMTRACE_CACHE", Path.home() / ".cache" / "memtrace-opt")) / "datasets"


def fetch(url: str, cache_dir: Path | None = None) -> Path:
    """Download ``url`` once into the cache (atomic rename) and return the local file."""
    cache = cache_dir or default_cache_dir()
    name = url.rstrip("/").rsplit("/", 1)[-1] or "download"
    target = cache / f"{hashlib.sha256(url.encode()).hexdigest()[:12]}-{name}"
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    try:
        with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 (http(s) checked by caller)
            payload = response.read()
    except (urllib.error.URLError, OSError) as err:
        raise DatasetError(url, None, f"download failed: {err}; pass a local --path instead") from None
    return atomic_write_bytes(target, payload)


def load_audit(path: str | Path) -> dict[tuple[int, int], dict[str, Any]]:
    """Read the gold-label audit; keys ``locomo_{conv index}_qa{qa index}`` become (conv, qa) pairs."""
    p = Path(path)
    raw = read_json(p)
    if isinstance(raw, dict):  # also accept a mapping keyed by question id
        entries: Any = raw.items()
    else:
        entries = ((None, e) for e in check_type(raw, list, path=str(p), item="top level", what="the audit"))
    audit: dict[tuple[int, int], dict[str, Any]] = {}
    for i, (key, entry) in enumerate(entries):
        item = f"entry {i}"
        check_type(entry, dict, path=str(p), item=item, what="an audit entry")
        key = key or require(entry, "question_id", str, path=str(p), item=item)
        match = _AUDIT_KEY.fullmatch(key)
        if match is None:
            raise DatasetError(str(p), item, f"question_id {key!r} is not locomo_<conv>_qa<index>")
        require(entry, "error_type", str, path=str(p), item=item)
        audit[(int(match[1]), int(match[2]))] = entry
    return audit


def load_locomo(
    path: str | Path | None = None,
    *,
    audit_path: str | Path | None = None,
    include_adversarial: bool = False,
    cache_dir: Path | None = None,
) -> Dataset:
    """Load LoCoMo from a file or an http(s) URL (default: the official file, downloaded once)."""
    source = str(path) if path is not None else LOCOMO_URL
    local = fetch(source, cache_dir) if source.startswith(("http://", "https://")) else Path(source)
    raw = read_json(local)
    check_type(raw, list, path=source, item="top level", what="the list of conversations")
    audit = load_audit(audit_path) if audit_path is not None else {}
    warnings: list[str] = []
    conversations = tuple(
        _parse_conversation(conv, ci, source, audit, include_adversarial, warnings)
        for ci, conv in enumerate(raw)
    )
    check_unique_ids(conversations, source, "sample_id")
    used = {(ci, qi) for ci, conv in enumerate(conversations) for qi in range(len(conv.qa))}
    for ci, qi in sorted(set(audit) - used):
        warnings.append(f"audit entry locomo_{ci}_qa{qi} matches no question; ignored")
    return Dataset(name="locomo", source=source, conversations=conversations, warnings=warnings)


def _parse_conversation(
    raw: Any,
    ci: int,
    path: str,
    audit: dict[tuple[int, int], dict[str, Any]],
    include_adversarial: bool,
    warnings: list[str],
) -> Conversation:
    check_type(raw, dict, path=path, item=f"conversation {ci}", what="a conversation")
    conv_id = require(raw, "sample_id", str, path=path, item=f"conversation {ci}")
    item = f"conversation {ci} ({conv_id})"
    body = require(raw, "conversation", dict, path=path, item=item)
    speakers = tuple(require(body, k, str, path=path, item=item) for k in ("speaker_a", "speaker_b"))
    sessions = _parse_sessions(body, path, item, warnings)
    turn_ids = {t.id for s in sessions for t in s.turns}
    qas = require(raw, "qa", list, path=path, item=item)
    qa = tuple(
        _parse_qa(q, ci, qi, conv_id, path, item, turn_ids, audit.get((ci, qi)), include_adversarial, warnings)
        for qi, q in enumerate(qas)
    )
    return Conversation(id=conv_id, speakers=speakers, sessions=sessions, qa=qa)


def _parse_sessions(body: dict[str, Any], path: str, item: str, warnings: list[str]) -> tuple[Session, ...]:
    """Sessions are the ``session_N`` keys holding lists; date keys alone are not sessions."""
    numbers = sorted(int(m[1]) for k, v in body.items() if (m := _SESSION_KEY.fullmatch(k)) and v is not None)
    sessions = []
    for s in numbers:
        where = f"{item}: session_{s}"
        turns_raw = check_type(body[f"session_{s}"], list, path=path, item=where, what="the session's turns")
        date = require(body, f"session_{s}_date_time", str, path=path, item=item)
        turns = tuple(_parse_turn(t, s, ti, date, path, where, warnings) for ti, t in enumerate(turns_raw, 1))
        sessions.append(Session(index=s, date_time=date, turns=turns))
    return tuple(sessions)


def _parse_turn(raw: Any, s: int, t: int, date: str, path: str, item: str, warnings: list[str]) -> Turn:
    where = f"{item}[{t - 1}]"
    check_type(raw, dict, path=path, item=where, what="a turn")
    speaker = require(raw, "speaker", str, path=path, item=where)
    text = require(raw, "text", str, path=path, item=where)
    caption = optional(raw, "blip_caption", str, path=path, item=where)
    tid = turn_id(s, t)
    dia_id = raw.get("dia_id")
    if dia_id is not None and normalise_ref(str(dia_id)) != tid:
        warnings.append(f"{where}: dia_id {dia_id!r} differs from its position {tid}; position used")
    if caption:
        text = f"{text} [shares {caption}]"
    return Turn(id=tid, speaker=speaker, text=text, session=s, index=t, date=date, image_caption=caption)


def _parse_qa(
    raw: Any,
    ci: int,
    qi: int,
    conv_id: str,
    path: str,
    item: str,
    turn_ids: set[str],
    audit: dict[str, Any] | None,
    include_adversarial: bool,
    warnings: list[str],
) -> QA:
    where = f"{item}: qa[{qi}]"
    check_type(raw, dict, path=path, item=where, what="a question")
    qa_id = f"{conv_id}/q{qi}"
    question = require(raw, "question", str, path=path, item=where)
    cat_id = require(raw, "category", int, path=path, item=where)
    if cat_id not in LOCOMO_CATEGORIES:
        raise DatasetError(path, where, f"category {cat_id} is not one of 1-5")
    flags: set[str] = set()
    adversarial = None
    if cat_id == 5:
        adversarial = as_text(require(raw, "adversarial_answer", (str, int, float), path=path, item=where))
        answer = ABSTENTION_ANSWER
        flags |= {"adversarial", "unanswerable"} | (set() if include_adversarial else {"unscored"})
    else:
        answer = as_text(require(raw, "answer", (str, int, float), path=path, item=where))
    raw_evidence = require(raw, "evidence", list, path=path, item=where)
    for e in raw_evidence:
        check_type(e, str, path=path, item=where, what="an evidence entry")
    evidence, unresolved = _resolve_evidence(raw_evidence, turn_ids)
    if not raw_evidence:
        flags.add("no_evidence")
    if unresolved:
        flags.add("unresolved_evidence")
        warnings.append(f"{qa_id}: unresolvable evidence {', '.join(map(repr, unresolved))}; dropped")
    corrected, corrected_evidence = None, None
    if audit is not None:
        if audit.get("question") not in (None, question):
            warnings.append(f"{qa_id}: audit entry locomo_{ci}_qa{qi} is for another question; applied anyway")
        citation_only = audit["error_type"] in _CITATION_ONLY
        flags.add("audit_wrong_evidence" if citation_only else "audit_wrong_gold")
        if not citation_only and audit.get("correct_answer") is not None:
            corrected = as_text(audit["correct_answer"])
        if isinstance(audit.get("correct_evidence"), list):
            corrected_evidence, _ = _resolve_evidence([str(e) for e in audit["correct_evidence"]], turn_ids)
    return QA(
        id=qa_id,
        question=question,
        answer=answer,
        category=LOCOMO_CATEGORIES[cat_id],
        category_id=cat_id,
        evidence=evidence,
        flags=frozenset(flags),
        corrected_answer=corrected,
        corrected_evidence=corrected_evidence,
        adversarial_answer=adversarial,
    )


def _resolve_evidence(raw: list[str], turn_ids: set[str]) -> tuple[tuple[str, ...], list[str]]:
    """Normalised, de-duplicated evidence ids and the references that name no turn."""
    resolved: list[str] = []
    unresolved: list[str] = []
    for ref in split_evidence(raw):
        norm = normalise_ref(ref)
        if norm is not None and norm in turn_ids:
            if norm not in resolved:
                resolved.append(norm)
        else:
            unresolved.append(ref)
    return tuple(resolved), unresolved
