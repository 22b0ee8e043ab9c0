"""Campaigns: experiments that outlive their machine, continued from state committed in git.

A long ``optimize`` or a comparison of several methods takes days on a 2-core CPU; the machine may
die, or the work may move to another one. A campaign folder holds everything needed to continue it
on a fresh clone, with nothing finished recomputed::

    experiments/campaigns/NAME/campaign.yaml             config: ../../configs/x.yaml, methods: [none, attributed],
                                                         costs: ../../results/bench.json (optional: LM time left)
    experiments/campaigns/NAME/runs/<method>/            each method's run dir (checkpoint.json, graphs, results)
    experiments/campaigns/NAME/state/cache-NNNN.jsonl.gz the LM answers, in append-only chunks (committed)
    experiments/campaigns/NAME/state/lm_cache.sqlite     the working LM cache (git-ignored, rebuilt from the chunks)

Why chunks: the SQLite cache is a binary file that changes on every call, so git would store a
full copy per commit. Append-only gzip chunks (sorted by key, written once, never rewritten) are
stored once each, and importing them rebuilds the cache: on resume every LM call already made is
free. The checkpoint of each run dir (rewritten after every step) says which rounds are done; work
inside an unfinished round is redone on resume, and the cache makes that redone work free.

``sealed: true`` (required, true or false, whenever the run config reads a dataset file): the state quotes
the data (LM replies copy conversation text; run dirs hold whole graphs), so for data that must not be
committed (LoCoMo is CC BY-NC) the chunks are sealed to the dataset file (:mod:`memtrace_opt.seal`:
``cache-NNNN.jsonl.gz.sealed``, readable only with the same file), the run dirs stay out of git (the
campaign writes its own ``.gitignore``), and ``state/progress.json`` (numbers only) carries the standing
to a fresh clone. There the finished work is replayed from the unsealed cache: no LM call is repeated,
and the results are those of the uninterrupted run.

``run_campaign`` is the same call to start and to continue; ``campaign_progress`` reads where a
campaign stands without running anything.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import sqlite3
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from memtrace_opt.atomic import atomic_write_bytes
from memtrace_opt.errors import ConfigError
from memtrace_opt.run.lms import Injected

__all__ = ["CAMPAIGN_FILE", "Campaign", "CampaignProgress", "MethodProgress", "cache_path", "campaign_progress",
           "export_cache", "import_cache", "load_campaign", "run_campaign"]

CAMPAIGN_FILE = "campaign.yaml"
RUNS_DIR = "runs"
STATE_DIR = "state"
_FIELDS = ("config", "methods", "description", "costs", "costs_row", "sealed")
_CHUNK = re.compile(r"^cache-(\d{4,})\.jsonl\.gz(\.sealed)?$")
#: A sealed campaign's standing in numbers, committed (its run dirs are not).
PROGRESS_FILE = "progress.json"
_COLUMNS = ("key", "model_id", "text", "prompt_tokens", "completion_tokens", "finish_reason", "latency_s", "created")
#: Config fields a campaign overrides (``out=`` supersedes them), so they may differ between machines.
_SUPERSEDED = ("output_dir", "run_name")
#: A checkpoint's status once the held-out comparison is written ("running": rounds; "optimized": held-out pending).
_DONE = "done"


@dataclass(frozen=True)
class Campaign:
    """A validated ``campaign.yaml``: the run config (absolute, resolved against the file) and the methods."""

    folder: Path
    name: str
    config: Path
    methods: tuple[str, ...]
    description: str = ""
    #: A ``bench-lm --json`` result measured on this machine (and its row): sizes the LM time left.
    costs: Path | None = None
    costs_row: str | None = None
    #: The dataset file the state is sealed to (None: committed as plain text).
    sealed_to: Path | None = None


def _dataset_file(config_path: Path) -> Path | None:
    """The dataset file a run config reads (``dataset.path``, against the config's folder); None: bundled data."""
    try:
        data = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None  # load_config reports it, with the field, when the campaign runs
    dataset = data.get("dataset") if isinstance(data, dict) else None
    path = dataset.get("path") if isinstance(dataset, dict) else None
    return (config_path.parent / path).resolve() if isinstance(path, str) and path.strip() else None


def _sealing(where: str, data: dict[str, Any], config_path: Path) -> Path | None:
    dataset = _dataset_file(config_path)
    sealed = data.get("sealed")
    if sealed is None and dataset is not None:
        raise ConfigError(where, "sealed", f"required: the config reads the dataset file {dataset}; say sealed: true "
                          "to commit the state sealed to that file (data that must not be committed, such as "
                          "LoCoMo), or sealed: false when the file's contents may be committed")
    if sealed is not None and not isinstance(sealed, bool):
        raise ConfigError(where, "sealed", f"expected true or false, found {sealed!r}")
    if sealed and dataset is None:
        raise ConfigError(where, "sealed", "the config reads no dataset file (dataset.path) to seal the state to")
    return dataset if sealed else None


def load_campaign(folder: str | Path) -> Campaign:
    """Read and validate ``FOLDER/campaign.yaml``; any problem is one ConfigError naming the file and field."""
    from memtrace_opt.loop.plan import METHODS

    root = Path(folder)
    path = root / CAMPAIGN_FILE
    where = str(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(where, None, "file not found: a campaign folder needs a campaign.yaml") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise ConfigError(where, None, f"unreadable: {err}".splitlines()[0]) from None
    if not isinstance(data, dict):
        raise ConfigError(where, None, f"expected a mapping at the top level, found {type(data).__name__}")
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise ConfigError(where, unknown[0], f"unknown field (expected {', '.join(_FIELDS)})")
    config = data.get("config")
    if not isinstance(config, str) or not config.strip():
        raise ConfigError(where, "config", "required: the path of a run config, relative to this file")
    config_path = (root / config).resolve()
    if not config_path.is_file():
        raise ConfigError(where, "config", f"{config} is not a file (resolved to {config_path})")
    methods = data.get("methods")
    if not isinstance(methods, list) or not methods:
        raise ConfigError(where, "methods", f"required: a non-empty list of methods out of {', '.join(METHODS)}")
    for i, m in enumerate(methods):
        if m not in METHODS:
            raise ConfigError(where, f"methods[{i}]", f"unknown method {m!r}; expected one of {', '.join(METHODS)}")
    if len(set(methods)) != len(methods):
        raise ConfigError(where, "methods", "a method is listed twice (each has one run dir)")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ConfigError(where, "description", "expected text")
    costs = data.get("costs")
    costs_path = None
    if costs is not None:
        if not isinstance(costs, str) or not (root / costs).resolve().is_file():
            raise ConfigError(where, "costs", f"{costs!r} is not a file: a bench-lm --json result, relative to this file")
        costs_path = (root / costs).resolve()
    costs_row = data.get("costs_row")
    if costs_row is not None and (not isinstance(costs_row, str) or costs_path is None):
        raise ConfigError(where, "costs_row", "a row label of the costs file (needs costs:)")
    return Campaign(root, root.resolve().name, config_path, tuple(methods), description, costs_path, costs_row,
                    _sealing(where, data, config_path))


# -- the LM cache as committed chunks ------------------------------------------------------------
def cache_path(folder: str | Path) -> Path:
    """The working SQLite cache of a campaign (git-ignored): where its runs' LM clients cache answers."""
    from memtrace_opt.lm.factory import CACHE_FILE

    return Path(folder) / STATE_DIR / CACHE_FILE


def _chunks(folder: Path) -> list[Path]:
    state = folder / STATE_DIR
    return sorted((p for p in state.glob("cache-*.jsonl.gz*") if _CHUNK.match(p.name)),
                  key=lambda p: int(_CHUNK.match(p.name).group(1)))  # type: ignore[union-attr]


def _key(folder: Path) -> bytes | None:
    """The seal key of the campaign in ``folder``; None when its state is plain."""
    from memtrace_opt.seal import dataset_key

    sealed_to = load_campaign(folder).sealed_to
    return None if sealed_to is None else dataset_key(sealed_to)


def _chunk_text(chunk: Path, key: bytes | None) -> io.TextIOWrapper:
    """A chunk's lines; a sealed chunk needs the campaign's key, a plain one must not be in a sealed campaign."""
    from memtrace_opt.seal import SEALED_SUFFIX, unseal

    is_sealed = chunk.name.endswith(SEALED_SUFFIX)
    if is_sealed != (key is not None):
        raise ConfigError(str(chunk), None, "a sealed chunk in a plain campaign" if is_sealed else
                          "a plain chunk in a sealed campaign: it would commit the data; delete it from git")
    raw = chunk.read_bytes()
    if key is not None:
        raw = unseal(raw, key, where=str(chunk))
    return io.TextIOWrapper(gzip.GzipFile(fileobj=io.BytesIO(raw)), encoding="utf-8")


def _read_chunks(folder: Path) -> dict[str, dict[str, Any]]:
    """Every committed entry by key (a later chunk never repeats a key, but if it did the first wins)."""
    entries: dict[str, dict[str, Any]] = {}
    key = _key(folder) if _chunks(folder) else None
    for chunk in _chunks(folder):
        try:
            with _chunk_text(chunk, key) as fh:
                for n, line in enumerate(fh, 1):
                    row = json.loads(line)
                    if not isinstance(row, dict) or set(row) != set(_COLUMNS):
                        raise ValueError(f"line {n}: expected the columns {', '.join(_COLUMNS)}")
                    entries.setdefault(row["key"], row)
        except (OSError, EOFError, ValueError) as err:
            raise ConfigError(str(chunk), None, f"unreadable cache chunk ({err}); restore it from git") from None
    return entries


def _open_cache(folder: Path) -> sqlite3.Connection:
    from memtrace_opt.lm.cache import open_cache_db

    path = cache_path(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    return open_cache_db(path)


def import_cache(folder: str | Path) -> int:
    """Load the committed chunks into the working cache (entries it already has are kept); returns how many."""
    root = Path(folder)
    entries = _read_chunks(root)
    db = _open_cache(root)
    try:
        before = db.total_changes
        db.executemany(f"INSERT OR IGNORE INTO lm_cache VALUES ({', '.join('?' * len(_COLUMNS))})",
                       [tuple(e[c] for c in _COLUMNS) for e in entries.values()])
        db.commit()
        return db.total_changes - before
    finally:
        db.close()


def export_cache(folder: str | Path) -> Path | None:
    """Write the working cache's entries that no chunk holds yet to a new chunk; returns it (None: nothing new).

    Append-only and deterministic (sorted by key, gzip without a timestamp), so each chunk is one git blob
    forever and the same entries give the same bytes.
    """
    root = Path(folder)
    if not cache_path(root).exists():
        return None
    known = set(_read_chunks(root))
    db = _open_cache(root)
    try:
        rows = [dict(zip(_COLUMNS, r)) for r in db.execute(f"SELECT {', '.join(_COLUMNS)} FROM lm_cache ORDER BY key")]
    finally:
        db.close()
    new = [r for r in rows if r["key"] not in known]
    if not new:
        return None
    from memtrace_opt.seal import SEALED_SUFFIX, seal

    chunks = _chunks(root)
    number = int(_CHUNK.match(chunks[-1].name).group(1)) + 1 if chunks else 1  # type: ignore[union-attr]
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as gz:
        for r in new:
            gz.write((json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))
    key = _key(root)
    name = f"cache-{number:04d}.jsonl.gz"
    if key is None:
        return atomic_write_bytes(root / STATE_DIR / name, buf.getvalue())
    return atomic_write_bytes(root / STATE_DIR / f"{name}{SEALED_SUFFIX}", seal(buf.getvalue(), key))


def _cache_totals(folder: Path) -> tuple[int, float]:
    """``(entries, LM seconds they took)`` over the chunks and the working cache together."""
    latency = {k: float(e["latency_s"]) for k, e in _read_chunks(folder).items()}
    if cache_path(folder).exists():
        db = sqlite3.connect(f"file:{cache_path(folder)}?mode=ro", uri=True)
        try:
            latency.update({k: float(s) for k, s in db.execute("SELECT key, latency_s FROM lm_cache")})
        except sqlite3.DatabaseError as err:
            raise ConfigError(str(cache_path(folder)), None,
                              f"not a usable LM cache ({err}); delete it, the committed chunks rebuild it") from None
        finally:
            db.close()
    return len(latency), sum(latency.values())


# -- a run dir moved to another clone --------------------------------------------------------------
def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): data}


def _relocated(old: Any, new: Any, old_root: Path, new_root: Path) -> bool:
    """Whether ``old`` is the path ``new`` as it was in the clone at ``old_root``."""
    if not (isinstance(old, str) and isinstance(new, str)):
        return False
    try:
        return Path(old).relative_to(old_root) == Path(new).relative_to(new_root)
    except ValueError:
        return False


def _adopt_moved_config(run_dir: Path, cfg: Any) -> bool:
    """Rewrite ``run_dir/config.yaml`` when it differs from ``cfg`` only by the clone's location.

    A loaded config's paths are absolute (dataset.path, cache_dir, output_dir), so a run dir copied to a
    fresh clone elsewhere would be refused by ``optimize``'s changed-config check. The clone's old
    root is what the saved and the new ``cache_dir`` (both ``<clone>/.../NAME/state``) have before their
    common tail; a path under it that maps to the same relative path under the new root is the same file.
    Any other change is left for ``optimize`` to refuse.
    """
    from memtrace_opt import rundir as rd

    saved = run_dir / rd.CONFIG_FILE
    if not saved.exists() or saved.read_text(encoding="utf-8") == cfg.dump_yaml():
        return False
    old, new = _flat(yaml.safe_load(saved.read_text(encoding="utf-8"))), _flat(cfg.model_dump(mode="json"))
    changed = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k) and k not in _SUPERSEDED]
    old_cache, new_cache = Path(str(old.get("cache_dir"))).parts, Path(str(new.get("cache_dir"))).parts
    tail = 0
    while tail < min(len(old_cache), len(new_cache)) and old_cache[-1 - tail] == new_cache[-1 - tail]:
        tail += 1
    old_root, new_root = Path(*old_cache[:len(old_cache) - tail]), Path(*new_cache[:len(new_cache) - tail])
    if changed and (old_root == new_root
                    or not all(_relocated(old.get(k), new.get(k), old_root, new_root) for k in changed)):
        return False
    rd.write_config(run_dir, cfg)
    return True


