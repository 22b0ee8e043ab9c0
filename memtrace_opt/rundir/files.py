"""Reading and writing each file of a run directory: the config, graphs, results, summary, usage, blame.

Every command writes and reads runs through here (and the loop's own files through :mod:`.schemas`),
so a file has one writer shape and one reader. ``results.json`` also lists the conversations already
finished: that, plus their graph files, is the checkpoint ``eval --resume`` skips.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import cast

from memtrace_opt.config import RunConfig, load_config
from memtrace_opt.errors import ConfigError, DatasetError
from memtrace_opt.eval.results import QAResult
from memtrace_opt.graph.io_json import load_json, save_json
from memtrace_opt.graph.model import MemoryGraph
from memtrace_opt.rundir.jsonio import JSONObject, JSONValue, read_json, read_object, write_json, write_text
from memtrace_opt.rundir.layout import (
    BLAME_FILE, CONFIG_CHANGES_FILE, CONFIG_FILE, RESULTS_FILE, SUMMARY_FILE, USAGE_FILE, graph_path,
)
from memtrace_opt.rundir.records import BlameFile, BlameReport, EvalSummary
from memtrace_opt.rundir.schemas import BLAME, read_blame, stamp

__all__ = [
    "RESULTS_FORMAT", "RESULT_NEUTRAL", "blame_payload", "check_same_config", "done_conversations", "read_blame_report",
    "read_config", "read_conversation_stats", "read_graph", "read_results", "read_summary", "read_usage",
    "write_blame", "write_config", "write_graph", "write_results", "write_summary", "write_usage",
]

RESULTS_FORMAT = "memtrace-results/1"

#: Config sections that change how a run executes, never its results: resuming may change them.
RESULT_NEUTRAL = ("executor",)


# -- config -------------------------------------------------------------------------------------
def write_config(run_dir: str | Path, config: RunConfig | str) -> Path:
    """Save the run config: a RunConfig (its resolved YAML dump) or YAML text."""
    text = config.dump_yaml() if isinstance(config, RunConfig) else config
    return write_text(Path(run_dir) / CONFIG_FILE, text)


def read_config(run_dir: str | Path) -> RunConfig:
    """The run's saved config as a RunConfig (ConfigError naming the file if it is missing or bad)."""
    return load_config(Path(run_dir) / CONFIG_FILE)


def check_same_config(run_dir: str | Path, cfg: RunConfig, config_path: str, remedy: str, *,
                      force: bool = False) -> list[str]:
    """Refuse to resume into a run directory made by a different config: its results would mix with
    the new ones while ``config.yaml`` still described the old run. ``remedy`` ends the message.

    With ``force`` the change is accepted and recorded (``config_changes.json``: when, which fields,
    the old config) and the changed field names are returned; the caller writes the new config.
    """
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
    log = read_json(log_path) if log_path.exists() else []
    fields: list[JSONValue] = list(changed)
    entry: JSONObject = {"at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "changed": fields,
                         "previous_config": saved.read_text(encoding="utf-8")}
    write_json(log_path, [*(log if isinstance(log, list) else []), entry])
    return changed


