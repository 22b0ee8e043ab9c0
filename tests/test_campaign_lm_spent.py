"""experiments/scripts/campaign_lm_spent.py: the LM time a campaign paid for after a given chunk."""

from __future__ import annotations

import gzip
import json
import subprocess
from collections import Counter
import sys
from pathlib import Path

from tests.test_campaign import make_clone, run as run_campaign

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "scripts" / "campaign_lm_spent.py"


def spent(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False)


def chunk_numbers(folder: Path) -> list[int]:
    return sorted(int(p.name.split("-")[1].split(".")[0]) for p in (folder / "state").glob("cache-*.jsonl.gz"))


def test_counts_only_the_calls_made_after_the_chunk_and_applies_a_replacement(tmp_path):
    folder = make_clone(tmp_path / "repo")
    first: list[str] = []
    run_campaign(folder, first, stop_after=1)
    registered = chunk_numbers(folder)[-1]
    later: list[str] = []
    run_campaign(folder, later)  # the second method: its new calls each record 1.5 s (the Recorder's latency)
    assert chunk_numbers(folder)[-1] > registered and later

    out = spent(str(folder), "--after-chunk", str(registered), "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["entries"] == len(set(later)) and result["lm_seconds"] == 1.5 * len(set(later))
    assert result["lm_seconds"] == result["recorded_lm_seconds"]

    everything = json.loads(spent(str(folder), "--after-chunk", str(chunk_numbers(folder)[0]), "--json").stdout)
    assert everything["entries"] >= result["entries"]

    rows = [json.loads(line) for n in chunk_numbers(folder) if n > registered
            for line in gzip.open(folder / "state" / f"cache-{n:04d}.jsonl.gz", "rt")]
    once = Counter(r["created"] for r in rows)
    created = next(r["created"] for r in rows if once[r["created"]] == 1)  # one call stored at that instant
    swapped = spent(str(folder), "--after-chunk", str(registered), "--count-as", f"{created!r}=100", "--json")
    assert swapped.returncode == 0, swapped.stderr
    assert json.loads(swapped.stdout)["lm_seconds"] == result["lm_seconds"] - 1.5 + 100


def test_a_wrong_chunk_or_replacement_is_a_one_line_error(tmp_path):
    folder = make_clone(tmp_path / "repo")
    run_campaign(folder, [], stop_after=1)
    last = chunk_numbers(folder)[-1]
    out = spent(str(folder), "--after-chunk", str(last + 5))
    assert out.returncode != 0 and f"no cache chunk numbered {last + 5}" in out.stderr
    out = spent(str(folder), "--after-chunk", str(last), "--count-as", "12=60")
    assert out.returncode != 0 and "0 entries after chunk" in out.stderr and "12.0" in out.stderr
    out = spent(str(folder), "--after-chunk", str(last), "--count-as", "soon")
    assert out.returncode != 0 and "expected CREATED=SECONDS" in out.stderr
