"""The one way files are written: to a uniquely named temp file beside the target, then renamed over it.

A reader (another process, a resumed run, the report) sees the old file or the new one, never half
of one; a crash leaves at most a hidden ``.<name>.*.tmp`` file and no damage. The temp name is
unique per write (``tempfile.mkstemp``), so two processes writing the same file cannot delete or
rename each other's half-written temp (a fixed ``.part`` name did exactly that).

File mode: every file in a run dir gets the mode a plain ``open()`` would give it, ``0666`` minus
the user's umask (``0644`` under the usual ``022``, ``0600`` under ``077``) — ``mkstemp``'s private
``0600`` is widened to that, so atomic and non-atomic files (the SQLite cache, logs) agree.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> atomic_write_text(d / "a.json", "{}").read_text()
'{}'
>>> sorted(p.name for p in d.iterdir())
['a.json']
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["FILE_MODE", "atomic_path", "atomic_write_bytes", "atomic_write_text"]


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


#: The mode of every file this project writes: what ``open()`` would create under the process umask.
FILE_MODE = 0o666 & ~_umask()


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A unique temp path beside ``path`` to write to; renamed over ``path`` on success, removed on error.

    The temp keeps ``path``'s suffixes (``.jsonl.gz`` stays gzip-recognisable for writers that look).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    suffix = "".join(target.suffixes[-2:]) if target.suffixes else ""
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=f".tmp{suffix}")
    os.close(fd)
    tmp = Path(name)
    os.chmod(tmp, FILE_MODE)
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; returns the path."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns the path."""
    return atomic_write_bytes(path, text.encode("utf-8"))
