#!/usr/bin/env python3
"""Markdown tables from ``bench-attribution`` JSON files, for the README and closing notes.

    python experiments/scripts/bench_markdown.py runs/bench_attribution/*.json

One row per method (rows of several files are listed together, in file order): cases, error-type
and op-id accuracy, failed attributions and cost per case; then type/op accuracy per system and
per error type, as "type/op" percentages with the case count.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

SYSTEMS = ("long_context", "rag", "evermemos", "mem0")
TYPES = ("ExtractionError", "UpdateError", "DeletionError", "RetrievalError", "ResponseError", "AnnotationError")


def pct(x: Any) -> str:
    return "-" if x is None else f"{100 * x:.0f}"


def cell(group: dict[str, Any] | None) -> str:
    if not group or not group.get("n"):
        return "-"
    return f"{pct(group.get('type_accuracy'))}/{pct(group.get('op_accuracy'))} ({group['n']})"


def tables(payloads: list[dict[str, Any]]) -> str:
    rows = [row for p in payloads for row in p["rows"]]
    out = ["| method | cases | type acc | op acc | failed | LM calls | tokens | s/case |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['method']} | {r['n']} | {pct(r['type_accuracy'])}% | {pct(r['op_accuracy'])}% | {r['failed']} "
                   f"| {r['llm_calls_per_case']:.1f} | {r['tokens_per_case']:.0f} | {r['seconds_per_case']:.2f} |")
    for key, names in (("by_system", SYSTEMS), ("by_type", TYPES)):
        present = [n for n in names if any(n in r.get(key, {}) for r in rows)]
        out += ["", "| method | " + " | ".join(present) + " |", "|---" * (len(present) + 1) + "|"]
        out += [f"| {r['method']} | " + " | ".join(cell(r.get(key, {}).get(n)) for n in present) + " |" for r in rows]
    return "\n".join(out) + "\n"


def main(paths: list[str]) -> int:
    if not paths:
        print("usage: bench_markdown.py BENCH.json [...]", file=sys.stderr)
        return 2
    payloads = []
    for path in paths:
        try:
            payloads.append(json.loads(Path(path).read_text()))
        except (OSError, ValueError) as err:
            print(f"{path}: not a bench-attribution JSON file ({err})", file=sys.stderr)
            return 2
    print(tables(payloads), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