def _changed_fields(old: object, new: object, prefix: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted(set(old) | set(new)):
            out += _changed_fields(old.get(key), new.get(key), f"{prefix}{key}.")
        return out
    return [] if old == new else [prefix.rstrip(".")]


# -- graphs -------------------------------------------------------------------------------------
def write_graph(run_dir: str | Path, conversation_id: str, graph: MemoryGraph) -> Path:
    """Save one conversation's graph (atomically: write beside it, then rename)."""
    return save_json(graph, graph_path(run_dir, conversation_id))


def read_graph(run_dir: str | Path, conversation_id: str) -> MemoryGraph:
    """Load one conversation's graph; GraphError naming the file if it is missing or corrupt."""
    return load_json(graph_path(run_dir, conversation_id))


# -- results ------------------------------------------------------------------------------------
def write_results(run_dir: str | Path, results: Iterable[QAResult],
                  conversations: Mapping[str, Mapping[str, object]] | Sequence[str] = ()) -> Path:
    """Save per-question results and the conversations they complete (the checkpoint).

    ``conversations`` maps each finished conversation id to its stats (see
    :func:`memtrace_opt.graph.usage.graph_stats`), or is a plain list of ids.
    """
    stats = dict(conversations) if isinstance(conversations, Mapping) else {c: {} for c in conversations}
    return write_json(Path(run_dir) / RESULTS_FILE, {"format": RESULTS_FORMAT, "conversations": list(stats),
                                                     "conversation_stats": stats,
                                                     "results": [r.to_dict() for r in results]})


def read_results(run_dir: str | Path) -> list[QAResult]:
    """The run's per-question results (DatasetError naming the file and record if malformed)."""
    path = Path(run_dir) / RESULTS_FILE
    payload = read_json(path)
    if not isinstance(payload, dict) or payload.get("format") != RESULTS_FORMAT:
        raise DatasetError(str(path), "top level", f"not a results file (expected format {RESULTS_FORMAT!r})")
    records = payload.get("results", [])
    out = []
    for i, record in enumerate(records if isinstance(records, list) else []):
        try:
            out.append(QAResult.from_dict(record))  # type: ignore[arg-type]  # a non-object raises TypeError
        except (TypeError, ValueError) as err:
            raise DatasetError(str(path), f"results[{i}]", str(err)) from None
    return out


def done_conversations(run_dir: str | Path) -> list[str]:
    """Conversations whose results were saved and whose graph file exists (empty if no results yet)."""
    path = Path(run_dir) / RESULTS_FILE
    if not path.exists():
        return []
    listed = read_object(path).get("conversations", [])
    return [c for c in listed if isinstance(c, str) and graph_path(run_dir, c).exists()] \
        if isinstance(listed, list) else []


def read_conversation_stats(run_dir: str | Path) -> dict[str, JSONObject]:
    """Per-conversation stats saved with the results (``{}`` when there are none)."""
    path = Path(run_dir) / RESULTS_FILE
    stats = read_object(path).get("conversation_stats", {}) if path.exists() else {}
    return {k: v for k, v in stats.items() if isinstance(v, dict)} if isinstance(stats, dict) else {}


# -- summary, usage and blame ---------------------------------------------------------------------
def write_summary(run_dir: str | Path, summary: Mapping[str, object]) -> Path:
    """Save ``summary.json`` (:class:`~memtrace_opt.rundir.records.EvalSummary`)."""
    return write_json(Path(run_dir) / SUMMARY_FILE, summary)


def read_summary(run_dir: str | Path) -> EvalSummary:
    """The run's ``summary.json``."""
    return cast(EvalSummary, read_object(Path(run_dir) / SUMMARY_FILE))


def write_usage(run_dir: str | Path, usage: Mapping[str, object]) -> Path:
    """Save ``usage.json``: LM usage totals (per role when a ledger was kept, per op)."""
    return write_json(Path(run_dir) / USAGE_FILE, usage)


def read_usage(run_dir: str | Path) -> JSONObject:
    """The run's ``usage.json``."""
    return read_object(Path(run_dir) / USAGE_FILE)


def blame_payload(report: BlameReport) -> BlameFile:
    """``blame.json``'s content for ``report``: its fields, stamped ``memtrace-blame/2``."""
    return stamp(BLAME, report.to_json())


def write_blame(run_dir: str | Path, report: BlameReport) -> Path:
    """Save ``blame.json``."""
    return write_json(Path(run_dir) / BLAME_FILE, blame_payload(report))


def read_blame_report(run_dir: str | Path) -> BlameReport:
    """The run's ``blame.json`` as a :class:`BlameReport` (DatasetError naming the file and field if malformed)."""
    path = Path(run_dir) / BLAME_FILE
    payload = read_blame(path)
    try:
        return BlameReport.from_json(payload)
    except (TypeError, ValueError, AttributeError, KeyError) as err:
        raise DatasetError(str(path), "signals", f"a signal does not parse ({err})") from None
