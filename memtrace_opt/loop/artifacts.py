"""The loop's text artifacts: prompt files, their diffs against the seed, and the round's grouped blame.

Where they go is :mod:`memtrace_opt.rundir`'s layout (``prompts/<component>.txt`` and ``.diff``,
``rounds/round_<k>/prompts/``); the diff counting here is shared by the report's prompt diffs and
``compare``'s ``changed_prompts``, so both count the same lines.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Mapping, Sequence

from memtrace_opt.attribution.aggregate import aggregate
from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.rundir import write_text

__all__ = ["blame_summary", "diff_rows", "diff_stats", "prompt_diff", "write_prompts"]


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
        write_text(directory / f"{name}.txt", text)
        if seed is not None and seed.get(name) != text:
            changed.append(name)
            write_text(directory / f"{name}.diff", prompt_diff(name, seed.get(name, ""), text))
    return changed


def blame_summary(signals: Sequence[BlameSignal], targets: Sequence[str] | None = None) -> dict[str, Any]:
    """Blame grouped by prompt component (:func:`memtrace_opt.attribution.aggregate.aggregate`'s shape);
    with ``targets`` (the unattributed ablation) every signal counts for every target component."""
    return aggregate(signals, spread_over=targets)