# -- running -------------------------------------------------------------------------------------
class _PeriodicExport:
    """Exports the working cache to a new chunk every ``every_s`` seconds while a method runs: a method is
    hours of LM time, and a machine taken away with SIGKILL runs no ``finally``."""

    def __init__(self, camp: Campaign, every_s: float | None, say: Callable[[str], None]) -> None:
        self.camp, self.every_s, self.say = camp, every_s, say
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None

    def export(self) -> Path | None:
        with self.lock:  # one writer of chunk numbers and progress.json at a time
            chunk = export_cache(self.camp.folder)
            _save_progress(self.camp)
            return chunk

    def _loop(self) -> None:
        assert self.every_s is not None
        while not self.stopped.wait(self.every_s):
            try:
                chunk = self.export()
            except (sqlite3.Error, OSError) as err:  # retried next time; said, never silent
                self.say(f"campaign {self.camp.name}: periodic export failed ({err}); retrying in {self.every_s:.0f} s")
                continue
            if chunk is not None:
                self.say(f"campaign {self.camp.name}: LM answers so far saved to {chunk.name}")

    def __enter__(self) -> _PeriodicExport:
        if self.every_s:
            self.thread = threading.Thread(target=self._loop, name="campaign-export", daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stopped.set()
        if self.thread is not None:
            self.thread.join()
        self.export()  # no-op when nothing new (the normal path exported already)


def run_campaign(folder: str | Path, *, injected: Injected | None = None,
                 progress: Callable[[str], None] | None = None, stop_after: int | None = None,
                 export_every_s: float | None = None) -> CampaignProgress:
    """Start or continue the campaign in ``folder``: each method in order, resumed from its checkpoint.

    ``stop_after``: finish that many methods (counting those already finished), then return. The LM cache
    is exported to a new chunk after each method, every ``export_every_s`` seconds while one runs, and when
    anything (Ctrl-C, SIGTERM from the CLI) stops the campaign, so a ``git commit`` of the folder then holds
    every answer paid for.
    """
    from memtrace_opt.config import load_config
    from memtrace_opt.loop import load_state
    from memtrace_opt.run import optimize

    camp = load_campaign(folder)
    root = camp.folder
    say = progress or (lambda _line: None)
    if camp.sealed_to is not None:
        _keep_run_dirs_out_of_git(root)
    imported = import_cache(root)
    if imported:
        say(f"campaign {camp.name}: {imported:,} stored LM answers imported into {cache_path(root)}")
    state_dir = (root / STATE_DIR).resolve()
    cfg = load_config(camp.config).model_copy(update={"cache_dir": state_dir})
    done = 0
    with _PeriodicExport(camp, export_every_s, say) as exporter:
        for i, method in enumerate(camp.methods, 1):
            if stop_after is not None and done >= stop_after:
                break
            run_dir = root / RUNS_DIR / method
            if _adopt_moved_config(run_dir, cfg):  # finished runs too: attribute/report read their config.yaml
                say(f"campaign {camp.name}: {method}: run dir moved from another clone, its config paths updated")
            state = load_state(run_dir)
            if state is not None and state.status == _DONE:
                done += 1
                continue
            say(f"campaign {camp.name}: method {i}/{len(camp.methods)} {method} "
                f"{'continuing' if state is not None else 'starting'}")
            optimize(camp.config, method=method, out=run_dir, cache_dir=state_dir, resume=True, attribute_heldout=False,
                     progress=progress, lms=injected.lms if injected else None,
                     resources=injected.resources if injected else None)
            done += 1
            chunk = exporter.export()
            if chunk is not None:
                say(f"campaign {camp.name}: {method} finished; new LM answers saved to {chunk.name}")
    report = campaign_progress(root)
    say(str(report))
    return report


def _keep_run_dirs_out_of_git(root: Path) -> None:
    """A sealed campaign's run dirs quote the data in plain text: its own .gitignore keeps them out."""
    ignore = root / ".gitignore"
    if not ignore.exists() or f"{RUNS_DIR}/" not in ignore.read_text(encoding="utf-8").split():
        atomic_write_bytes(ignore, f"# sealed campaign: the run dirs quote the dataset; the state/ chunks are sealed\n"
                                   f"{RUNS_DIR}/\n".encode())


def _save_progress(camp: Campaign) -> None:
    """``state/progress.json`` for a sealed campaign: its standing in numbers, for a clone without run dirs."""
    if camp.sealed_to is None:
        return
    data = json.dumps(campaign_progress(camp.folder).to_dict(), indent=1, sort_keys=True) + "\n"
    atomic_write_bytes(camp.folder / STATE_DIR / PROGRESS_FILE, data.encode("utf-8"))


# -- progress ------------------------------------------------------------------------------------
@dataclass
class MethodProgress:
    """Where one method stands: ``not started``, ``running`` (``round`` rounds done of ``rounds``) or ``finished``."""

    method: str
    status: str
    round: int = 0
    rounds: int = 0
    heldout_accuracy: float | None = None
    seed_accuracy: float | None = None
    llm_calls: int = 0
    #: The checkpoint's own status (``running``, ``optimized``: rounds over, held-out pending; ``done``).
    phase: str = ""

    def text(self) -> str:
        if self.status == "finished":
            return f"{self.method}: finished, held-out {100 * (self.heldout_accuracy or 0):.1f}%"
        if self.status == "running" and (self.round >= self.rounds or self.phase == "optimized"):
            return f"{self.method}: held-out comparison"
        if self.status == "running":
            return f"{self.method}: round {min(self.round + 1, self.rounds)} of {self.rounds}"
        return f"{self.method}: not started"


@dataclass
class CampaignProgress:
    """A campaign's standing, from its committed files and working cache (nothing is run)."""

    name: str
    methods: list[MethodProgress] = field(default_factory=list)
    cached_entries: int = 0
    lm_seconds: float = 0.0
    #: ``(low, high)`` LM seconds still to spend, from the campaign's ``costs:`` (None: no costs given).
    lm_seconds_left: tuple[float, float] | None = None

    @property
    def finished(self) -> int:
        return sum(m.status == "finished" for m in self.methods)

    @property
    def remaining(self) -> int:
        return len(self.methods) - self.finished

    @property
    def llm_calls(self) -> int:
        return sum(m.llm_calls for m in self.methods)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "finished": self.finished, "remaining": self.remaining, "llm_calls": self.llm_calls}

    def __str__(self) -> str:
        running = [m.text() for m in self.methods if m.status == "running"]
        hours = self.lm_seconds / 3600
        spent = f"{hours:.1f} h" if hours >= 0.1 else f"{self.lm_seconds:.0f} s"
        if self.lm_seconds_left is None:
            left = "LM time left unknown (add costs: to campaign.yaml)"
        else:
            low, high = (s / 3600 for s in self.lm_seconds_left)
            left = f"{low:.1f} to {high:.1f} h LM time left (estimate)"
        return (f"campaign {self.name}: {self.finished}/{len(self.methods)} methods finished"
                f"{f' ({running[0]})' if running else ''}, {self.cached_entries:,} LM answers stored, "
                f"{spent} LM time spent, {left}")


