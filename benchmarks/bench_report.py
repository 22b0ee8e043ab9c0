"""Report benchmark: time to render the HTML report of a run whose graph has ~10k ops.

Usage (from the repository root, with the project installed)::

    python benchmarks/bench_report.py                  # 5,000 messages (10,120 ops), 40 failed questions
    python benchmarks/bench_report.py --messages 20000 --questions 100 --out benchmarks/results/report.json

The synthetic run (``tests/test_report_support.py``) is a worst case for slicing: every retrieval
reads every memory unit, so each failed question's slice is nearly the whole graph (~25k nodes).
Prints one JSON object: graph size, seconds to build/save the run, to collect it, to render the report
(split into loading the graph and the rest), report size, and per-question figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ holds the synthetic-run builder

from memtrace_opt.graph.io_json import load_json  # noqa: E402
from memtrace_opt.report import QuestionOptions, collect_run, write_report  # noqa: E402
from tests.test_report_support import build_synthetic_run  # noqa: E402


def run(messages: int, questions: int, repeats: int) -> dict:
    """Build the synthetic run once, then render its report ``repeats`` times; the best time counts."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "run"
        t0 = time.perf_counter()
        build_synthetic_run(root, n_messages=messages, n_questions=questions)
        build_s = time.perf_counter() - t0
        graph_file = next((root / "graphs").glob("*.jsonl.gz"))
        t0 = time.perf_counter()
        graph = load_json(graph_file)
        load_s = time.perf_counter() - t0
        renders, collects = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            data = collect_run(root)
            collects.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            out = write_report(data, Path(tmp) / "report.html", QuestionOptions())
            renders.append(time.perf_counter() - t0)
        size = out.stat().st_size
    best = min(renders)
    return {
        "ops": len(graph.ops), "variables": len(graph.variables), "failed_questions": questions,
        "build_and_save_s": round(build_s, 3), "graph_load_s": round(load_s, 3),
        "collect_s": round(min(collects), 3), "render_s": round(best, 3),
        "render_without_graph_load_s": round(best - load_s, 3),
        "per_question_ms": round(1000 * (best - load_s) / questions, 1),
        "report_bytes": size, "bytes_per_question": size // questions,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5000, help="messages (two ops each)")
    parser.add_argument("--questions", type=int, default=40, help="failed questions (one graph each)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, help="also write the JSON object to this file")
    args = parser.parse_args()
    text = json.dumps(run(args.messages, args.questions, args.repeats), indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
