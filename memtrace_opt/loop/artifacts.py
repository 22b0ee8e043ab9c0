"""Files a loop run leaves for people and for ``compare``/``report`` to read.

Layout under RUN_DIR::

    checkpoint.json                  loop state (see checkpoint.py)
    tuning.json, tuning.sqlite       tuned settings and the Optuna study (when tuning ran)
    rounds/round_<k>/prompts/*.txt   the candidate after round k
    rounds/round_<k>/blame.json      blame signals of the round's failures, grouped by component
    rounds/round_<k>/scores.json     per-question training and validation scores
    rounds/round_<k>/optimizer.json  what GEPA/MIPROv2 did (proposals, metric calls)
    rounds/round_<k>/gepa/           GEPA's log (no pickled state: a killed round reruns from its start,
                                     its LM calls answered by the disk cache)
    prompts/<component>.txt          the final (best) prompts
    prompts/<component>.diff         unified diff of each changed prompt against the seed
    final.json                       held-out result: per-question scores, seed vs best, spend

Every JSON file here names its schema (``"format"``); :mod:`memtrace_opt.schemas` stamps and reads them.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Mapping, Sequence

from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.run_dir import read_json, write_json  # the one JSON pair of a run dir (atomic; errors name the file)

__all__ = ["FINAL_FILE", "blame_summary", "prompt_diff", "read_json", "round_dir", "write_json", "write_prompts"]

FINAL_FILE = "final.json"


def round_dir(run_dir: Path, index: int) -> Path:
    return run_dir / "rounds" / f"round_{index}"


def prompt_diff(component: str, seed: str, new: str) -> str:
    """Unified diff of one prompt, seed → new ("" when unchanged)."""
    lines = difflib.unified_diff(seed.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=f"seed/{component}", tofile=f"optimized/{component}")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def write_prompts(directory: Path, prompts: Mapping[str, str], seed: Mapping[str, str] | None = None) -> list[str]:
    """Write ``<component>.txt`` for each prompt and, given ``seed``, ``.diff`` for each changed one.

    Returns the changed component names.
    """
    directory.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, text in prompts.items():
        (directory / f"{name}.txt").write_text(text, encoding="utf-8")
        if seed is not None and seed.get(name) != text:
            changed.append(name)
            (directory / f"{name}.diff").write_text(prompt_diff(name, seed.get(name, ""), text), encoding="utf-8")
    return changed


def blame_summary(signals: Sequence[BlameSignal], targets: Sequence[str] | None = None) -> dict[str, Any]:
    """Blame grouped by prompt component (:func:`memtrace_opt.attribution.aggregate.aggregate`'s shape);
    with ``targets`` (the unattributed ablation) every signal counts for every target component."""
    from memtrace_opt.attribution.aggregate import aggregate

    return aggregate(signals, spread_over=targets)
