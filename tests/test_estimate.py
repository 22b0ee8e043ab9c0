"""``estimate``: a config's LM time from measured per-unit costs, checked against hand-computed work."""

from __future__ import annotations

import json

import pytest

from memtrace_opt.campaign.estimate import estimate_config as run_estimate
from memtrace_opt.errors import ConfigError

QUICKSTART = "experiments/configs/quickstart.yaml"


def bench_file(tmp_path, *, per_turn=2.0, per_question=3.0, ratio=0.4):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"speculation": {"baseline": "pairs", "modes": {
        "pairs": {"seconds_per_turn": per_turn, "question_lm_s_per_question": per_question},
        "session": {"seconds_per_turn": per_turn / 4, "question_lm_s_per_question": per_question}}},
        "scoped_replay": {"ratio_seconds": ratio}}))
    return path


def test_none_is_the_validation_baseline_and_one_heldout_pass(tmp_path):
    result = run_estimate(QUICKSTART, bench_file(tmp_path), methods=("none",))
    work = result["work"]  # mini: 24 turns and 6 questions per conversation
    assert work["validation"] == {"conversations": 2, "turns": 48, "questions": 12}
    assert work["heldout"] == {"conversations": 4, "turns": 96, "questions": 24}
    (none,) = result["methods"]
    assert none["seed_ingestion_s"] == (48 + 96) * 2.0 and none["rollout_s"] == 12 * 3.0
    assert none["heldout_s"] == 24 * 3.0 and none["low_s"] == none["high_s"]


def test_a_one_prompt_system_never_pays_for_reingestion_and_rows_scale_with_the_costs(tmp_path):
    costs = bench_file(tmp_path)
    (gepa,) = run_estimate(QUICKSTART, costs, methods=("attributed",))["methods"]  # long_context: one prompt
    # 2 rounds share 128 - 12 = 116 rollouts: 58 each, less the training pass (6) and GEPA's seed validation
    # (12) leaves 40, 6 proposals of 2 x 3; answered: baseline 12, 2 x 6 training, 12 x 3 minibatch, 2 x 12
    assert gepa["reingestion_s"] == 0 and gepa["rollout_s"] == (12 + 2 * 6 + 12 * 3 + 2 * 12) * 3.0
    assert gepa["heldout_s"] == (2 + 2) * 24 * 3.0  # seed, best and the two audited candidates
    # pruning (high only): the 128 - 84 = 44 rollouts left pay for 3 validation passes of 12 questions
    assert gepa["pruning_s"] == 3 * 12 * 3.0 and gepa["high_s"] == gepa["low_s"] + gepa["pruning_s"]
    (cheap,) = run_estimate(QUICKSTART, costs, methods=("attributed",), row="session")["methods"]
    assert cheap["seed_ingestion_s"] == pytest.approx(gepa["seed_ingestion_s"] / 4)


def test_an_ingestion_prompt_target_adds_scoped_reingestion(tmp_path):
    import yaml

    cfg = yaml.safe_load(open(QUICKSTART))
    cfg["system"] = {"name": "mem0"}
    cfg["output_dir"] = str(tmp_path)
    path = tmp_path / "mem0.yaml"
    path.write_text(yaml.safe_dump(cfg))
    result = run_estimate(path, bench_file(tmp_path), methods=("attributed", "none"))
    gepa, none = result["methods"]
    # 12 minibatch evaluations (6 proposals in each of 2 rounds) of one 24-turn training conversation at 0.4
    # of a full ingest, two kept candidates re-ingesting validation (48 turns), best + 2 audited re-ingesting
    # held-out (96)
    assert gepa["reingestion_s"] == pytest.approx(12 * 24 * 2.0 * 0.4 + 2 * 48 * 2.0 + 3 * 96 * 2.0)
    # each of the 3 pruning passes the budget pays for re-ingests validation (an ingestion prompt's delta)
    assert gepa["pruning_s"] == pytest.approx(3 * (12 * 3.0 + 48 * 2.0))
    assert result["budget"]["pruning_passes_high"] == 3
    cfg["optimizer"]["prune"] = False
    path.write_text(yaml.safe_dump(cfg))
    (unpruned,) = run_estimate(path, bench_file(tmp_path), methods=("attributed",))["methods"]
    assert unpruned["pruning_s"] == 0 and unpruned["high_s"] == pytest.approx(gepa["high_s"] - gepa["pruning_s"])
    assert result["total_high_s"] == pytest.approx(gepa["high_s"] + none["high_s"], abs=0.2)


def test_a_budget_the_loop_would_refuse_is_refused_by_the_estimate_too(tmp_path):
    """The estimate must not price work the loop will not do: the same floor, the same one-line error."""
    import yaml

    cfg = yaml.safe_load(open(QUICKSTART))
    cfg["optimizer"]["max_metric_calls"] = 40  # floor: 12 + 2 x (12 + 2 x 3) = 48
    cfg["output_dir"] = str(tmp_path)
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match="optimizer.max_metric_calls: 40 rollouts .* at least 48"):
        run_estimate(path, bench_file(tmp_path), methods=("attributed",))
    (none,) = run_estimate(path, bench_file(tmp_path), methods=("none",))["methods"]  # no GEPA round to pay for
    assert none["rollout_s"] == 12 * 3.0


def test_bad_costs_are_refused_naming_the_file_and_field(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    with pytest.raises(ConfigError, match="x.json.*bench-lm"):
        run_estimate(QUICKSTART, bad)
    with pytest.raises(ConfigError, match="speculation.modes.nope"):
        run_estimate(QUICKSTART, bench_file(tmp_path), row="nope")
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"speculation": {"baseline": "none", "modes": {"none": {"seconds_per_turn": 1}}}}))
    with pytest.raises(ConfigError, match="question_lm_s_per_question"):
        run_estimate(QUICKSTART, old)
