"""Per-question results: scoring, summaries with CIs, JSON round trip."""

from __future__ import annotations

import json

import pytest

from memtrace_opt.data import load_dataset
from memtrace_opt.errors import DatasetError
from memtrace_opt.eval.judge import DeterministicJudge
from memtrace_opt.eval.results import QAResult, score_qa, summarize
from memtrace_opt.rundir import read_results, write_results


def _result(qa_id: str, category: str, score: int, flags: tuple[str, ...] = (), label: str = "") -> QAResult:
    return QAResult(qa_id, "c1", category, "q?", "gold", "pred", score, 0.5 * score, 0.25 * score, flags,
                    label or ("CORRECT" if score else "WRONG"))


def test_score_qa_on_mini():
    ds = load_dataset("mini")
    conv = ds.conversation("mini-1")
    qa = conv.qa[0]
    r = score_qa(qa, conv.id, "Biscuit", DeterministicJudge())
    assert (r.qa_id, r.conversation, r.category, r.gold) == (qa.id, "mini-1", qa.category, qa.answer)
    assert (r.judge_score, r.f1, r.bleu1, r.judge_label) == (1, 1.0, 1.0, "CORRECT")
    assert r.judge_reason.startswith("deterministic")
    upd = conv.qa[3]
    assert score_qa(upd, conv.id, "Leeds", DeterministicJudge()).flags == ("update",)


def test_summarize_overall_and_per_category():
    results = [_result("a", "temporal", 1), _result("b", "temporal", 0), _result("c", "single-hop", 1),
               _result("d", "single-hop", 0, label="FAILED"), _result("e", "adversarial", 1, ("unscored",))]
    s = summarize(results, n_boot=500)
    assert s["n"] == 4 and s["unscored"] == 1 and s["judge_failures"] == 1
    assert s["accuracy"] == 0.5 and s["f1"] == pytest.approx(0.25) and s["bleu1"] == pytest.approx(0.125)
    low, high = s["accuracy_ci"]
    assert 0.0 <= low <= 0.5 <= high <= 1.0
    assert set(s["per_category"]) == {"temporal", "single-hop"}
    assert s["per_category"]["temporal"]["n"] == 2 and s["per_category"]["temporal"]["accuracy"] == 0.5
    json.dumps(s)  # plain JSON types only


def test_summarize_empty():
    s = summarize([])
    assert s["n"] == 0 and s["accuracy"] == 0.0 and s["per_category"] == {}


def test_json_round_trip(tmp_path):
    results = [_result("a", "temporal", 1, ("update", "deletion")), _result("b", "multi-hop", 0)]
    write_results(tmp_path, results)
    assert read_results(tmp_path) == results


def test_malformed_results_file(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"format": "memtrace-results/1", "results": [{"qa_id": "x"}]}))
    with pytest.raises(DatasetError, match=r"results\[0\]"):
        read_results(tmp_path)
    path.write_text(json.dumps([]))
    with pytest.raises(DatasetError, match="not a results file"):
        read_results(tmp_path)
    with pytest.raises(DatasetError, match="not found"):
        read_results(tmp_path / "missing")
