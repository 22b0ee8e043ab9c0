"""experiments/scripts/pool_compare.py: disjoint re-tests pooled into one paired comparison."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "scripts" / "pool_compare.py"


def final(path: Path, conv: str, pairs: list[tuple[float, float]]) -> Path:
    cases = [{"qa_id": f"{conv}/q{i}", "conversation": conv, "category": "single-hop", "seed_score": s,
              "best_score": b} for i, (s, b) in enumerate(pairs)]
    path.write_text(json.dumps({"format": "memtrace-final/1", "method": "none", "system": "long_context",
                                "n": len(cases), "cases": cases}), encoding="utf-8")
    return path


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False)


def test_two_disjoint_retests_pool_into_one_paired_gain(tmp_path):
    a = final(tmp_path / "a.json", "c1", [(0, 1)] * 3 + [(1, 1)] * 7)
    b = final(tmp_path / "b.json", "c2", [(0, 1)] * 2 + [(1, 0)] + [(0, 0)] * 7)
    out = run(str(a), str(b), "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["n"] == 20 and result["fixed"] == 5 and result["broken"] == 1
    assert abs(result["gain"] - 0.2) < 1e-9 and result["gain_ci"][0] <= 0.2 <= result["gain_ci"][1]


def test_a_question_in_two_runs_is_refused_in_one_line(tmp_path):
    a = final(tmp_path / "a.json", "c1", [(0, 1)])
    out = run(str(a), str(a))
    assert out.returncode == 2 and "c1/q0" in out.stderr and len(out.stderr.strip().splitlines()) == 1
