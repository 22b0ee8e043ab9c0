"""A sealed campaign's finished run dirs, committed as sealed archives and restored on a fresh clone.

A sealed campaign keeps its run dirs out of git (they quote the data). Without them a fresh clone
must replay every finished method from the LM cache, and a replay reruns the *current* code: a
method finished under one version of the attributor would be redone under another, its LM
requests would change, and the committed result would no longer be what a clone reproduces.
Archiving a method's run dir when it finishes (``state/run-<method>.tar.gz.sealed``, sealed like
the cache chunks, written once) makes a finished method a fact, not a recomputation: a clone
restores it and never replays it, so code may change while later methods run.

Deterministic (sorted members, zero times and owners, gzip without a timestamp), so the same run
dir always gives the same blob.
"""

from __future__ import annotations

import gzip
import io
import shutil
import tarfile
from pathlib import Path

from memtrace_opt.atomic import atomic_write_bytes
from memtrace_opt.campaign.seal import SEALED_SUFFIX, dataset_key, seal, unseal
from memtrace_opt.campaign.spec import RUNS_DIR, STATE_DIR, Campaign
from memtrace_opt.errors import ConfigError
from memtrace_opt.rundir import LOCK_FILE

__all__ = ["archive_path", "archive_run", "restore_runs"]


def archive_path(camp: Campaign, method: str) -> Path:
    """Where the sealed archive of ``method``'s finished run dir lives in ``state/``."""
    return camp.folder / STATE_DIR / f"run-{method}.tar.gz{SEALED_SUFFIX}"


def _tar_bytes(run_dir: Path) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(p for p in run_dir.rglob("*") if p.name != LOCK_FILE):
            info = tar.gettarinfo(str(path), arcname=path.relative_to(run_dir).as_posix())
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            info.mode = 0o755 if info.isdir() else 0o644
            if info.isreg():
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
            elif info.isdir():
                tar.addfile(info)
            else:
                raise ConfigError(str(path), None, "a run dir holds only files and folders; cannot archive this entry")
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def archive_run(camp: Campaign, method: str) -> Path | None:
    """Seal ``method``'s finished run dir into ``state/`` (once: an existing archive is kept); None for a plain
    campaign, whose run dirs are committed as they are."""
    if camp.sealed_to is None:
        return None
    target = archive_path(camp, method)
    if target.exists():
        return None
    blob = seal(_tar_bytes(camp.folder / RUNS_DIR / method), dataset_key(camp.sealed_to))
    return atomic_write_bytes(target, blob)


def restore_runs(camp: Campaign, finished: set[str]) -> list[str]:
    """Unpack each archived method whose run dir here is not finished (``finished``: those that are);
    returns the methods restored. A half-run local copy is replaced: the archive is the finished run."""
    if camp.sealed_to is None:
        return []
    key: bytes | None = None
    restored = []
    for method in camp.methods:
        source = archive_path(camp, method)
        if method in finished or not source.exists():
            continue
        key = key or dataset_key(camp.sealed_to)
        data = gzip.decompress(unseal(source.read_bytes(), key, where=str(source)))
        run_dir = camp.folder / RUNS_DIR / method
        staging = run_dir.with_name(f".{method}.restoring")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
                tar.extractall(staging, filter="data")  # refuses absolute paths, links out, devices
        except (tarfile.TarError, OSError) as err:
            shutil.rmtree(staging, ignore_errors=True)
            raise ConfigError(str(source), None, f"unreadable run archive ({err}); restore it from git") from None
        shutil.rmtree(run_dir, ignore_errors=True)
        staging.rename(run_dir)
        restored.append(method)
    return restored
