"""The layout of a run directory, in one place: every command writes and reads runs through here.

::

    RUN_DIR/config.yaml                    the fully resolved run config (a copy, for reproduction)
    RUN_DIR/graphs/<conversation>.jsonl.gz one memory evolution graph per conversation
    RUN_DIR/results.json                   one record per answered question (memtrace-results/1)
    RUN_DIR/summary.json                   accuracy with CIs per category, F1, BLEU-1, usage, failed ops
    RUN_DIR/usage.json                     LM usage totals (per role when a ledger was kept, per op)
    RUN_DIR/blame.json                     attribute's blame (memtrace-blame/2; see memtrace_opt.schemas)
    RUN_DIR/lm_cache.sqlite                the LM disk cache, when the config names no cache_dir

Every file is written atomically (temporary file, then rename), so an interrupted run never leaves
a half-written file for ``--resume`` to trip on. ``results.json`` also lists the conversations
already finished: that, plus their graph files, is the checkpoint ``eval --resume`` skips.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memtrace_opt.atomic import atomic_write_bytes, atomic_write_text
from memtrace_opt.errors import DatasetError
from memtrace_opt.eval.results import RESULTS_FORMAT, QAResult, load_results
from memtrace_opt.graph.model import MemoryGraph

__all__ = [
    "CONFIG_FILE", "GRAPHS_DIR", "RESULTS_FILE", "SUMMARY_FILE", "USAGE_FILE", "GRAPH_SUFFIX",
    "done_conversations", "graph_path", "list_graphs", "read_config", "read_graph", "read_json",
    "read_conversation_stats", "read_results", "read_summary", "read_usage", "write_config", "write_graph", "write_json",
    "write_results", "write_summary", "write_usage",
]

CONFIG_FILE = "config.yaml"
GRAPHS_DIR = "graphs"
GRAPH_SUFFIX = ".jsonl.gz"
RESULTS_FILE = "results.json"
SUMMARY_FILE = "summary.json"
USAGE_FILE = "usage.json"

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def _atomic_write(path: Path, data: bytes) -> None:
    atomic_write_bytes(path, data)


# -- config -------------------------------------------------------------------------------------
def write_config(run_dir: str | Path, config: Any) -> Path:
    """Save the run config: a RunConfig (its resolved YAML dump) or YAML text."""
    text = config.dump_yaml() if hasattr(config, "dump_yaml") else str(config)
    path = Path(run_dir) / CONFIG_FILE
    _atomic_write(path, text.encode("utf-8"))
    return path


CONFIG_CHANGES_FILE = "config_changes.json"


#: Config sections that change how a run executes, never its results: resuming may change them.
RESULT_NEUTRAL = ("executor",)


def check_same_config(run_dir: str | Path, cfg: Any, config_path: str, remedy: str, *, force: bool = False) -> list[str]:
    """Refuse to resume into a run directory made by a different config: its results would mix with
    the new ones while ``config.yaml`` still described the old run. ``remedy`` ends the message.

    With ``force`` the change is accepted and recorded (``config_changes.json``: when, which fields,
    the old config) and the changed field names are returned; the caller writes the new config.
    """
    from datetime import datetime, timezone

    from memtrace_opt.errors import ConfigError

    saved = Path(run_dir) / CONFIG_FILE
    if not saved.exists() or saved.read_text(encoding="utf-8") == cfg.dump_yaml():
        return []
    changed = [f for f in _changed_fields(read_config(run_dir).model_dump(mode="json"), cfg.model_dump(mode="json"))
               if f.split(".")[0] not in RESULT_NEUTRAL]
    if not changed:
        return []  # the same run: only formatting, defaults of newer versions, or where it executes differ
    if not force:
        raise ConfigError(config_path, None, f"{run_dir} holds a run of a different config "
                          f"(changed: {', '.join(changed[:4]) or 'formatting'}); {remedy}, or pass --force to "
                          "accept the change (it is recorded)")
    log_path = Path(run_dir) / CONFIG_CHANGES_FILE
    log = json.loads(log_path.read_text(encoding="utf-8")) if log_path.exists() else []
    log.append({"at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "changed": changed,
                "previous_config": saved.read_text(encoding="utf-8")})
    atomic_write_text(log_path, json.dumps(log, indent=2))
    return changed


def _changed_fields(old: Any, new: Any, prefix: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted(set(old) | set(new)):
            out += _changed_fields(old.get(key), new.get(key), f"{prefix}{key}.")
        return out
    return [] if old == new else [prefix.rstrip(".")]


def read_config(run_dir: str | Path) -> Any:
    """The run's saved config as a RunConfig (ConfigError naming the file if it is missing or bad)."""
    from memtrace_opt.config import load_config

    return load_config(Path(run_dir) / CONFIG_FILE)


