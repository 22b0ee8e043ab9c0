"""LM time a campaign paid for after a given cache chunk: the number a registered "run it only if the
earlier methods took at most H hours" rule is applied to.

    python experiments/scripts/campaign_lm_spent.py CAMPAIGN --after-chunk N [--count-as CREATED=SECONDS ...] [--json]

Chunks are append-only and numbered, so the entries of chunks after N are exactly the LM calls made
after chunk N was written (for example, after a registration commit that held chunks 1..N). The
working cache's entries that no chunk holds yet count too. ``--count-as`` replaces the recorded
latency of the one entry created at CREATED (its ``created`` column, Unix seconds exactly as stored)
by SECONDS: a call that spanned a process pause records the pause as LM time, and a campaign log says
what it counts as.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from memtrace_opt.campaign.cache import chunk_entries, working_entries


def _overrides(pairs: list[str]) -> dict[float, float]:
    out: dict[float, float] = {}
    for pair in pairs:
        created, _sep, seconds = pair.partition("=")
        try:
            out[float(created)] = float(seconds)
        except ValueError:
            raise SystemExit(f"--count-as {pair!r}: expected CREATED=SECONDS (Unix seconds = LM seconds)") from None
    return out


def lm_spent(folder: Path, after_chunk: int, count_as: dict[float, float]) -> dict:
    """Entries and LM seconds after chunk ``after_chunk``, with the ``count_as`` latency replacements."""
    before: set[str] = set()
    after: dict[str, tuple[float, float]] = {}
    chunks = chunk_entries(folder)
    if not any(n == after_chunk for n, _rows in chunks):
        raise SystemExit(f"{folder}: no cache chunk numbered {after_chunk}")
    for number, rows in chunks:
        for row in rows:
            if number <= after_chunk:
                before.add(row["key"])
            elif row["key"] not in before:
                after.setdefault(row["key"], (float(row["latency_s"]), float(row["created"])))
    for key, latency, created in working_entries(folder):
        if key not in before:
            after.setdefault(key, (latency, created))
    latency = {key: lat for key, (lat, _c) in after.items()}
    replaced: list[str] = []
    for at, seconds in count_as.items():
        keys = [key for key, (_lat, created) in after.items() if created == at]
        if len(keys) != 1:
            raise SystemExit(f"--count-as {at!r}: {len(keys)} entries after chunk {after_chunk} were created then "
                             "(expected exactly one)")
        latency[keys[0]] = seconds
        replaced.append(keys[0])
    recorded = sum(lat for lat, _c in after.values())
    counted = sum(latency.values())
    return {"campaign": str(folder), "after_chunk": after_chunk, "entries": len(after),
            "recorded_lm_seconds": round(recorded, 1), "lm_seconds": round(counted, 1),
            "lm_hours": round(counted / 3600, 3), "replaced": replaced}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("campaign", type=Path)
    parser.add_argument("--after-chunk", type=int, required=True)
    parser.add_argument("--count-as", action="append", default=[], metavar="CREATED=SECONDS")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = lm_spent(args.campaign, args.after_chunk, _overrides(args.count_as))
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"{result['entries']:,} LM calls after chunk {args.after_chunk}: {result['lm_hours']:.2f} h "
              f"({result['recorded_lm_seconds'] / 3600:.2f} h as recorded; {len(result['replaced'])} replaced)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
