"""A campaign's LM answers as committed chunks, and the working SQLite cache they rebuild.

The SQLite cache is a binary file that changes on every call, so git would store a full copy per
commit. Append-only gzip chunks (sorted by key, written once, never rewritten) are stored once each,
and importing them rebuilds the cache: on resume every LM call already made is free. A sealed
campaign's chunks are sealed to its dataset file (:mod:`.seal`).
"""

from __future__ import annotations

import gzip
import io
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

from memtrace_opt.atomic import atomic_write_bytes
from memtrace_opt.campaign.seal import SEALED_SUFFIX, dataset_key, seal, unseal
from memtrace_opt.campaign.spec import STATE_DIR, load_campaign
from memtrace_opt.errors import ConfigError
from memtrace_opt.lm.cache import open_cache_db
from memtrace_opt.lm.factory import CACHE_FILE

__all__ = ["cache_path", "cache_totals", "chunk_entries", "export_cache", "import_cache",
           "working_entries"]

_CHUNK = re.compile(r"^cache-(\d{4,})\.jsonl\.gz(\.sealed)?$")
_COLUMNS = ("key", "model_id", "text", "prompt_tokens", "completion_tokens", "finish_reason", "latency_s", "created")


def cache_path(folder: str | Path) -> Path:
    """The working SQLite cache of a campaign (git-ignored): where its runs' LM clients cache answers."""
    return Path(folder) / STATE_DIR / CACHE_FILE


def _chunks(folder: Path) -> list[Path]:
    state = folder / STATE_DIR
    return sorted((p for p in state.glob("cache-*.jsonl.gz*") if _CHUNK.match(p.name)),
                  key=lambda p: int(_CHUNK.match(p.name).group(1)))  # type: ignore[union-attr]


def _key(folder: Path) -> bytes | None:
    """The seal key of the campaign in ``folder``; None when its state is plain."""
    sealed_to = load_campaign(folder).sealed_to
    return None if sealed_to is None else dataset_key(sealed_to)


def _chunk_text(chunk: Path, key: bytes | None) -> io.TextIOWrapper:
    """A chunk's lines; a sealed chunk needs the campaign's key, a plain one must not be in a sealed campaign."""
    is_sealed = chunk.name.endswith(SEALED_SUFFIX)
    if is_sealed != (key is not None):
        raise ConfigError(str(chunk), None, "a sealed chunk in a plain campaign" if is_sealed else
                          "a plain chunk in a sealed campaign: it would commit the data; delete it from git")
    raw = chunk.read_bytes()
    if key is not None:
        raw = unseal(raw, key, where=str(chunk))
    return io.TextIOWrapper(gzip.GzipFile(fileobj=io.BytesIO(raw)), encoding="utf-8")


def chunk_entries(folder: str | Path) -> list[tuple[int, list[dict[str, Any]]]]:
    """Each committed chunk's number and entries, in chunk order: chunks are append-only, so a chunk's
    number dates its entries (what a campaign paid for after a given chunk is what the later chunks hold)."""
    root = Path(folder)
    chunks = _chunks(root)
    key = _key(root) if chunks else None
    out: list[tuple[int, list[dict[str, Any]]]] = []
    for chunk in chunks:
        rows: list[dict[str, Any]] = []
        try:
            with _chunk_text(chunk, key) as fh:
                for n, line in enumerate(fh, 1):
                    row = json.loads(line)
                    if not isinstance(row, dict) or set(row) != set(_COLUMNS):
                        raise ValueError(f"line {n}: expected the columns {', '.join(_COLUMNS)}")
                    rows.append(row)
        except (OSError, EOFError, ValueError) as err:
            raise ConfigError(str(chunk), None, f"unreadable cache chunk ({err}); restore it from git") from None
        out.append((int(_CHUNK.match(chunk.name).group(1)), rows))  # type: ignore[union-attr]
    return out


def _read_chunks(folder: Path) -> dict[str, dict[str, Any]]:
    """Every committed entry by key (a later chunk never repeats a key, but if it did the first wins)."""
    entries: dict[str, dict[str, Any]] = {}
    for _number, rows in chunk_entries(folder):
        for row in rows:
            entries.setdefault(row["key"], row)
    return entries


def _open_cache(folder: Path) -> sqlite3.Connection:
    path = cache_path(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    return open_cache_db(path)


def import_cache(folder: str | Path) -> int:
    """Load the committed chunks into the working cache (entries it already has are kept); returns how many."""
    root = Path(folder)
    entries = _read_chunks(root)
    db = _open_cache(root)
    try:
        before = db.total_changes
        db.executemany(f"INSERT OR IGNORE INTO lm_cache VALUES ({', '.join('?' * len(_COLUMNS))})",
                       [tuple(e[c] for c in _COLUMNS) for e in entries.values()])
        db.commit()
        return db.total_changes - before
    finally:
        db.close()


def export_cache(folder: str | Path) -> Path | None:
    """Write the working cache's entries that no chunk holds yet to a new chunk; returns it (None: nothing new).

    Append-only and deterministic (sorted by key, gzip without a timestamp), so each chunk is one git blob
    forever and the same entries give the same bytes.
    """
    root = Path(folder)
    if not cache_path(root).exists():
        return None
    known = set(_read_chunks(root))
    db = _open_cache(root)
    try:
        rows = [dict(zip(_COLUMNS, r)) for r in db.execute(f"SELECT {', '.join(_COLUMNS)} FROM lm_cache ORDER BY key")]
    finally:
        db.close()
    new = [r for r in rows if r["key"] not in known]
    if not new:
        return None
    chunks = _chunks(root)
    number = int(_CHUNK.match(chunks[-1].name).group(1)) + 1 if chunks else 1  # type: ignore[union-attr]
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as gz:
        for r in new:
            gz.write((json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))
    key = _key(root)
    name = f"cache-{number:04d}.jsonl.gz"
    if key is None:
        return atomic_write_bytes(root / STATE_DIR / name, buf.getvalue())
    return atomic_write_bytes(root / STATE_DIR / f"{name}{SEALED_SUFFIX}", seal(buf.getvalue(), key))


def working_entries(folder: str | Path) -> list[tuple[str, float, float]]:
    """``(key, latency_s, created)`` of every entry of the working cache (none when it does not exist yet)."""
    path = cache_path(folder)
    if not path.exists():
        return []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [(k, float(s), float(c)) for k, s, c in db.execute("SELECT key, latency_s, created FROM lm_cache")]
    except sqlite3.DatabaseError as err:
        raise ConfigError(str(path), None,
                          f"not a usable LM cache ({err}); delete it, the committed chunks rebuild it") from None
    finally:
        db.close()


def cache_totals(folder: Path) -> tuple[int, float]:
    """``(entries, LM seconds they took)`` over the chunks and the working cache together."""
    latency = {k: float(e["latency_s"]) for k, e in _read_chunks(folder).items()}
    latency.update({k: s for k, s, _created in working_entries(folder)})
    return len(latency), sum(latency.values())
