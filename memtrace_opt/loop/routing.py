"""Where a run sent its effort: which prompts the best prompt set rewrote, and where blame fell.

Accuracy alone cannot tell a method that fixed the right prompt from one that got lucky on the
wrong one; ``compare`` shows, per run, the prompt components the best set changed against the seed
(lines added/removed, counted by :func:`~memtrace_opt.loop.artifacts.diff_stats`, the report's own
count) and the blame share per prompt component over the run's training failures.

Read from a run dir: ``checkpoint.json`` (``seed_candidate``/``best_candidate``, the prompt sets the
held-out evaluation compared, and ``plan.seed``, the config's seed) and every
``rounds/round_<k>/blame.json`` (the blame each round routed its failures by).

The share counts each blamed failure of each round once (a question failing in two rounds was routed
twice): the fraction whose blamed op belongs to prompt component X, prompt-less ops under
:data:`NO_PROMPT`. Failed attributions (no error type) are no blame and left out. The ``unattributed``
ablation's records are labels, not attributions (:func:`memtrace_opt.optimizers.feedback.unattributed_signal`:
every failure a ResponseError with no prompt component, sent to every prompt), so they give no share;
``none``, ``answer_feedback`` and ``miprov2`` record no signals at all.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from memtrace_opt.attribution.blame import UNATTRIBUTED_METHOD
from memtrace_opt.errors import DatasetError
from memtrace_opt.loop.artifacts import diff_stats, prompt_diff
from memtrace_opt.rundir import CHECKPOINT_FILE, read_blame, read_checkpoint, round_blame_files

__all__ = ["NO_PROMPT", "UNATTRIBUTED_LABEL", "RunRouting", "blame_share", "changed_prompts", "read_routing"]

NO_PROMPT = "(no prompt)"
#: the ``method`` of the unattributed ablation's signals: a label for every prompt, not an attribution
UNATTRIBUTED_LABEL = UNATTRIBUTED_METHOD


@dataclass(frozen=True)
class RunRouting:
    """What a run dir says about routing; None where the run dir does not hold it (see module docstring)."""

    seed: int | None = None
    changed_prompts: dict[str, dict[str, int]] | None = None
    blame_share: dict[str, float] | None = None
    #: blamed failures the share is over; None without any round blame file
    blamed_failures: int | None = None


def changed_prompts(seed: Mapping[str, str], best: Mapping[str, str]) -> dict[str, dict[str, int]]:
    """``{component: {"added_lines", "removed_lines"}}`` of each component ``best`` changed against ``seed``."""
    out = {}
    for name in sorted(best):
        if seed.get(name) != best[name]:
            added, removed = diff_stats(prompt_diff(name, seed.get(name, ""), best[name]))
            out[name] = {"added_lines": added, "removed_lines": removed}
    return out


def blame_share(records: Iterable[Mapping[str, Any]]) -> tuple[dict[str, float] | None, int]:
    """``(share per prompt component, blamed failures)`` of blame records (``BlameSignal.to_dict`` shapes);
    the share is None when no record is a blame (none at all, failed attributions, ablation labels only)."""
    counts: Counter[str] = Counter()
    for rec in records:
        if rec.get("error_type") is None or rec.get("method") == UNATTRIBUTED_LABEL:
            continue
        counts[rec.get("prompt_component") or NO_PROMPT] += 1
    total = sum(counts.values())
    if not total:
        return None, 0
    return {c: n / total for c, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))}, total


def read_routing(run_dir: str | Path) -> RunRouting:
    """The routing a finished run dir records; a DatasetError naming the file and field when one is malformed."""
    root = Path(run_dir)
    seed, changed = None, None
    if (root / CHECKPOINT_FILE).exists():
        state = read_checkpoint(root / CHECKPOINT_FILE)  # checks seed_candidate/best_candidate are prompt maps
        changed = changed_prompts(state["seed_candidate"], state["best_candidate"])
        seed = _seed(state.get("plan") or {}, root / CHECKPOINT_FILE)
    files = round_blame_files(root)
    if not files:
        return RunRouting(seed, changed)
    share, blamed = blame_share(rec for _, path in files for rec in _records(path))
    return RunRouting(seed, changed, share, blamed)


def _seed(plan: Mapping[str, Any], path: Path) -> int | None:
    value = plan.get("seed")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise DatasetError(str(path), "plan.seed", f"expected an integer, got {value!r}")
    return value


def _records(path: Path) -> list[Mapping[str, Any]]:
    """A round blame file's signal records; one whose prompt component is not text is a one-line error."""
    records: list[Mapping[str, Any]] = list(read_blame(path)["signals"])  # objects: read_blame checks that
    for i, rec in enumerate(records):
        component = rec.get("prompt_component")
        if component is not None and not isinstance(component, str):
            raise DatasetError(str(path), f"signals[{i}].prompt_component", f"expected text, got {component!r}")
    return records
