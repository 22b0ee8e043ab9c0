"""One process per run directory: an exclusive advisory lock held for the whole command.

Two ``eval``s on one config, or ``optimize --resume`` started while the first ``optimize`` still
runs, would otherwise interleave writes into one checkpoint, one GEPA directory and one set of
graphs. The lock is ``flock`` on ``RUN_DIR/.lock`` (released by the kernel when the holder dies, so
a killed run never leaves a stale lock); the file names the holder for the error message.
"""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memtrace_opt.errors import MemtraceError
from memtrace_opt.rundir.layout import LOCK_FILE

__all__ = ["RunDirBusyError", "run_lock"]


class RunDirBusyError(MemtraceError):
    """Another memtrace-opt process holds the run directory."""

    exit_code = 3

    def __init__(self, run_dir: Path, holder: str) -> None:
        super().__init__(f"run dir {run_dir} is in use by another memtrace-opt process ({holder or 'unknown'}); "
                         "wait for it to finish, or choose another --out")


@contextmanager
def run_lock(run_dir: str | os.PathLike[str], command: str) -> Iterator[Path]:
    """Hold ``run_dir``'s lock for the block; :class:`RunDirBusyError` at once if another process holds it."""
    directory = Path(run_dir)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_FILE
    with open(path, "a+", encoding="utf-8") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            raise RunDirBusyError(directory, fh.read().strip()) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}: memtrace-opt {command} ({sys.argv[0] if sys.argv else ''})")
        fh.flush()
        try:
            yield directory
        finally:
            fh.seek(0)
            fh.truncate()
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
