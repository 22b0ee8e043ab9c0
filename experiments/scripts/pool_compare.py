"""Pool the held-out questions of several finished re-tests of one prompt and compare seed vs best.

    python experiments/scripts/pool_compare.py RUN_DIR_OR_FINAL_JSON [...] [--json]

Each argument is a finished ``optimize`` run dir (or its ``final.json``). Their per-question cases are
joined — a question id present in two of them is an error, since pooling must not count a question
twice — and the gain of the best prompts over the seed gets the same paired bootstrap 95% CI and
p-value as ``memtrace-opt compare`` (memtrace_opt.eval.metrics.paired_bootstrap, 2000 resamples, seed 0).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from memtrace_opt.errors import MemtraceError
from memtrace_opt.eval.metrics import paired_bootstrap
from memtrace_opt.loop.compare import load_final
from memtrace_opt.rundir.schemas import read_final


def _final(arg: str) -> dict:
    path = Path(arg)
    return read_final(path) if path.is_file() else load_final(path)


def pool(finals: list[tuple[str, dict]]) -> dict:
    """The pooled comparison of ``finals`` (``(name, final.json content)``); ValueError on a repeated question."""
    seed: dict[str, float] = {}
    best: dict[str, float] = {}
    for name, final in finals:
        for case in final.get("cases") or []:
            qid = case["qa_id"]
            if qid in seed:
                raise ValueError(f"{name}: question {qid} is already in an earlier run: pools must be disjoint")
            seed[qid], best[qid] = float(case["seed_score"]), float(case["best_score"])
    if not seed:
        raise ValueError("no held-out case in the given runs")
    pc = paired_bootstrap(seed, best, n=2000, seed=0)
    fixed = sum(1 for q in seed if best[q] > seed[q])
    broken = sum(1 for q in seed if best[q] < seed[q])
    return {"runs": [name for name, _ in finals], "n": len(seed), "seed_accuracy": sum(seed.values()) / len(seed),
            "accuracy": sum(best.values()) / len(seed), "gain": pc.mean_diff, "gain_ci": [pc.ci_low, pc.ci_high],
            "p_value": pc.p_value, "fixed": fixed, "broken": broken}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="finished optimize run dirs or their final.json files")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    try:
        result = pool([(arg, _final(arg)) for arg in args.runs])
    except (ValueError, OSError, KeyError, MemtraceError) as exc:  # bad input: one line naming it, exit 2
        print(f"pool_compare: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        lo, hi = result["gain_ci"]
        print(f"pooled n={result['n']}: seed {100 * result['seed_accuracy']:.1f}% -> {100 * result['accuracy']:.1f}%, "
              f"gain {100 * result['gain']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}], p {result['p_value']:.3f}, "
              f"{result['fixed']} fixed / {result['broken']} broken")
    return 0


if __name__ == "__main__":
    sys.exit(main())
