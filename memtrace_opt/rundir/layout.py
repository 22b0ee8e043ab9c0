"""Where each file of a run directory lives: names and paths, nothing read or written.

One place for the names, so a writer (``eval``, ``attribute``, the loop) and its readers (``report``,
``compare``, ``export otel``, ``trace``) cannot drift apart. The layout itself is drawn in
:mod:`memtrace_opt.rundir`.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

__all__ = [
    "BLAME_FILE", "CHECKPOINT_FILE", "CONFIG_CHANGES_FILE", "CONFIG_FILE", "FINAL_FILE", "GRAPHS_DIR", "GRAPH_SUFFIX",
    "LOCK_FILE", "PROMPTS_DIR", "RESULTS_FILE", "ROUNDS_DIR", "SUMMARY_FILE", "USAGE_FILE", "clear_results",
    "graph_path", "list_graphs", "round_blame_files", "round_dir",
]

CONFIG_FILE = "config.yaml"
CONFIG_CHANGES_FILE = "config_changes.json"
GRAPHS_DIR = "graphs"
GRAPH_SUFFIX = ".jsonl.gz"
RESULTS_FILE = "results.json"
SUMMARY_FILE = "summary.json"
USAGE_FILE = "usage.json"
BLAME_FILE = "blame.json"
CHECKPOINT_FILE = "checkpoint.json"
FINAL_FILE = "final.json"
ROUNDS_DIR = "rounds"
PROMPTS_DIR = "prompts"
LOCK_FILE = ".lock"

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def graph_path(run_dir: str | Path, conversation_id: str) -> Path:
    """Where conversation ``conversation_id``'s graph lives.

    A safe id is the file name as it is; an id with characters unsafe in file names (``/``, spaces)
    or a leading dot gets them replaced by ``_`` plus a short hash of the id, so ``c/1`` and ``c_1``
    never share a file.

    >>> graph_path("r", "conv-26").name, graph_path("r", "c/1").name != graph_path("r", "c_1").name
    ('conv-26.jsonl.gz', True)
    """
    safe = _UNSAFE.sub("_", conversation_id)
    if safe != conversation_id or safe.startswith(".") or not safe:
        digest = hashlib.sha256(conversation_id.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        safe = f"{safe.lstrip('.') or 'conv'}-{digest}"
    return Path(run_dir) / GRAPHS_DIR / f"{safe}{GRAPH_SUFFIX}"


def list_graphs(run_dir: str | Path) -> list[Path]:
    """The graph files of a run, sorted by name."""
    return sorted((Path(run_dir) / GRAPHS_DIR).glob(f"*{GRAPH_SUFFIX}"))


def round_dir(run_dir: str | Path, index: int) -> Path:
    """``RUN_DIR/rounds/round_<index>``: one loop round's files (round 0 is the seed's baseline)."""
    return Path(run_dir) / ROUNDS_DIR / f"round_{index}"


def round_blame_files(run_dir: str | Path) -> list[tuple[int, Path]]:
    """``(k, rounds/round_<k>/blame.json)`` of every round that wrote one, in round order (the report and
    ``compare`` read the same files)."""
    found = []
    for path in (Path(run_dir) / ROUNDS_DIR).glob(f"round_*/{BLAME_FILE}"):
        suffix = path.parent.name.removeprefix("round_")
        if suffix.isdigit():
            found.append((int(suffix), path))
    return sorted(found)


def clear_results(run_dir: str | Path) -> None:
    """Remove a previous run's graphs, results, summary and blame, so a fresh run (``--no-resume``)
    cannot leave old conversations behind for ``attribute`` or ``report`` to mix with the new ones."""
    root = Path(run_dir)
    for path in list_graphs(root):
        path.unlink(missing_ok=True)
    for name in (RESULTS_FILE, SUMMARY_FILE, BLAME_FILE):
        (root / name).unlink(missing_ok=True)