def campaign_progress(folder: str | Path) -> CampaignProgress:
    """Read each method's checkpoint and the cache: status per method and totals, for ``campaign status``."""
    from memtrace_opt.loop import load_state

    camp = load_campaign(folder)
    out = CampaignProgress(camp.name)
    saved = _saved_progress(camp)
    for method in camp.methods:
        state = load_state(camp.folder / RUNS_DIR / method)
        if state is None:
            out.methods.append(saved.get(method, MethodProgress(method, "not started")))
            continue
        final = state.final or {}
        finished = state.status == _DONE
        out.methods.append(MethodProgress(
            method, "finished" if finished else "running", round=len(state.rounds),
            rounds=int(state.plan.get("rounds", 0)), heldout_accuracy=final.get("best_accuracy") if finished else None,
            seed_accuracy=final.get("seed_accuracy") if finished else None,
            llm_calls=int(state.spend.get("llm_calls", 0)), phase=state.status))
    out.cached_entries, out.lm_seconds = _cache_totals(camp.folder)
    if camp.costs is not None:
        out.lm_seconds_left = _time_left(camp, out.methods)
    return out


def _saved_progress(camp: Campaign) -> dict[str, MethodProgress]:
    """A sealed campaign's committed standing per method (a fresh clone has no run dirs to read)."""
    path = camp.folder / STATE_DIR / PROGRESS_FILE
    if camp.sealed_to is None or not path.exists():
        return {}
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))["methods"]
        return {r["method"]: MethodProgress(**r) for r in rows}
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ConfigError(str(path), None, f"unreadable campaign progress ({err}); restore it from git") from None


def _time_left(camp: Campaign, methods: list[MethodProgress]) -> tuple[float, float]:
    """``(low, high)`` LM seconds left: each method's estimate (:func:`memtrace_opt.estimate.estimate_config`)
    times the share of its work not done. A running method has done ``round`` of its ``rounds + 1`` parts
    (the rounds, then the held-out comparison); past its rounds only the held-out passes remain."""
    from memtrace_opt.estimate import estimate_config

    assert camp.costs is not None
    rows = {r["method"]: r for r in estimate_config(camp.config, camp.costs, methods=camp.methods,
                                                    row=camp.costs_row)["methods"]}
    low = high = 0.0
    for m in methods:
        r = rows[m.method]
        if m.status == "finished":
            continue
        if m.status == "running" and (m.phase == "optimized" or m.round >= m.rounds):
            low, high = low + r["heldout_s"], high + r["heldout_s"]
            continue
        share = 1.0 - (m.round / (m.rounds + 1) if m.status == "running" else 0.0)
        low, high = low + share * r["low_s"], high + share * r["high_s"]
    return low, high
