"""Read everything a report can show from a run directory, tolerating whatever is absent.

A run directory grows in stages written by different commands (``eval``, ``attribute``,
``optimize``, ``bench-attribution``), so every section is optional: a missing file means the section
is omitted, and a file that cannot be read becomes a note shown in the report (never a crash of the
whole report, never a silent gap). This module is the one place that knows file names and shapes;
the renderers only see :class:`RunData`.

Files read, every JSON one through :mod:`memtrace_opt.rundir`'s reader: ``config.yaml``, ``summary.json``,
``usage.json``, ``results.json`` and ``graphs/``; ``blame.json``, the closed loop's ``checkpoint.json``,
``final.json`` and ``rounds/round_<k>/blame.json``, each through its schema's reader (any version, converted to
the current shape); ``rounds/round_<k>/scores.json`` (via :mod:`.rounds`) and ``prompts/<component>.txt`` +
``.diff`` (see :mod:`memtrace_opt.loop.artifacts`); ``attribution_bench*.json`` / ``bench*.json`` (see
:mod:`.bench`).
"""

from __future__ import annotations

import difflib
import gzip
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import yaml

from memtrace_opt import rundir as rd
from memtrace_opt.rundir import read_blame, read_checkpoint, read_final, round_blame_files
from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.errors import DatasetError
from memtrace_opt.report.bench import BenchData, read_bench
from memtrace_opt.report.rounds import RoundPoint, read_rounds
from memtrace_opt.report.theme import ATTRIBUTION_FAILED

__all__ = ["FailedQuestion", "PromptChange", "RunData", "collect_run", "read_graph_meta"]


@dataclass(frozen=True)
class FailedQuestion:
    """One failed question as the report shows it, with its blame when attribution ran."""

    qa_id: str
    conversation: str | None
    question: str
    gold: str
    prediction: str
    category: str = ""
    judge_label: str = ""
    judge_reason: str = ""
    blame: BlameSignal | None = None


@dataclass(frozen=True)
class PromptChange:
    """A prompt component the optimizer rewrote: the seed, the new text and their unified diff."""

    component: str
    new: str
    seed: str | None
    diff: str


@dataclass
class RunData:
    """Everything found in a run directory; empty means the section is absent."""

    run_dir: Path
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    results: list[dict[str, Any]] = field(default_factory=list)
    failed: list[FailedQuestion] = field(default_factory=list)
    blame: list[BlameSignal] = field(default_factory=list)
    round_blame: dict[int, list[BlameSignal]] = field(default_factory=dict)
    checkpoint: dict[str, Any] = field(default_factory=dict)
    final: dict[str, Any] = field(default_factory=dict)
    rounds: list[RoundPoint] = field(default_factory=list)
    prompts: list[PromptChange] = field(default_factory=list)
    round_prompts: dict[int, list[PromptChange]] = field(default_factory=dict)
    bench: BenchData = field(default_factory=BenchData)
    graphs: dict[str, Path] = field(default_factory=dict)
    graph_meta: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def lm_usage(self) -> dict[str, Any]:
        """LM totals: the evaluation's summary, else usage.json, else the loop's whole spend (final.json)."""
        for found in (self.summary.get("lm_usage"), self.usage.get("graphs"), self.final.get("spend")):
            if isinstance(found, dict) and found:
                return found
        return {}

    @property
    def wall_s(self) -> float | None:
        found = self.final.get("spend")
        spend: dict[str, Any] = found if isinstance(found, dict) else {}
        value = self.summary.get("wall_s", spend.get("wall_s"))
        return float(value) if isinstance(value, (int, float)) else None

    @property
    def system(self) -> str:
        return str(self.summary.get("system") or (self.config.get("system") or {}).get("name")
                   or self.checkpoint.get("system") or self.final.get("system") or self.graph_meta.get("system") or "")

    def graph_file(self, conversation: str | None) -> Path | None:
        """The graph file of ``conversation`` (the only graph of the run when the conversation is unknown)."""
        if conversation is not None:
            return self.graphs.get(conversation)
        return next(iter(self.graphs.values())) if len(self.graphs) == 1 else None


