"""Accuracy per optimization round per method, read from a loop's checkpoint and round folders.

The closed loop and the method comparison write their scores in a few natural shapes; this reads
all of them into one list of :class:`RoundPoint`, so the chart does not care which wrote them:

- ``checkpoint.json`` of the closed loop (``memtrace-loop/1``): ``plan.method``, ``baseline_val`` (round
  0) and ``rounds`` records with ``index`` and ``val_score``; or, generically, ``rounds``/``history``
  records with ``round`` (else their position) and either a score of their own (``heldout_accuracy``,
  ``accuracy``, ``val_accuracy``, ``score``, ``val_score``; ``method`` names it) or
  ``scores: {method: score}``;
- round folders ``rounds/round_<k>`` (also ``round_<k>``, ``round-<k>``, ``rounds/<k>``), each holding
  ``scores.json`` (the loop's ``{"validation": {question: score}}``, or ``{method: score}``, or
  ``{"scores": {...}}``) or a ``summary.json`` with ``accuracy``.

A score is a number or a dict with ``accuracy`` (or ``score``) and optionally ``accuracy_ci``/``ci``.
Round 0 is the seed prompts. The first source to give a (method, round) wins: the checkpoint.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, TypeGuard

from memtrace_opt import rundir as rd
from memtrace_opt.errors import DatasetError

__all__ = ["RoundPoint", "read_rounds", "run_method"]

_SCORE_KEYS = ("heldout_accuracy", "accuracy", "val_accuracy", "score", "val_score")
_ROUND_DIR = re.compile(r"^(?:round[_-]?)?(\d+)$")


@dataclass(frozen=True)
class RoundPoint:
    """One method's accuracy after one round (0 = seed), with its 95% CI when known."""

    method: str
    round: int
    accuracy: float
    low: float | None = None
    high: float | None = None


def read_rounds(run_dir: Path, *, default_method: str = "optimized") -> list[RoundPoint]:
    """Every (method, round) score found under ``run_dir``, sorted by method then round."""
    points: dict[tuple[str, int], RoundPoint] = {}
    method = run_method(run_dir, default_method)
    for point in _from_checkpoint(run_dir / rd.CHECKPOINT_FILE, method):
        points.setdefault((point.method, point.round), point)
    for k, folder in _round_dirs(run_dir):
        for point in _from_round_dir(folder, k, method):
            points.setdefault((point.method, point.round), point)
    return sorted(points.values(), key=lambda p: (p.method, p.round))


def _score(value: Any) -> tuple[float, float | None, float | None] | None:
    """``(accuracy, low, high)`` from a number or a score dict; None when it holds no score."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value), None, None
    if isinstance(value, dict):
        acc = next((value[k] for k in _SCORE_KEYS if isinstance(value.get(k), (int, float))), None)
        if acc is None:
            return None
        ci = value.get("accuracy_ci") or value.get("ci")
        if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(isinstance(c, (int, float)) for c in ci):
            return float(acc), float(ci[0]), float(ci[1])
        return float(acc), None, None
    return None


def _points(record: dict[str, Any], k: int, method: str, *, flat: bool = False) -> Iterator[RoundPoint]:
    """Scores of one round record; ``flat`` also reads a bare ``{method: score}`` mapping (scores.json)."""
    scores = record.get("scores")
    if isinstance(scores, dict):
        for name, value in scores.items():
            got = _score(value)
            if got is not None:
                yield RoundPoint(str(name), k, *got)
        return
    got = _score(record)
    if got is not None:
        yield RoundPoint(str(record.get("method") or method), k, *got)
        return
    for name, value in record.items() if flat else ():
        got = _score(value) if name not in ("round", "method") else None
        if got is not None:
            yield RoundPoint(str(name), k, *got)


def _from_checkpoint(path: Path, method: str) -> Iterator[RoundPoint]:
    """Points of a checkpoint: the loop's (``plan.method``, ``baseline_val`` as round 0, ``rounds[].index``
    and ``val_score``) or a generic ``rounds``/``history`` list."""
    if not path.exists():
        return
    data = rd.read_json(path)
    if not isinstance(data, dict):
        return
    raw_plan = data.get("plan")
    plan: rd.JSONObject = raw_plan if isinstance(raw_plan, dict) else {}
    method = str(data.get("method") or plan.get("method") or method)
    baseline = data.get("baseline_val")
    if isinstance(baseline, (int, float)):
        yield RoundPoint(method, 0, float(baseline))
    records = data.get("rounds") if isinstance(data.get("rounds"), list) else data.get("history")
    for i, rec in enumerate(records if isinstance(records, list) else []):
        if isinstance(rec, dict):
            k = rec.get("round", rec.get("index", i))
            yield from _points(rec, int(k) if isinstance(k, (int, float)) else i, method)


def run_method(run_dir: Path, default: str = "optimized") -> str:
    """The optimization method a run used (its checkpoint's plan), else ``default``."""
    path = run_dir / rd.CHECKPOINT_FILE
    try:
        data = rd.read_json(path) if path.exists() else {}
    except DatasetError:
        return default
    raw_plan = data.get("plan") if isinstance(data, dict) else None
    plan: rd.JSONObject = raw_plan if isinstance(raw_plan, dict) else {}
    return str((data.get("method") if isinstance(data, dict) else None) or plan.get("method") or default)


def _round_dirs(run_dir: Path) -> list[tuple[int, Path]]:
    found = []
    for parent in (run_dir, run_dir / "rounds"):
        if not parent.is_dir():
            continue
        for child in parent.iterdir():
            m = _ROUND_DIR.match(child.name)
            if child.is_dir() and m and (parent != run_dir or not child.name.isdigit()):
                found.append((int(m[1]), child))
    return sorted(found)


def _from_round_dir(folder: Path, k: int, method: str) -> Iterator[RoundPoint]:
    for name in ("scores.json", "summary.json", "round.json"):
        path = folder / name
        if path.exists():
            data = rd.read_json(path)
            validation = data.get("validation") if isinstance(data, dict) else None
            if _is_score_map(validation):
                values = list(validation.values())
                yield RoundPoint(method, k, sum(values) / len(values))
            elif isinstance(data, dict):
                yield from _points(data, k, method, flat=name == "scores.json")
            return


def _is_score_map(value: object) -> TypeGuard[dict[str, float]]:
    """A non-empty ``{question id: score}`` mapping (the loop's per-question validation scores)."""
    return isinstance(value, dict) and bool(value) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value.values())
