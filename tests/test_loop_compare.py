"""compare: gains, paired CIs and p-values on hand-made results; the optimize and compare CLIs end to end."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from memtrace_opt.cli import main
from memtrace_opt.eval.metrics import paired_bootstrap
from memtrace_opt.loop.compare import compare_finals, compare_runs
from memtrace_opt.errors import ConfigError
from memtrace_opt.lm.run_lms import Injected
from tests.test_loop_fixtures import SEED_QA, ReflectionLM, TaskLM, accounted, conversations


def final(method, seed, best, system="rag", spend=None):
    cases = [{"qa_id": f"q{i}", "seed_score": s, "best_score": b} for i, (s, b) in enumerate(zip(seed, best))]
    return {"method": method, "system": system, "cases": cases, "changed_components": ["question_answering"],
            "spend": spend or {"rollouts": 10, "llm_calls": 20, "prompt_tokens": 300, "completion_tokens": 30,
                               "wall_s": 5.0}}


def test_gain_ci_and_p_value_on_hand_made_results():
    seed = [0, 0, 1, 0, 1, 0, 0, 1, 0, 0]
    best = [1, 1, 1, 0, 1, 1, 0, 1, 1, 0]
    rows = compare_finals({"a": final("attributed", seed, best), "n": final("none", seed, seed)})
    attributed, none = rows
    assert (attributed.method, none.method) == ("attributed", "none")
    assert attributed.seed_accuracy == pytest.approx(0.3) and attributed.accuracy == pytest.approx(0.7)
    assert attributed.gain == pytest.approx(0.4)
    expected = paired_bootstrap(seed, best)
    assert attributed.gain_ci == pytest.approx((expected.ci_low, expected.ci_high))
    assert attributed.p_value == pytest.approx(expected.p_value)
    assert attributed.gain_ci[0] > 0 and attributed.p_value < 0.05  # four wins, no losses
    assert none.gain == 0.0 and none.gain_ci == (0.0, 0.0)
    assert attributed.tokens == 330 and attributed.rollouts == 10 and not attributed.warnings


def test_a_gain_that_is_noise_has_a_ci_covering_zero():
    seed, best = [1, 0, 1, 0, 1, 0], [0, 1, 1, 0, 1, 1]  # one loss, two wins
    row = compare_finals({"x": final("unattributed", seed, best)})[0]
    assert row.gain == pytest.approx(1 / 6)
    assert row.gain_ci[0] < 0 < row.gain_ci[1] and row.p_value > 0.05


def test_mismatched_baselines_are_flagged():
    rows = compare_finals({"a": final("attributed", [0, 0], [1, 1]), "b": final("none", [1, 0], [1, 0])})
    assert all("baselines differ" in " ".join(r.warnings) for r in rows)


def test_unfinished_run_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="not a finished optimize run"):
        compare_runs([tmp_path])


def write_dataset(path):
    convs = []
    for conv in conversations():
        convs.append({
            "id": conv.id, "speakers": list(conv.speakers),
            "sessions": [{"date_time": s.date_time, "turns": [{"speaker": t.speaker, "text": t.text} for t in s.turns]}
                         for s in conv.sessions],
            "qa": [{"question": q.question, "answer": q.answer, "category": "single-hop", "evidence": list(q.evidence)}
                   for q in conv.qa],
        })
    path.write_text(json.dumps({"format": "memtrace-mini/1", "name": "looptest", "conversations": convs}))


def write_config(tmp_path, method):
    write_dataset(tmp_path / "data.json")
    cfg = {
        "run_name": f"cli-{method}", "output_dir": str(tmp_path / "runs"),
        "dataset": {"name": "mini", "path": str(tmp_path / "data.json")},
        "split": {"optimize": ["c-opt"], "validation": ["c-val"], "heldout": ["c-held"]},
        "system": {"name": "long_context", "prompts": {"question_answering": SEED_QA}},
        "eval": {"judge": "deterministic"},
        "optimizer": {"method": method, "rounds": 2, "max_metric_calls": 80, "minibatch_size": 3},
    }
    path = tmp_path / f"{method}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_optimize_and_compare_cli(tmp_path, capsys):
    from memtrace_opt.lm.run_lms import Injected

    config = write_config(tmp_path, "attributed")
    task = accounted(TaskLM(conversations()), "task")
    lms = {"task": task, "judge": task, "reflection": accounted(ReflectionLM(), "reflection")}
    inj = Injected.of(lms)
    assert main(["optimize", str(config)], injected=inj) == 0
    assert main(["optimize", str(config), "--method", "none", "--out", str(tmp_path / "runs" / "none")], injected=inj) == 0
    assert main(["optimize", str(config), "--no-resume"], injected=inj) == 2  # a checkpoint exists: refused
    assert main(["optimize", str(config)], injected=inj) == 0  # resumed (the default, as for eval): nothing left to do
    captured = capsys.readouterr()
    out = captured.out
    assert "optimized 100.0%" in out and "question_answering" in out
    assert re.search(r"effect: \+100\.0 points, paired bootstrap 95% CI \[\+100\.0, \+100\.0\], p = [0-9.]+ · 3 "
                     r"questions fixed, 0 broken", out)
    assert "baseline validation accuracy" in captured.err and "round 1/" in captured.err
    assert "method attributed (demos/rules/lines deltas) · budget 80 rollouts over 2 round(s) · seed 0" in captured.err
    assert re.search(r"spent: \d+ optimization rollouts of a 80-rollout budget.* · 6 held-out evaluation rollouts", out)
    assert "held-out failures attributed:" in out
    assert "kept nothing" not in out  # the attributed run changed the prompt; `none` runs no round
    blame = json.loads((tmp_path / "runs" / "none" / "blame.json").read_text())
    assert blame["signals"] and all(s["error_type"] for s in blame["signals"])
    run = tmp_path / "runs" / "cli-attributed"
    assert (run / "config.yaml").exists() and (run / "prompts" / "question_answering.diff").exists()
    assert main(["compare", str(run), str(tmp_path / "runs" / "none"), "--json"]) == 0
    rows = {r["method"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert rows["attributed"]["gain"] == pytest.approx(1.0) and rows["none"]["gain"] == 0.0
    assert rows["attributed"]["system"] == "long_context"
    assert main(["compare", str(run)]) == 0
    assert "Held-out accuracy" in capsys.readouterr().out
    assert main(["optimize", str(config), "--method", "bogus", "--out", str(tmp_path / "x")]) == 2


def test_optimize_follows_the_cli_convention_json_on_stdout_progress_on_stderr(tmp_path, capsys):
    from memtrace_opt.lm.run_lms import Injected

    config = write_config(tmp_path, "attributed")
    task = accounted(TaskLM(conversations()), "task")
    inj = Injected.of({"task": task, "judge": task, "reflection": accounted(ReflectionLM(), "reflection")})
    assert main(["optimize", str(config)], injected=inj) == 0
    loud = capsys.readouterr()
    assert main(["optimize", str(config), "--json", "--quiet"], injected=inj) == 0  # resumed: nothing left to run
    quiet = capsys.readouterr()
    stamp = re.compile(r"^\[\d\d:\d\d:\d\d\] ", re.M)
    assert stamp.search(loud.err) and "round 1/" in loud.err  # timestamped progress on stderr
    assert re.search(r"proposal 1 \((demos|rule|line)", loud.err)  # GEPA's proposals are reported as they come
    assert loud.out.rstrip().splitlines()[-1].startswith("held-out (3 questions): no optimization 0.0% → optimized")
    final = json.loads(quiet.out)  # stdout is one JSON document, nothing else
    assert final["best_accuracy"] == 1.0 and final["run_dir"].endswith("cli-attributed") and final["n"] == 3
    assert not stamp.search(quiet.err) and "held-out (3 questions)" in quiet.err  # the summary line only


def loop_lms():
    task = accounted(TaskLM(conversations()), "task")
    return {"task": task, "judge": task, "reflection": accounted(ReflectionLM(), "reflection")}


def test_optimize_resume_refuses_a_changed_config(tmp_path, capsys):
    """A resumed run whose config changed would evaluate a new slice while config.yaml recorded the old one."""
    from memtrace_opt.lm.run_lms import Injected

    config = write_config(tmp_path, "attributed")
    inj = Injected.of(loop_lms())
    assert main(["optimize", str(config), "--method", "none"], injected=inj) == 0
    changed = yaml.safe_load(config.read_text())
    changed["dataset"]["max_questions"] = 1
    config.write_text(yaml.safe_dump(changed))
    capsys.readouterr()
    assert main(["optimize", str(config), "--method", "none", "--resume"], injected=inj) == 2
    err = capsys.readouterr().err
    assert "holds a run of a different config (changed: dataset.max_questions)" in err and err.count("\n") == 1


def test_optimize_resume_force_accepts_and_records_a_changed_config(tmp_path, capsys):
    from memtrace_opt.lm.run_lms import Injected

    config = write_config(tmp_path, "attributed")
    inj = Injected.of(loop_lms())
    assert main(["optimize", str(config), "--method", "none"], injected=inj) == 0
    changed = yaml.safe_load(config.read_text())
    changed["eval"]["judge"] = "llm"
    config.write_text(yaml.safe_dump(changed))
    assert main(["optimize", str(config), "--method", "none", "--resume", "--force"], injected=inj) == 0
    run = tmp_path / "runs" / "cli-attributed"
    log = json.loads((run / "config_changes.json").read_text())
    assert log[0]["changed"] == ["eval.judge"] and "judge: deterministic" in log[0]["previous_config"]
    assert "judge: llm" in (run / "config.yaml").read_text()


def test_prompts_from_retests_a_finished_runs_prompts_against_the_seed(tmp_path, capsys):
    config = write_config(tmp_path, "attributed")
    task = accounted(TaskLM(conversations()), "task")
    inj = Injected({"task": task, "judge": task, "reflection": accounted(ReflectionLM(), "reflection")})
    assert main(["optimize", str(config), "--no-attribute"], injected=inj) == 0
    capsys.readouterr()
    optimized = tmp_path / "runs" / "cli-attributed"
    retest = tmp_path / "runs" / "retest"
    assert main(["optimize", str(config), "--method", "none", "--prompts-from", str(optimized), "--out", str(retest),
                 "--json", "--quiet", "--no-attribute"], injected=inj) == 0
    final = json.loads(capsys.readouterr().out)
    assert final["seed_accuracy"] == 0.0 and final["best_accuracy"] == 1.0  # the imported prompts, not re-optimized
    assert final["changed_components"] == ["question_answering"] and final["rounds"] == 0
    assert (retest / "prompts" / "question_answering.txt").read_text() == \
        (optimized / "prompts" / "question_answering.txt").read_text()
    assert main(["optimize", str(config), "--prompts-from", str(optimized), "--out", str(tmp_path / "x")],
                injected=inj) == 2  # only with --method none
    assert "--method none" in capsys.readouterr().err
    assert main(["optimize", str(config), "--method", "none", "--prompts-from", str(tmp_path),
                 "--out", str(tmp_path / "y")], injected=inj) == 2  # no prompts/ there


def test_a_run_that_kept_nothing_says_what_it_tried():
    from types import SimpleNamespace

    from memtrace_opt.commands.optimize import kept_nothing_line

    rounds = [SimpleNamespace(optimizer={"candidates": 4}, val_score=1 / 6),
              SimpleNamespace(optimizer={"candidates": 2}, val_score=0.0)]
    line = kept_nothing_line(SimpleNamespace(rounds=rounds, baseline_val=1 / 6))
    assert line.startswith("kept nothing: 4 candidate prompt(s) tried over 2 round(s); the best round scored 16.7% "
                           "on validation, the seed 16.7%")
    mipro = kept_nothing_line(SimpleNamespace(rounds=[SimpleNamespace(optimizer={}, val_score=0.5)], baseline_val=0.5))
    assert mipro.startswith("kept nothing: 1 round(s); the best round scored 50.0%")


def test_spend_line_keeps_the_optimization_apart_from_the_heldout_pass_and_names_an_overshoot():
    from memtrace_opt.loop.budget import spend_line

    spend = {"rollouts": 192, "llm_calls": 182, "cached_calls": 38, "wall_s": 630.5}
    over = {"spend": spend, "optimization_spend": {"rollouts": 144}, "budget": {"rollouts": 128}}
    line = spend_line(over)
    assert line.startswith("spent: 144 optimization rollouts of a 128-rollout budget (+16 past it")
    assert "48 held-out evaluation rollouts" in line and "182 LM calls (38 cached), 630 s" in line
    within = spend_line({**over, "optimization_spend": {"rollouts": 120}})
    assert "past it" not in within and "72 held-out" in within
    assert spend_line({"spend": spend}) == "spent: 192 rollouts in all, 182 LM calls (38 cached), 630 s"


def test_compare_warns_when_methods_had_different_rollout_budgets():
    seed, best = [0, 1, 0, 1], [1, 1, 0, 1]

    def with_budget(method, budget, opt):
        return {**final(method, seed, best), "budget": {"rollouts": budget}, "optimization_spend": {"rollouts": opt}}

    rows = compare_finals({"a": with_budget("attributed", 128, 130), "u": with_budget("unattributed", 128, 120),
                           "n": with_budget("none", 0, 4)})
    assert not any(r.warnings for r in rows)
    assert (rows[0].optimization_rollouts, rows[0].budget_rollouts) == (130, 128)
    rows = compare_finals({"a": with_budget("attributed", 128, 130), "u": with_budget("unattributed", 300, 280)})
    assert all("rollout budgets differ" in w for r in rows for w in r.warnings)
    legacy = compare_finals({"a": final("attributed", seed, best)})[0]
    assert legacy.optimization_rollouts is None and legacy.budget_rollouts is None
