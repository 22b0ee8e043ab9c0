"""Tracing benchmark: per-op record overhead, pipeline overhead, lineage on 100k ops, save/load speed.

Usage (from the repository root, with the project installed)::

    python benchmarks/bench_trace.py            # full run, ~1 minute on 2 cores
    python benchmarks/bench_trace.py --quick    # smaller graphs, a few seconds
    python benchmarks/bench_trace.py --out benchmarks/results/trace.json

Prints one JSON object (the same as ``memtrace-opt bench-trace --json``). The measurements live in
:mod:`memtrace_opt.bench.trace` so the installed CLI can run them without this directory.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from memtrace_opt.bench.trace import run_benchmarks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller graphs and fewer rounds")
    parser.add_argument("--out", type=Path, help="also write the JSON object to this file")
    args = parser.parse_args()
    result = run_benchmarks(quick=args.quick)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