# -- graphs -------------------------------------------------------------------------------------
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


def write_graph(run_dir: str | Path, conversation_id: str, graph: MemoryGraph) -> Path:
    """Save one conversation's graph (atomically: write beside it, then rename)."""
    from memtrace_opt.graph.io_json import save_json

    return save_json(graph, graph_path(run_dir, conversation_id))


def clear_results(run_dir: str | Path) -> None:
    """Remove a previous run's graphs, results, summary and blame, so a fresh run (``--no-resume``)
    cannot leave old conversations behind for ``attribute`` or ``report`` to mix with the new ones."""
    root = Path(run_dir)
    for path in list_graphs(root):
        path.unlink(missing_ok=True)
    for name in (RESULTS_FILE, SUMMARY_FILE, "blame.json"):
        (root / name).unlink(missing_ok=True)


def read_graph(run_dir: str | Path, conversation_id: str) -> MemoryGraph:
    """Load one conversation's graph; GraphError naming the file if it is missing or corrupt."""
    from memtrace_opt.graph.io_json import load_json

    return load_json(graph_path(run_dir, conversation_id))


def list_graphs(run_dir: str | Path) -> list[Path]:
    """The graph files of a run, sorted by name."""
    return sorted((Path(run_dir) / GRAPHS_DIR).glob(f"*{GRAPH_SUFFIX}"))


# -- results ------------------------------------------------------------------------------------
def write_results(
    run_dir: str | Path, results: Iterable[QAResult], conversations: Mapping[str, Any] | Sequence[str] = ()
) -> Path:
    """Save per-question results and the conversations they complete (the checkpoint).

    ``conversations`` maps each finished conversation id to its stats (see
    :func:`memtrace_opt.graph.usage.graph_stats`), or is a plain list of ids.
    """
    stats = dict(conversations) if isinstance(conversations, Mapping) else {c: {} for c in conversations}
    payload = {"format": RESULTS_FORMAT, "conversations": list(stats), "conversation_stats": stats,
               "results": [r.to_dict() for r in results]}
    path = Path(run_dir) / RESULTS_FILE
    _atomic_write(path, (json.dumps(payload, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    return path


def read_results(run_dir: str | Path) -> list[QAResult]:
    """The run's per-question results (DatasetError naming the file and record if malformed)."""
    return load_results(Path(run_dir) / RESULTS_FILE)


def done_conversations(run_dir: str | Path) -> list[str]:
    """Conversations whose results were saved and whose graph file exists (empty if no results yet)."""
    path = Path(run_dir) / RESULTS_FILE
    if not path.exists():
        return []
    payload = read_json(path)
    return [c for c in payload.get("conversations", []) if graph_path(run_dir, c).exists()]


def read_conversation_stats(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """Per-conversation stats saved with the results (``{}`` when there are none)."""
    path = Path(run_dir) / RESULTS_FILE
    return dict(read_json(path).get("conversation_stats", {})) if path.exists() else {}


# -- summary and usage --------------------------------------------------------------------------
def write_json(path: str | Path, data: Any) -> Path:
    """Write JSON atomically, indented, UTF-8."""
    p = Path(path)
    _atomic_write(p, (json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n").encode("utf-8"))
    return p


def read_json(path: str | Path) -> Any:
    """Read a JSON file of a run; DatasetError naming the file when missing or unparsable."""
    p = Path(path)
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(str(p), None, "file not found (is this a run directory?)") from None
    except json.JSONDecodeError as err:
        raise DatasetError(str(p), None, f"not valid JSON: {err.msg} at line {err.lineno}") from None
    except UnicodeDecodeError as err:
        raise DatasetError(str(p), None, f"not UTF-8 text (byte {err.start})") from None


def write_summary(run_dir: str | Path, summary: dict[str, Any]) -> Path:
    return write_json(Path(run_dir) / SUMMARY_FILE, summary)


def read_summary(run_dir: str | Path) -> dict[str, Any]:
    return read_json(Path(run_dir) / SUMMARY_FILE)


def write_usage(run_dir: str | Path, usage: dict[str, Any]) -> Path:
    return write_json(Path(run_dir) / USAGE_FILE, usage)


def read_usage(run_dir: str | Path) -> dict[str, Any]:
    return read_json(Path(run_dir) / USAGE_FILE)
