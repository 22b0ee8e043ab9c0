"""A disk cache of LM answers, so re-running an experiment costs nothing for calls already made.

On a 2-core CPU a mem0 update decision takes 20-40 s: re-running an evaluation, resuming an
optimization or re-attributing a graph must not redo them. Answers are keyed by everything that
determines them — ``model_id`` (weights hash or endpoint), messages, max_tokens, temperature,
json_schema, stop — as sha256 of their canonical JSON, in one SQLite file (WAL, so several
processes and threads can share it).

Which calls are cached: by default only temperature-0 calls. A call at temperature > 0 asks for a
*sample*; replaying one stored sample would silently turn repeated sampling (e.g. a reflection LM
proposing several candidates) into one answer. Pass ``cache_sampled=True`` to cache those as
well, for byte-identical replays. A call that raises is never stored. A file that is not a usable
cache (garbage, truncated, another schema) is renamed aside with a one-line warning and a fresh
cache starts: losing cached answers costs time, never correctness. ``replay_only=True`` turns
a miss into an :class:`LMError`, for tests that must fail on a prompt they have not recorded.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any

from memtrace_opt.errors import LMError
from memtrace_opt.lm.base import LMClient, LMResult

__all__ = ["CachedLM", "cache_key"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS lm_cache (
    key TEXT PRIMARY KEY,
    model_id TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    finish_reason TEXT NOT NULL,
    latency_s REAL NOT NULL,
    created REAL NOT NULL
)
"""
_STRIPES = 64  # per-key locks, hashed: concurrent identical calls run once, different ones in parallel


_COLUMNS = ["key", "model_id", "text", "prompt_tokens", "completion_tokens", "finish_reason", "latency_s", "created"]


def open_cache_db(path: Path) -> sqlite3.Connection:
    """Open (or create) the cache; sqlite3.DatabaseError when the file is not a cache this code can use."""
    db = sqlite3.connect(path, check_same_thread=False, timeout=30.0)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute(_SCHEMA)
        db.commit()
        columns = [row[1] for row in db.execute("PRAGMA table_info(lm_cache)")]
        if columns != _COLUMNS:
            raise sqlite3.DatabaseError(f"table lm_cache has columns {columns}, expected {_COLUMNS}")
        db.execute("SELECT COUNT(*) FROM lm_cache").fetchone()
    except BaseException:
        db.close()
        raise
    return db


def _quarantine(path: Path) -> Path:
    """Rename a broken cache (and its WAL/SHM files) aside, so nothing is lost and a fresh one can start."""
    aside = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    for suffix in ("", "-wal", "-shm"):
        part = Path(f"{path}{suffix}")
        if part.exists():
            part.replace(Path(f"{aside}{suffix}"))
    return aside


def cache_key(
    model_id: str,
    messages: list[dict[str, str]],
    *,
    max_tokens: int,
    temperature: float,
    json_schema: dict[str, Any] | None,
    stop: list[str] | None,
) -> str:
    """sha256 of the canonical JSON of everything that determines an answer."""
    payload = {
        "model_id": model_id,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": float(temperature),
        "json_schema": json_schema,
        "stop": list(stop) if stop else None,
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CachedLM:
    """Wraps an :class:`LMClient`; a hit returns the recorded answer with ``cached=True``, latency 0."""

    def __init__(
        self,
        client: LMClient,
        path: Path,
        *,
        cache_sampled: bool = False,
        replay_only: bool = False,
    ) -> None:
        self.client = client
        self.model_id = client.model_id
        self.path = Path(path)
        self.cache_sampled = cache_sampled
        self.replay_only = replay_only
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db_lock = threading.Lock()
        self._stripes = [threading.Lock() for _ in range(_STRIPES)]
        try:
            self._db = open_cache_db(self.path)
        except sqlite3.DatabaseError as err:
            aside = _quarantine(self.path)
            print(f"memtrace-opt: warning: LM cache {self.path} is unreadable ({err}); moved aside to {aside.name}, "
                  "starting an empty cache", file=sys.stderr)
            self._db = open_cache_db(self.path)

    def __repr__(self) -> str:
        return f"CachedLM({self.client!r}, path={str(self.path)!r})"

    def chat(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        json_schema: dict[str, Any] | None = None,
        stop: list[str] | None = None,
    ) -> LMResult:
        """The recorded answer if there is one, else the wrapped client's (then recorded)."""
        options: dict[str, Any] = {
            "max_tokens": max_tokens,
            "temperature": temperature,
            "json_schema": json_schema,
            "stop": stop,
        }
        if temperature != 0 and not self.cache_sampled:
            return self.client.chat(messages, **options)
        key = cache_key(self.model_id, messages, **options)
        with self._stripes[int(key[:8], 16) % _STRIPES]:
            hit = self._get(key)
            if hit is not None:
                return hit
            if self.replay_only:
                raise LMError(
                    f"{self.model_id}: no recorded answer for this call in {self.path} (replay_only); "
                    f"first message: {messages[0]['content'][:80] if messages else ''!r}"
                )
            result = self.client.chat(messages, **options)
            if result.finish_reason != "error":
                self._put(key, result)
            return result

    def _get(self, key: str) -> LMResult | None:
        with self._db_lock:
            row = self._db.execute(
                "SELECT model_id, text, prompt_tokens, completion_tokens, finish_reason "
                "FROM lm_cache WHERE key = ?",
                (key,),
            ).fetchone()
        if row is None:
            return None
        model, text, prompt_tokens, completion_tokens, finish_reason = row
        return LMResult(
            text=text,
            model=model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_s=0.0,
            cached=True,
            finish_reason=finish_reason,
        )

    def _put(self, key: str, result: LMResult) -> None:
        row = (
            key,
            result.model,
            result.text,
            result.prompt_tokens,
            result.completion_tokens,
            result.finish_reason,
            result.latency_s,
            time.time(),
        )
        with self._db_lock:
            self._db.execute("INSERT OR REPLACE INTO lm_cache VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
            self._db.commit()

    def __len__(self) -> int:
        with self._db_lock:
            return int(self._db.execute("SELECT COUNT(*) FROM lm_cache").fetchone()[0])

    def close(self) -> None:
        """Close the SQLite connection (the wrapped client is left open: it may be shared)."""
        with self._db_lock:
            self._db.close()
