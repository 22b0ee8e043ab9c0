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

__all__ = ["FINAL_FILE", "blame_summary", "diff_rows", "diff_stats", "prompt_diff", "read_json", "round_blame_files",
           "round_dir", "write_json", "write_prompts"]

FINAL_FILE = "final.json"


def round_dir(run_dir: Path, index: int) -> Path:
    return run_dir / "rounds" / f"round_{index}"


def round_blame_files(run_dir: Path) -> list[tuple[int, Path]]:
    """``(k, rounds/round_<k>/blame.json)`` of every round that wrote one, in round order (the report and
    ``compare`` read the same files)."""
    found = []
    for path in (run_dir / "rounds").glob("round_*/blame.json"):
        suffix = path.parent.name.removeprefix("round_")
        if suffix.isdigit():
            found.append((int(suffix), path))
    return sorted(found)


def prompt_diff(component: str, seed: str, new: str) -> str:
    """Unified diff of one prompt, seed → new ("" when unchanged)."""
    lines = difflib.unified_diff(seed.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=f"seed/{component}", tofile=f"optimized/{component}")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def diff_stats(diff_text: str) -> tuple[int, int]:
    """``(added, removed)`` line counts of a unified diff as the report renders it (file headers excluded):
    one count for the report's prompt diffs and ``compare``'s ``changed_prompts``."""
    rows = diff_rows(diff_text.splitlines())
    return sum(k == "add" for k, _ in rows), sum(k == "del" for k, _ in rows)


def diff_rows(lines: Sequence[str]) -> list[tuple[str, str]]:
    """``(kind, text)`` per line of a unified diff, kind one of meta/hunk/add/del/ctx; a removed line re-added
    unchanged (only its line ending differed, as when the seed lacked a final newline) is context, not a change."""
    rows: list[tuple[str, str]] = []
    i = 0
    while i < len(lines):
        kind = _diff_kind(lines[i])
        if kind != "del":
            rows.append((kind, lines[i] if kind in ("meta", "hunk") else lines[i][1:]))
            i += 1
            continue
        j = i
        while j < len(lines) and _diff_kind(lines[j]) == "del":
            j += 1
        k = j
        while k < len(lines) and _diff_kind(lines[k]) == "add":
            k += 1
        removed, added = [ln[1:] for ln in lines[i:j]], [ln[1:] for ln in lines[j:k]]
        same = [r for r in removed if r in added]
        rows += [("del", r) for r in removed if r not in same]
        rows += [("ctx", a) if a in same else ("add", a) for a in added]
        i = k
    return rows


def _diff_kind(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "meta"
    if line.startswith("@@"):
        return "hunk"
    return {"+": "add", "-": "del"}.get(line[:1], "ctx")


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
