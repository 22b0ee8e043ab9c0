"""Compare two ``eval`` runs of the same questions under different settings: B's gain over A, paired.

    python experiments/scripts/pair_evals.py RUN_A RUN_B [--blame RUN_A/blame.json] [--json]

Each run is an ``eval`` run dir (its ``results.json``); both must hold exactly the same question ids.
The gain of B over A gets the paired bootstrap 95% CI and p-value of ``memtrace-opt compare``
(memtrace_opt.eval.metrics.paired_bootstrap, 2000 resamples, seed 0). With ``--blame`` (A's
``memtrace-opt attribute`` output), A's failures are split by the operation blamed for them and each
group says how many B answered right: whether a setting fixes the failures attribution charged to
the step it governs, and leaves the others alone.
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


def scores(run_dir: str) -> dict[str, float]:
    """``{qa_id: judge score}`` of an eval run; ValueError on a run without results."""
    path = Path(run_dir) / "results.json"
    rows = json.loads(path.read_text())["results"]
    if not rows:
        raise ValueError(f"{path}: no results")
    return {str(r["qa_id"]): float(r["judge_score"]) for r in rows}


def pair(a: dict[str, float], b: dict[str, float], blame: dict[str, Any] | None = None) -> dict[str, Any]:
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
        groups: dict[str, dict[str, int]] = {}
        for signal in blame["signals"]:
            qid = str(signal["case_id"])
            if qid not in a:
                raise ValueError(f"blame names question {qid}, which run A does not hold")
            group = groups.setdefault(op_name(signal.get("op_id")), {"failures": 0, "right_in_b": 0})
            group["failures"] += 1
            group["right_in_b"] += int(b[qid] > 0)
        out["a_failures_by_blamed_op"] = dict(sorted(groups.items(), key=lambda kv: -kv[1]["failures"]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_a", help="the baseline eval run dir")
    parser.add_argument("run_b", help="the eval run dir under the other settings")
    parser.add_argument("--blame", help="run A's blame.json: split A's failures by blamed operation")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    try:
        blame = json.loads(Path(args.blame).read_text()) if args.blame else None
        result = pair(scores(args.run_a), scores(args.run_b), blame)
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
        print(f"  A's failures blamed on {op}: {group['failures']}, right in B: {group['right_in_b']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
