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
committed (LoCoMo is CC BY-NC) the chunks are sealed to the dataset file (:mod:`.seal`:
``cache-NNNN.jsonl.gz.sealed``, readable only with the same file), the run dirs stay out of git (the
campaign writes its own ``.gitignore``), ``state/progress.json`` (numbers only) carries the standing to a
fresh clone, and each finished run dir is sealed into ``state/`` (:mod:`.archive`). A fresh clone restores
the finished methods from their archives (never recomputed, so code changed since cannot alter them) and
redoes the unfinished one's current round from the unsealed cache: no LM call is repeated, and the
results are those of the uninterrupted run.

``run_campaign`` is the same call to start and to continue; ``campaign_progress`` reads where a
campaign stands without running anything.

Modules: :mod:`.spec` (``campaign.yaml``), :mod:`.cache` (the LM answers as committed chunks),
:mod:`.seal` (chunks sealed to a dataset file), :mod:`.archive` (finished run dirs, sealed), :mod:`.relocate` (a run dir moved to another clone),
:mod:`.running` (:func:`run_campaign`, each method an :func:`memtrace_opt.run.optimize`),
:mod:`.progress` (:func:`campaign_progress`), :mod:`.estimate` (LM time before a run starts).
"""

from __future__ import annotations

from memtrace_opt.campaign.cache import cache_path, export_cache, import_cache
from memtrace_opt.campaign.progress import CampaignProgress, MethodProgress, campaign_progress
from memtrace_opt.campaign.running import run_campaign
from memtrace_opt.campaign.spec import CAMPAIGN_FILE, Campaign, load_campaign

__all__ = ["CAMPAIGN_FILE", "Campaign", "CampaignProgress", "MethodProgress", "cache_path", "campaign_progress",
           "export_cache", "import_cache", "load_campaign", "run_campaign"]