def collect_run(run_dir: str | Path, *, bench_path: str | Path | None = None,
                compare: Sequence[str | Path] = ()) -> RunData:
    """Read run directory ``run_dir`` (plus the round scores of the ``compare`` runs, for the round chart).

    DatasetError if a directory does not exist, or ``run_dir`` holds no run file at all.
    """
    root = Path(run_dir)
    if not root.is_dir():
        raise DatasetError(str(root), None, "run directory not found")
    data = RunData(root)
    data.config = _load(data, root / rd.CONFIG_FILE, yaml_file=True) or {}
    data.summary = _load(data, root / rd.SUMMARY_FILE) or {}
    data.usage = _load(data, root / rd.USAGE_FILE) or {}
    data.results = _records(_load(data, root / rd.RESULTS_FILE), "results")
    # keyed by conversation id: a file name is the id itself unless the id needed escaping (rd.graph_path)
    by_file = {rd.graph_path(root, str(r.get("conversation"))).name: str(r.get("conversation")) for r in data.results}
    data.graphs = {by_file.get(p.name, p.name[: -len(rd.GRAPH_SUFFIX)]): p for p in rd.list_graphs(root)}
    data.graph_meta = read_graph_meta(next(iter(data.graphs.values()))) if data.graphs else {}
    data.checkpoint = _load(data, root / rd.CHECKPOINT_FILE, reader=read_checkpoint) or {}
    data.final = _load(data, root / rd.FINAL_FILE, reader=read_final) or {}
    data.blame = _signals(data, root / rd.BLAME_FILE)
    for k, path in round_blame_files(root):
        data.round_blame[k] = _signals(data, path)
    data.failed = _failed(data)
    data.rounds = _rounds(data, root, compare)
    data.prompts = _prompts(data, root / "prompts")
    for folder in sorted((root / "rounds").glob("round_*/prompts")):
        number = folder.parent.name.removeprefix("round_")
        changed = [c for c in _prompts(data, folder) if c.diff]
        if number.isdigit() and int(number) > 0 and changed:
            data.round_prompts[int(number)] = changed
    bench_files = [Path(bench_path)] if bench_path else sorted(set(root.glob("attribution_bench*.json"))
                                                                | set(root.glob("bench*.json")))
    data.bench = read_bench(_load(data, p, required=bench_path is not None) for p in bench_files)
    if not (data.summary or data.results or data.graphs or data.blame or data.rounds
            or data.prompts or data.bench or data.checkpoint):
        found = " (only config.yaml)" if data.config else ""
        raise DatasetError(str(root), None, f"no results here{found}: no summary.json, results.json, graphs/, "
                                            "blame.json, checkpoint.json, prompts/ or attribution_bench.json; "
                                            "run `memtrace-opt eval` or `optimize` first")
    return data


def _load(data: RunData, path: Path, *, yaml_file: bool = False, required: bool = False,
          reader: Callable[[Path], Any] | None = None) -> Any:
    """The parsed file (by ``reader``, a schema's, when given), None when absent; an unreadable file becomes
    a note (or an error when required)."""
    if not path.exists():
        if required:
            raise DatasetError(str(path), None, "file not found")
        return None
    try:
        if reader is not None:
            return reader(path)
        return yaml.safe_load(path.read_text(encoding="utf-8")) if yaml_file else rd.read_json(path)
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError, DatasetError) as err:
        where = f"{err.item}: " if isinstance(err, DatasetError) and err.item else ""
        message = " ".join((where + (err.message if isinstance(err, DatasetError) else str(err))).split())[:200]
        if required:
            raise DatasetError(str(path), None, f"cannot read: {message}") from None
        data.notes.append(f"{_relative(data, path)}: could not be read ({message}); section omitted")
        return None


def _relative(data: RunData, path: Path) -> Path:
    return path.relative_to(data.run_dir) if path.is_relative_to(data.run_dir) else path


def _records(payload: Any, key: str) -> list[dict[str, Any]]:
    records = payload.get(key) if isinstance(payload, dict) else payload
    return [r for r in records or [] if isinstance(r, dict)] if isinstance(records, list) else []


_BLAME_FIELDS = {f.name for f in fields(BlameSignal)}


def _signals(data: RunData, path: Path) -> list[BlameSignal]:
    """The blame signals of a run's or a round's ``blame.json``; a malformed record is skipped with a note."""
    payload = _load(data, path, reader=read_blame)
    out = []
    for i, rec in enumerate(payload["signals"] if payload else []):
        try:
            signal = BlameSignal.from_dict({k: v for k, v in rec.items() if k in _BLAME_FIELDS})
        except (TypeError, ValueError, AttributeError) as err:
            data.notes.append(f"{_relative(data, path)}: record {i} skipped ({' '.join(str(err).split())[:160]})")
            continue
        out.append(signal if signal.error_type else replace(signal, error_type=ATTRIBUTION_FAILED))
    return out


