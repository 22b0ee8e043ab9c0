"""experiments/scripts/pair_evals.py: two eval runs of the same questions under different settings, paired."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "scripts" / "pair_evals.py"


def eval_run(path: Path, scores: list[int], conv: str = "c1") -> Path:
    path.mkdir()
    rows = [{"qa_id": f"{conv}/q{i}", "category": "single-hop", "question": "secret text", "judge_score": s}
            for i, s in enumerate(scores)]
    (path / "results.json").write_text(json.dumps({"results": rows}), encoding="utf-8")
    return path


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False)


def test_the_gain_of_b_over_a_is_paired_and_split_by_blamed_operation(tmp_path):
    a = eval_run(tmp_path / "a", [0, 0, 0, 0, 1, 1, 1, 1, 1, 1])
    b = eval_run(tmp_path / "b", [1, 1, 1, 0, 1, 1, 1, 1, 1, 0])
    blame = tmp_path / "blame.json"
    blame.write_text(json.dumps({"signals": [
        {"case_id": "c1/q0", "op_id": "s20/long_context.trim#3"}, {"case_id": "c1/q1", "op_id": "s21/long_context.trim#0"},
        {"case_id": "c1/q2", "op_id": "answer:c1/q2/qa.answer#0"}, {"case_id": "c1/q3", "op_id": "answer:c1/q3/qa.answer#0"},
    ]}), encoding="utf-8")
    out = run(str(a), str(b), "--blame", str(blame), "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["n"] == 10 and (result["fixed"], result["broken"]) == (3, 1)
    assert abs(result["gain"] - 0.2) < 1e-9 and result["gain_ci"][0] <= 0.2 <= result["gain_ci"][1]
    assert result["a_failures_by_blamed_op"] == {"long_context.trim": {"failures": 2, "right_in_b": 2},
                                                 "qa.answer": {"failures": 2, "right_in_b": 1}}
    assert "cases" not in result
    with_cases = json.loads(run(str(a), str(b), "--json", "--cases").stdout)
    assert with_cases["cases"][0] == {"qa_id": "c1/q0", "category": "single-hop", "score_a": 0.0, "score_b": 1.0}
    assert "secret text" not in json.dumps(with_cases)  # ids and numbers only
    blame_b = tmp_path / "blame_b.json"
    blame_b.write_text(json.dumps({"signals": [{"case_id": "c1/q3", "op_id": "answer:c1/q3/qa.answer#0"},
                                               {"case_id": "c1/q9", "op_id": "s25/long_context.trim#0"}]}))
    moved = json.loads(run(str(a), str(b), "--blame", str(blame), "--blame-b", str(blame_b), "--json").stdout)
    assert moved["a_failures_by_blamed_op"]["qa.answer"]["wrong_in_b_blamed_on"] == {"qa.answer": 1}
    assert "wrong_in_b_blamed_on" not in moved["a_failures_by_blamed_op"]["long_context.trim"]  # both fixed in B
    alone = run(str(a), str(b), "--blame-b", str(blame_b))
    assert alone.returncode == 2 and "--blame-b needs --blame" in alone.stderr


def test_runs_of_different_questions_are_refused_in_one_line(tmp_path):
    a = eval_run(tmp_path / "a", [0, 1])
    b = eval_run(tmp_path / "b", [0, 1], conv="c2")
    out = run(str(a), str(b))
    assert out.returncode == 2 and "different questions" in out.stderr and len(out.stderr.strip().splitlines()) == 1
