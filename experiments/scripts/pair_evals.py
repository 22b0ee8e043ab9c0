"""Compare two ``eval`` runs of the same questions under different settings: B's gain over A, paired.

    python experiments/scripts/pair_evals.py RUN_A RUN_B [--blame A/blame.json [--blame-b B/blame.json]]
                                              [--json] [--cases]

Each run is an ``eval`` run dir (its ``results.json``); both must hold exactly the same question ids.
The gain of B over A gets the paired bootstrap 95% CI and p-value of ``memtrace-opt compare``
(memtrace_opt.eval.metrics.paired_bootstrap, 2000 resamples, seed 0). With ``--blame`` (A's
``memtrace-opt attribute`` output), A's failures are split by the operation blamed for them and each
group says how many B answered right: whether a setting fixes the failures attribution charged to
the step it governs, and leaves the others alone. ``--blame-b`` (B's blame) adds where each group's
failures that B still got wrong were blamed under B. ``--cases`` adds each question's id, category and
both scores (no question, gold or answer text: LoCoMo's licence keeps its text out of the project).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from memtrace_opt.errors import MemtraceError
from memtrace_opt.eval.metrics import paired_bootstrap
from memtrace_opt.graph.model import op_name


def _rows(run_dir: str) -> list[dict[str, Any]]:
    path = Path(run_dir) / "results.json"
    rows: list[dict[str, Any]] = json.loads(path.read_text())["results"]
    if not rows:
        raise ValueError(f"{path}: no results")
    return rows


def scores(run_dir: str) -> dict[str, float]:
    """``{qa_id: judge score}`` of an eval run; ValueError on a run without results."""
    return {str(r["qa_id"]): float(r["judge_score"]) for r in _rows(run_dir)}


def cases(run_a: str, run_b: str) -> list[dict[str, Any]]:
    """Per question: id, category and both scores, in run A's order (ids and numbers only)."""
    b = scores(run_b)
    return [{"qa_id": str(r["qa_id"]), "category": r.get("category"), "score_a": float(r["judge_score"]),
             "score_b": b[str(r["qa_id"])]} for r in _rows(run_a)]


def pair(a: dict[str, float], b: dict[str, float], blame: dict[str, Any] | None = None,
         blame_b: dict[str, Any] | None = None) -> dict[str, Any]:
    """B against A on the same questions (module docstring); ValueError when the question sets differ."""
    if set(a) != set(b):
        only = sorted(set(a) ^ set(b))
        raise ValueError(f"the runs hold different questions ({len(only)} in one only, e.g. {only[0]})")
    pc = paired_bootstrap(a, b, n=2000, seed=0)
    out: dict[str, Any] = {
        "n": len(a), "accuracy_a": sum(a.values()) / len(a), "accuracy_b": sum(b.values()) / len(b),
        "gain": pc.mean_diff, "gain_ci": [pc.ci_low, pc.ci_high], "p_value": pc.p_value,
        "fixed": sum(1 for q in a if b[q] > a[q]), "broken": sum(1 for q in a if b[q] < a[q]),
    }
    if blame is not None:
        b_ops = {str(s["case_id"]): op_name(s.get("op_id")) for s in (blame_b or {}).get("signals", [])}
        groups: dict[str, dict[str, Any]] = {}
        for signal in blame["signals"]:
            qid = str(signal["case_id"])
            if qid not in a:
                raise ValueError(f"blame names question {qid}, which run A does not hold")
            group = groups.setdefault(op_name(signal.get("op_id")), {"failures": 0, "right_in_b": 0})
            group["failures"] += 1
            group["right_in_b"] += int(b[qid] > 0)
            if blame_b is not None and b[qid] == 0:
                blamed_b = group.setdefault("wrong_in_b_blamed_on", {})
                op_b = b_ops.get(qid, "(not attributed)")
                blamed_b[op_b] = blamed_b.get(op_b, 0) + 1
        out["a_failures_by_blamed_op"] = dict(sorted(groups.items(), key=lambda kv: -kv[1]["failures"]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_a", help="the baseline eval run dir")
    parser.add_argument("run_b", help="the eval run dir under the other settings")
    parser.add_argument("--blame", help="run A's blame.json: split A's failures by blamed operation")
    parser.add_argument("--blame-b", help="run B's blame.json: where A's failures still wrong in B were blamed")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--cases", action="store_true", help="with --json: add each question's id, category, scores")
    args = parser.parse_args(argv)
    try:
        blame = json.loads(Path(args.blame).read_text()) if args.blame else None
        blame_b = json.loads(Path(args.blame_b).read_text()) if args.blame_b else None
        if blame_b is not None and blame is None:
            raise ValueError("--blame-b needs --blame (run A's blame groups the failures)")
        result = pair(scores(args.run_a), scores(args.run_b), blame, blame_b)
        if args.cases:
            result["cases"] = cases(args.run_a, args.run_b)
    except (ValueError, OSError, KeyError, MemtraceError) as exc:  # bad input: one line naming it, exit 2
        print(f"pair_evals: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    lo, hi = result["gain_ci"]
    print(f"n={result['n']}: A {100 * result['accuracy_a']:.1f}% -> B {100 * result['accuracy_b']:.1f}%, gain "
          f"{100 * result['gain']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}], p {result['p_value']:.3f}, "
          f"{result['fixed']} fixed / {result['broken']} broken")
    for op, group in (result.get("a_failures_by_blamed_op") or {}).items():
        still = ", ".join(f"{o} {n}" for o, n in sorted((group.get("wrong_in_b_blamed_on") or {}).items(),
                                                         key=lambda kv: -kv[1]))
        print(f"  A's failures blamed on {op}: {group['failures']}, right in B: {group['right_in_b']}"
              + (f"; still wrong in B, blamed on: {still}" if still else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
