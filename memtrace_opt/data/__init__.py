"""Datasets: one data model for LoCoMo, LongMemEval and the bundled mini set — where every run starts.

``load_dataset`` is the single entry point the CLI and run configs use; the per-benchmark loaders
stay importable for callers that need their extra options (``cache_dir`` for downloads).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from memtrace_opt.data.model import QA, Conversation, Dataset, Session, Turn
from memtrace_opt.data.slicing import dataset_stats, select
from memtrace_opt.errors import DatasetError

__all__ = [
    "DATASET_NAMES",
    "QA",
    "Conversation",
    "Dataset",
    "Session",
    "Turn",
    "dataset_stats",
    "load_dataset",
    "select",
]

DatasetName = Literal["locomo", "longmemeval", "mini"]
DATASET_NAMES: tuple[str, ...] = ("locomo", "longmemeval", "mini")


def load_dataset(
    name: DatasetName,
    path: str | Path | None = None,
    *,
    audit_path: str | Path | None = None,
    include_adversarial: bool = False,
) -> Dataset:
    """Load a dataset by name.

    ``locomo``: ``path`` is a file or http(s) URL (default: the official file, downloaded once
    and cached); ``audit_path`` adds the gold-label audit flags. ``longmemeval``: ``path`` is
    required (the data is on Hugging Face only). ``mini``: the bundled set unless ``path`` is given.
    """
    if name == "locomo":
        from memtrace_opt.data.locomo import load_locomo

        return load_locomo(path, audit_path=audit_path, include_adversarial=include_adversarial)
    if audit_path is not None:
        raise DatasetError(str(audit_path), None, f"an audit file only applies to locomo, not {name}")
    if name == "longmemeval":
        if path is None:
            raise DatasetError(
                "longmemeval", None, "no path given: download longmemeval_s.json from Hugging Face and pass --path"
            )
        from memtrace_opt.data.longmemeval import load_longmemeval

        return load_longmemeval(path)
    if name == "mini":
        from memtrace_opt.data.mini import load_mini

        return load_mini(path)
    raise DatasetError(str(name), None, f"unknown dataset; choose one of {', '.join(DATASET_NAMES)}")
