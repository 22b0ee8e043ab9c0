"""Settings tuning: Optuna over the config's space, resumable in SQLite, shared across methods."""

from __future__ import annotations

import json

import pytest

from memtrace_opt.errors import ConfigError
from memtrace_opt.loop import run_loop
from memtrace_opt.loop.tuning import suggest, tune_settings
from tests.test_loop_closed import make_ctx
from tests.test_loop_fixtures import QA_MAGIC, SEED_QA

GOOD_QA = f"{SEED_QA} Always {QA_MAGIC} before answering."


def test_tuning_picks_the_better_top_k_and_every_method_can_reuse_it(tmp_path):
    ctx, _, _ = make_ctx(tmp_path / "none", "none", seed_qa=GOOD_QA, tuning_trials=3,
                         tuning_space={"top_k": [1, 4]})
    ctx.settings = {"top_k": 1}
    state = run_loop(ctx)
    assert state.settings == {"top_k": 4}
    tuned = json.loads((tmp_path / "none" / "tuning.json").read_text())
    assert tuned["best_params"] == {"top_k": 4} and tuned["trials"][0]["params"] == {"top_k": 1}  # base first
    assert (tmp_path / "none" / "tuning.sqlite").exists()

    other, _, _ = make_ctx(tmp_path / "attr", seed_qa=GOOD_QA)
    other.settings, other.tuning_from = {"top_k": 1}, tmp_path / "none"
    assert run_loop(other).settings == {"top_k": 4}


def test_tuning_study_resumes_without_redoing_trials(tmp_path):
    seen = []

    def objective(settings):
        seen.append(settings["k"])
        return -abs(settings["k"] - 3)

    storage = tmp_path / "t.sqlite"
    first = tune_settings(objective, {"k": {"low": 1, "high": 5}}, trials=3, storage=storage, seed=0)
    assert len(first.trials) == 3 and len(seen) == 3
    again = tune_settings(objective, {"k": {"low": 1, "high": 5}}, trials=4, storage=storage, seed=0)
    assert len(seen) == 4 and len(again.trials) == 4


def test_space_syntax_errors_name_the_field():
    class Trial:
        def suggest_categorical(self, name, choices):
            return choices[0]

    assert suggest(Trial(), "mode", {"choices": ["a", "b"]}) == "a"
    with pytest.raises(ConfigError, match="tuning.space.bad"):
        suggest(Trial(), "bad", {"low": 1})