def _failed(data: RunData) -> list[FailedQuestion]:
    """Failed, scored questions from the results, joined with their blame; blamed cases without a result too."""
    by_case = {b.case_id: b for b in data.blame}
    out: list[FailedQuestion] = []
    seen: set[str] = set()
    for r in data.results:
        if _score(r.get("judge_score")) != 0 or "unscored" in (r.get("flags") or ()):
            continue
        qa_id, conv = str(r.get("qa_id", "")), r.get("conversation")
        blame = by_case.get(f"{conv}/{qa_id}") or by_case.get(qa_id)
        if blame is not None:
            seen.add(blame.case_id)
        out.append(FailedQuestion(qa_id, conv, str(r.get("question", "")), str(r.get("gold", "")),
                                  str(r.get("prediction", "")), str(r.get("category", "")),
                                  str(r.get("judge_label", "")), str(r.get("judge_reason", "")), blame))
    for b in data.blame:
        if b.case_id not in seen:
            conv, qa_id = _split_case(b.case_id, data.graphs)
            out.append(FailedQuestion(qa_id, conv, b.question, b.gold, b.prediction, blame=b))
    return out


def _score(value: Any) -> int | None:
    return int(float(value) >= 0.5) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _split_case(case_id: str, graphs: dict[str, Path]) -> tuple[str | None, str]:
    """``<conversation>/<qa id>`` → its parts, when the prefix names a graph of the run (qa ids may hold '/')."""
    for conv in graphs:
        if case_id.startswith(f"{conv}/"):
            return conv, case_id[len(conv) + 1:]
    return None, case_id


def _rounds(data: RunData, root: Path, compare: Sequence[str | Path]) -> list[RoundPoint]:
    """Round scores of this run and of each compared run (labelled by method, or method and folder when clashing)."""
    default = str((data.config.get("optimizer") or {}).get("method") or "optimized")
    points: list[RoundPoint] = []
    for i, folder in enumerate([root, *map(Path, compare)]):
        if i and not folder.is_dir():
            raise DatasetError(str(folder), None, "run directory to compare not found")
        try:
            got = read_rounds(folder, default_method=default)
        except (OSError, ValueError, DatasetError) as err:
            data.notes.append(f"{folder}: optimization scores could not be read ({err})")
            continue
        taken = {p.method for p in points}
        points += [RoundPoint(f"{p.method} ({folder.name})", p.round, p.accuracy, p.low, p.high)
                   if p.method in taken else p for p in got]
    return points


def _prompts(data: RunData, folder: Path) -> list[PromptChange]:
    """Rewritten prompts with their diff against the seed (the ``.diff`` file if written, else computed).

    Components whose text equals the seed are left out: the loop writes every prompt, changed or not.
    """
    if not folder.is_dir():
        return []
    seeds: dict[str, str] | None = None
    out = []
    for path in sorted(folder.glob("*.txt")):
        if path.name.endswith(".seed.txt"):
            continue
        component = path.stem
        new = path.read_text(encoding="utf-8", errors="replace")
        seed = _first_text(folder / f"{component}.seed.txt", folder / "seed" / f"{component}.txt")
        diff_file = path.with_suffix(".diff")
        if diff_file.exists():
            out.append(PromptChange(component, new, seed, diff_file.read_text(encoding="utf-8", errors="replace")))
            continue
        if seed is None:
            seeds = _seed_prompts(data) if seeds is None else seeds
            seed = seeds.get(component)
        if seed == new:
            continue
        diff = "" if seed is None else "\n".join(difflib.unified_diff(
            seed.splitlines(), new.splitlines(), f"seed/{component}", f"optimized/{component}", lineterm=""))
        out.append(PromptChange(component, new, seed, diff))
    return out


def _seed_prompts(data: RunData) -> dict[str, str]:
    """The prompts the run started from: the loop's seed candidate, else the prompt set a graph recorded, else
    the system's defaults, with the config's overrides on top (the system module is imported only then)."""
    seed = data.checkpoint.get("seed_candidate")
    if isinstance(seed, dict) and seed:
        return {k: v for k, v in seed.items() if isinstance(v, str)}
    base = data.graph_meta.get("prompts")
    if not isinstance(base, dict) or not base:
        from memtrace_opt.errors import ConfigError
        from memtrace_opt.systems.registry import get_system

        try:
            base = get_system(data.system).prompts() if data.system else {}
        except ConfigError:
            base = {}
    overrides = (data.config.get("system") or {}).get("prompts") or {}
    return {k: v for k, v in {**base, **overrides}.items() if isinstance(v, str)}


def read_graph_meta(path: Path) -> dict[str, Any]:
    """A graph file's meta (system, prompts, conversation), read from its header line only."""
    from memtrace_opt.graph.io_json import loads

    opener: Any = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            head = loads(fh.readline())
    except (OSError, EOFError, ValueError):
        return {}
    meta = head.get("meta") if isinstance(head, dict) else None
    return meta if isinstance(meta, dict) else {}


def _first_text(*paths: Path) -> str | None:
    for p in paths:
        if p.exists():
            return p.read_text(encoding="utf-8", errors="replace")
    return None
