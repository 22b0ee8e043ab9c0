"""The closed loop on the fixture system: who gets rewritten per method, stopping, budgets, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memtrace_opt.errors import ConfigError, LMError
from memtrace_opt.loop import LoopContext, LoopData, LoopPlan, load_state, run_loop
from memtrace_opt.rundir.schemas import read_blame
from memtrace_opt.systems.base import QA_PROMPT
from tests.test_loop_fixtures import (
    PROMPTS, QA_MAGIC, SEED_QA, ReflectionLM, TaskLM, accounted, backend, conversations, qa_blamer,
)

TARGETS = ("fact_extraction", "memory_update", QA_PROMPT)


def make_ctx(run_dir: Path, method: str = "attributed", *, reflection=None, attributor=None, extract_magic=None,
             seed_qa: str = SEED_QA, **plan):
    convs = conversations()
    task = TaskLM(convs, extract_magic=extract_magic)
    reflection = reflection or ReflectionLM()
    plan = {"rounds": 3, "max_metric_calls": 200, "minibatch_size": 3, "proposer": "rewrite", **plan}
    ctx = LoopContext(
        backend=backend(task), data=LoopData(tuple(convs[:1]), tuple(convs[1:2]), tuple(convs[2:])),
        plan=LoopPlan(method=method, **plan), run_dir=run_dir, reflection_lm=accounted(reflection, "reflection"),
        attributor=attributor or (qa_blamer() if method == "attributed" else None),
        base_prompts={QA_PROMPT: seed_qa},
    )
    return ctx, task, reflection


def prompt_files(run_dir: Path) -> dict[str, str]:
    return {p.stem: p.read_text() for p in (run_dir / "prompts").glob("*.txt")}


def test_attributed_rewrites_only_the_blamed_component(tmp_path):
    ctx, task, reflection = make_ctx(tmp_path)
    state = run_loop(ctx)
    assert set(reflection.components) == {QA_PROMPT}
    assert state.final["changed_components"] == [QA_PROMPT]
    assert state.final["seed_accuracy"] == 0.0 and state.final["best_accuracy"] == 1.0
    files = prompt_files(tmp_path)
    assert files["fact_extraction"] == PROMPTS["fact_extraction"]  # byte-identical
    assert files["memory_update"] == PROMPTS["memory_update"]
    assert sorted(p.name for p in (tmp_path / "prompts").glob("*.diff")) == ["question_answering.diff"]
    assert "+Answer the question" in (tmp_path / "prompts" / "question_answering.diff").read_text()
    blame = read_blame(tmp_path / "rounds" / "round_1" / "blame.json")
    assert blame["components"] == [QA_PROMPT] and blame["failures"] == 3
    assert (tmp_path / "results.json").exists() and (tmp_path / "graphs" / "c-held.jsonl.gz").exists()


def test_unattributed_ablation_rewrites_every_component(tmp_path):
    ctx, _, reflection = make_ctx(tmp_path, "unattributed", prune=False)
    state = run_loop(ctx)
    assert set(reflection.components) == set(TARGETS)
    assert sorted(state.final["changed_components"]) == sorted(TARGETS)
    files = prompt_files(tmp_path)
    assert all(files[c].endswith("Always check every memory before answering.") for c in TARGETS)
    blame = read_blame(tmp_path / "rounds" / "round_1" / "blame.json")
    assert {s["error_type"] for s in blame["signals"]} == {"ResponseError"}
    assert blame["aggregate"]["components"][QA_PROMPT]["count"] == 3


def test_pruning_undoes_the_ablations_rewrites_that_validation_does_not_pay_for(tmp_path):
    ctx, _, reflection = make_ctx(tmp_path, "unattributed")
    state = run_loop(ctx)
    assert set(reflection.components) == set(TARGETS)  # every component was still rewritten ...
    assert state.final["changed_components"] == [QA_PROMPT]  # ... but only the answer prompt's rewrite paid
    files = prompt_files(tmp_path)
    assert files["fact_extraction"] == PROMPTS["fact_extraction"] and files["memory_update"] == PROMPTS["memory_update"]
    pruning = json.loads((tmp_path / "rounds" / "round_1" / "optimizer.json").read_text())["pruning"]
    assert {(s["component"], s["kept"]) for s in pruning} == {
        ("fact_extraction", True), ("memory_update", True), (QA_PROMPT, False)}


def test_answer_feedback_cycles_through_components(tmp_path):
    ctx, _, reflection = make_ctx(tmp_path, "answer_feedback")
    run_loop(ctx)
    assert reflection.components[:3] == list(TARGETS)  # one component per GEPA step, in turn


def test_real_tracing_attribution_blames_extraction(tmp_path):
    """Extraction drops every fact until its prompt says "check every memory"; the QA prompt is fine."""
    from memtrace_opt.loop.blaming import make_attributor

    good_qa = f"{SEED_QA} Always {QA_MAGIC} before answering."
    ctx, _, reflection = make_ctx(tmp_path, attributor=make_attributor(), extract_magic=QA_MAGIC, seed_qa=good_qa)
    state = run_loop(ctx)
    blame = read_blame(tmp_path / "rounds" / "round_1" / "blame.json")
    assert blame["components"] == ["fact_extraction"]
    assert {s["error_type"] for s in blame["signals"]} == {"ExtractionError"}
    assert all(s["op_id"].split("/")[1].startswith("looptest.extract#") for s in blame["signals"])
    assert set(reflection.components) == {"fact_extraction"}
    assert state.final["changed_components"] == ["fact_extraction"]
    assert state.final["best_accuracy"] == 1.0 and state.final["seed_accuracy"] == 0.0
    assert state.best_candidate[QA_PROMPT] == good_qa and state.best_candidate["memory_update"] == PROMPTS["memory_update"]


def test_plateau_stops_after_patience_rounds(tmp_path):
    ctx, _, _ = make_ctx(tmp_path, reflection=ReflectionLM(magic="be brief"), rounds=5, patience=2,
                         max_metric_calls=150)
    state = run_loop(ctx)
    assert len(state.rounds) == 2 and not any(r.improved for r in state.rounds)
    assert "did not improve for 2 round" in state.stop_reason
    assert state.final["changed_components"] == [] and state.best_candidate == state.seed_candidate


def test_a_budget_that_cannot_pay_for_round_one_is_refused_before_any_lm_call(tmp_path):
    """3 validation questions, minibatch 3, 3 rounds: the baseline takes 3 and each round needs 3 + 2 x 3, so
    round 1 starts only from 3 + 3 x 9 = 30 rollouts. Below that the run would spend its baseline and report
    the seed as optimized; it is refused, naming the field and the minimum, with nothing spent or written."""
    ctx, task, _ = make_ctx(tmp_path / "small", max_metric_calls=29)
    with pytest.raises(ConfigError, match=r"optimizer.max_metric_calls: 29 rollouts .* set at least 30"):
        run_loop(ctx)
    assert sum(task.calls.values()) == 0 and load_state(tmp_path / "small") is None
    ctx, _, _ = make_ctx(tmp_path / "enough", max_metric_calls=30, patience=0)
    state = run_loop(ctx)
    assert len(state.rounds) >= 1


def test_rollout_budget_stops_the_loop(tmp_path):
    ctx, _, _ = make_ctx(tmp_path, reflection=ReflectionLM(magic="be brief"), rounds=5, patience=0,
                         max_metric_calls=60)
    state = run_loop(ctx)
    assert "budget" in state.stop_reason and 0 < len(state.rounds) < 5
    heldout_rollouts = 2 * 3  # seed and best on the 3 held-out questions: reporting, not optimizing
    assert state.spend["rollouts"] - heldout_rollouts <= 60
    final = json.loads((ctx.run_dir / "final.json").read_text())
    assert final["budget"] == {"rollouts": 60, "llm_calls": None}
    assert final["spend"]["rollouts"] - final["optimization_spend"]["rollouts"] == heldout_rollouts
    assert final["optimization_spend"]["llm_calls"] < final["spend"]["llm_calls"]


def test_llm_call_budget_stops_the_loop(tmp_path):
    ctx, _, _ = make_ctx(tmp_path, reflection=ReflectionLM(magic="be brief"), rounds=5, patience=0,
                         max_llm_calls=45)
    state = run_loop(ctx)
    assert state.stop_reason == "LM-call budget spent"
    assert len(state.rounds) < 5


class KillingReflection(ReflectionLM):
    """Simulates a kill (Ctrl-C) at its ``kill_at``-th call."""

    def __init__(self, kill_at: int, **kw) -> None:
        super().__init__(**kw)
        self.kill_at = kill_at

    def chat(self, messages, **kw):
        if len(self.components) + 1 >= self.kill_at:
            raise KeyboardInterrupt
        return super().chat(messages, **kw)


def test_resume_continues_from_the_checkpoint_without_redoing_rounds(tmp_path):
    plan = {"rounds": 3, "patience": 0, "max_metric_calls": 120}
    probe_ctx, _, probe = make_ctx(tmp_path / "probe", reflection=ReflectionLM(magic="be brief"), **plan)
    run_loop(probe_ctx)
    calls_round_1 = json.loads((tmp_path / "probe" / "checkpoint.json").read_text())["rounds"][0]["spend"]["llm_calls"]
    assert calls_round_1 > 0
    per_round = len(probe.components) // 3

    ctx, _, _ = make_ctx(tmp_path / "run", reflection=KillingReflection(per_round + 2, magic="be brief"), **plan)
    with pytest.raises(KeyboardInterrupt):
        run_loop(ctx)
    killed = load_state(tmp_path / "run")
    assert [r.index for r in killed.rounds] == [1] and killed.status == "running"
    stamp = (tmp_path / "run" / "rounds" / "round_1" / "optimizer.json").stat().st_mtime_ns

    with pytest.raises(ConfigError, match="checkpoint exists here: rerun without --no-resume"):
        run_loop(make_ctx(tmp_path / "run")[0])
    ctx2, task2, fresh = make_ctx(tmp_path / "run", reflection=ReflectionLM(magic="be brief"), **plan)
    state = run_loop(ctx2, resume=True)
    assert [r.index for r in state.rounds] == [1, 2, 3] and state.status == "done"
    assert (tmp_path / "run" / "rounds" / "round_1" / "optimizer.json").stat().st_mtime_ns == stamp
    assert len(fresh.components) < len(probe.components)  # round 1's reflection was not redone
    assert state.rounds[0] == killed.rounds[0]
    assert run_loop(ctx2, resume=True).final == state.final  # a finished run just reports


def test_resume_with_another_plan_is_refused(tmp_path):
    ctx, _, _ = make_ctx(tmp_path)
    run_loop(ctx)
    other, _, _ = make_ctx(tmp_path, rounds=7)
    with pytest.raises(ConfigError, match="another optimizer plan"):
        run_loop(other, resume=True)


def test_method_none_only_compares_on_heldout(tmp_path):
    ctx, _, reflection = make_ctx(tmp_path, "none")
    state = run_loop(ctx)
    assert state.rounds == [] and reflection.components == []
    assert state.stop_reason.startswith("method none")
    assert state.final["seed_accuracy"] == state.final["best_accuracy"] == 0.0


def test_unknown_target_is_a_config_error(tmp_path):
    ctx, _, _ = make_ctx(tmp_path, targets=("nope",))
    with pytest.raises(ConfigError, match="optimizer.targets"):
        run_loop(ctx)


class BrokenReflection(ReflectionLM):
    def chat(self, messages, **kw):
        raise LMError("reflection model: connection refused")


def test_a_broken_reflection_model_stops_the_run_with_its_error(tmp_path):
    ctx, _, _ = make_ctx(tmp_path, reflection=BrokenReflection())
    with pytest.raises(LMError, match="connection refused"):
        run_loop(ctx)
    assert load_state(tmp_path).rounds == []  # nothing half-done was recorded as a round


@pytest.mark.parametrize("content", ["[]", '{"format": "memtrace-loop/1", "spend": "lots"}', "\xff\xfe", "{"])
def test_a_corrupt_checkpoint_is_one_config_error(tmp_path, content):
    from memtrace_opt.rundir.schemas import CHECKPOINT

    (tmp_path / "checkpoint.json").write_text(content.replace("memtrace-loop/1", CHECKPOINT.id),
                                              encoding="latin-1")
    with pytest.raises(ConfigError, match="unreadable checkpoint"):
        load_state(tmp_path)


def test_the_loop_verifies_blame_by_replay_when_the_config_asks(tmp_path):
    """attribution.counterfactual: every round blame is checked by replaying the fix (extraction repaired →
    the answer is right again), and the count of failed verifications is recorded (zero here)."""
    from memtrace_opt.config import AttributionConfig
    from memtrace_opt.errors import ConfigError
    from memtrace_opt.loop.blaming import make_attributor

    good_qa = f"{SEED_QA} Always {QA_MAGIC} before answering."
    ctx, _, _ = make_ctx(tmp_path, extract_magic=QA_MAGIC, seed_qa=good_qa, rounds=1)
    ctx.attributor = make_attributor(AttributionConfig(counterfactual=True), lms=ctx.backend.lms)
    run_loop(ctx)
    blame = read_blame(tmp_path / "rounds" / "round_1" / "blame.json")
    signals = blame["signals"]
    assert signals and {s["error_type"] for s in signals} == {"ExtractionError"}
    assert all(s["counterfactual_rescued"] is True for s in signals)
    assert blame["verification_failed"] == 0
    with pytest.raises(ConfigError, match="needs the task"):
        make_attributor(AttributionConfig(counterfactual=True))
    assert make_attributor(AttributionConfig(counterfactual=False)).verify_lms is None
