"""Loop plan, data split, checkpoint file and spend accounting: the small pieces the driver stands on."""

from __future__ import annotations

import pytest

from memtrace_opt.data.model import Dataset
from memtrace_opt.errors import ConfigError
from memtrace_opt.lm.base import LMResult
from memtrace_opt.loop import LoopPlan, LoopState, Spend, SpendMeter, load_state, save_state, split_dataset
from tests.test_loop_fixtures import accounted, conversations


def dataset() -> Dataset:
    return Dataset("t", "t.json", tuple(conversations()))


class Split:
    def __init__(self, optimize, validation, heldout):
        self.optimize, self.validation, self.heldout = optimize, validation, heldout


def test_split_roles_and_rotation():
    data = split_dataset(dataset(), Split(["c-opt", "c-val"], [], ["c-held"]))
    assert [c.conversation_id for c in data.train_cases(1, "rotate")] == ["c-opt"] * 3
    assert [c.conversation_id for c in data.train_cases(2, "rotate")] == ["c-val"] * 3
    assert [c.conversation_id for c in data.train_cases(3, "rotate")] == ["c-opt"] * 3
    assert len(data.train_cases(1, "all")) == 6
    assert len(data.validation_cases()) == 6  # no validation conversation: the optimize ones select
    assert [c.qa_id for c in data.heldout_cases()] == ["c-held/q0", "c-held/q1", "c-held/q2"]


def test_default_split_and_split_errors():
    data = split_dataset(dataset(), None)
    assert [c.id for c in data.optimize] == ["c-opt"] and [c.id for c in data.heldout] == ["c-val", "c-held"]
    with pytest.raises(ConfigError, match="split.heldout"):
        split_dataset(dataset(), Split(["c-opt"], [], []))
    with pytest.raises(ConfigError, match="not in the selected dataset"):
        split_dataset(dataset(), Split(["nope"], [], ["c-held"]))


def test_plan_validation_and_targets():
    with pytest.raises(ConfigError, match="optimizer.method"):
        LoopPlan(method="magic")
    prompts = {"a": "x", "b": "y"}
    assert LoopPlan().resolve_targets(prompts) == ("a", "b")
    assert LoopPlan(targets=("b",)).resolve_targets(prompts) == ("b",)


def test_checkpoint_round_trip_and_corruption(tmp_path):
    state = LoopState(plan=LoopPlan().fingerprint(), system="rag", settings={"top_k": 5},
                      seed_candidate={"a": "x"}, best_candidate={"a": "y"}, best_val=0.5)
    save_state(tmp_path, state)
    assert load_state(tmp_path) == state
    assert load_state(tmp_path / "none") is None
    (tmp_path / "checkpoint.json").write_text("{not json")
    with pytest.raises(ConfigError, match="unreadable checkpoint"):
        load_state(tmp_path)


def test_spend_meter_counts_observed_calls_and_rollouts():
    class LM:
        model_id = "m"

        def __init__(self, cached):
            self.cached = cached

        def chat(self, messages, **kw):
            return LMResult("x", "m", prompt_tokens=10, completion_tokens=2, cached=self.cached)

    class Source:
        rollouts = 7

    meter = SpendMeter(Spend(rollouts=3, llm_calls=1))
    meter.count_rollouts(Source())
    accounted(LM(False), "task").chat([])  # outside the block: not counted
    with meter.observe():
        accounted(LM(False), "task").chat([])
        accounted(LM(True), "judge").chat([])
    total = meter.total()
    assert (total.rollouts, total.llm_calls, total.cached_calls, total.prompt_tokens) == (10, 3, 1, 10)

