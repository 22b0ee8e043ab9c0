"""Running a campaign: each method in order, resumed from its checkpoint, its LM answers saved as it goes.

:func:`run_campaign` is the same call to start and to continue. Each method is one
:func:`memtrace_opt.run.optimize` into ``runs/<method>``, with the LM cache in ``state/``; the cache is
exported to a new chunk after each method, periodically while one runs, and whenever the campaign stops.
A sealed campaign also archives each finished run dir into ``state/`` (:mod:`.archive`), and a fresh clone
restores those instead of replaying them.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Callable

from memtrace_opt.atomic import atomic_write_bytes
from memtrace_opt.campaign.archive import archive_run, restore_runs
from memtrace_opt.campaign.cache import cache_path, export_cache, import_cache
from memtrace_opt.campaign.progress import CampaignProgress, DONE, campaign_progress, save_progress
from memtrace_opt.campaign.relocate import adopt_moved_config
from memtrace_opt.campaign.spec import RUNS_DIR, STATE_DIR, Campaign, load_campaign
from memtrace_opt.config import load_config
from memtrace_opt.loop import load_state
from memtrace_opt.run import Injected, optimize

__all__ = ["run_campaign"]


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
            save_progress(self.camp)
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
    camp = load_campaign(folder)
    root = camp.folder
    say = progress or (lambda _line: None)
    if camp.sealed_to is not None:
        _keep_run_dirs_out_of_git(root)
    imported = import_cache(root)
    if imported:
        say(f"campaign {camp.name}: {imported:,} stored LM answers imported into {cache_path(root)}")
    finished = {m for m in camp.methods if (s := load_state(root / RUNS_DIR / m)) is not None and s.status == DONE}
    for method in restore_runs(camp, finished):
        say(f"campaign {camp.name}: {method}: finished run restored from its archive (not replayed)")
    state_dir = (root / STATE_DIR).resolve()
    cfg = load_config(camp.config).model_copy(update={"cache_dir": state_dir})
    done = 0
    with _PeriodicExport(camp, export_every_s, say) as exporter:
        for i, method in enumerate(camp.methods, 1):
            if stop_after is not None and done >= stop_after:
                break
            run_dir = root / RUNS_DIR / method
            if adopt_moved_config(run_dir, cfg):  # finished runs too: attribute/report read their config.yaml
                say(f"campaign {camp.name}: {method}: run dir moved from another clone, its config paths updated")
            state = load_state(run_dir)
            if state is not None and state.status == DONE:
                if archive_run(camp, method) is not None:  # finished before archives existed
                    say(f"campaign {camp.name}: {method}: finished run dir archived into {STATE_DIR}/")
                done += 1
                continue
            say(f"campaign {camp.name}: method {i}/{len(camp.methods)} {method} "
                f"{'continuing' if state is not None else 'starting'}")
            optimize(camp.config, method=method, out=run_dir, cache_dir=state_dir, resume=True, attribute_heldout=False,
                     progress=progress, lms=injected.lms if injected else None,
                     resources=injected.resources if injected else None)
            done += 1
            archive_run(camp, method)
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
