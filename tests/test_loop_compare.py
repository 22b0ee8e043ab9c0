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
from memtrace_opt.run.lms import Injected
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
    from memtrace_opt.run.lms import Injected

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
    assert rows["attributed"]["blame_share"] == {"question_answering": 1.0}  # the scripted failures are the QA prompt's
    assert set(rows["attributed"]["changed_prompts"]) == {"question_answering"} and rows["none"]["changed_prompts"] == {}
    assert rows["none"]["blame_share"] is None and rows["attributed"]["gain_vs_unattributed"] is None  # no ablation run
    assert main(["compare", str(run)]) == 0
    assert "Held-out accuracy" in capsys.readouterr().out
    assert main(["optimize", str(config), "--method", "bogus", "--out", str(tmp_path / "x")]) == 2


def test_optimize_follows_the_cli_convention_json_on_stdout_progress_on_stderr(tmp_path, capsys):
    from memtrace_opt.run.lms import Injected

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
    from memtrace_opt.run.lms import Injected

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
    from memtrace_opt.run.lms import Injected

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


# -- paired against the unattributed ablation; routing -------------------------------------------------------------
def scored(method, best, ids=None, system="rag"):
    """A final.json whose best prompts scored ``best`` on questions ``ids`` (q0, q1, ... by default)."""
    ids = ids or [f"q{i}" for i in range(len(best))]
    cases = [{"qa_id": q, "seed_score": 0, "best_score": b} for q, b in zip(ids, best)]
    return {"method": method, "system": system, "cases": cases, "changed_components": [], "spend": {}}


def table_text(rows):
    from rich.console import Console

    from memtrace_opt.loop.compare import render_table

    console = Console(width=400, record=True)
    console.print(render_table(rows))
    return console.export_text()


def test_each_method_is_paired_with_the_unattributed_run_on_the_same_questions():
    attributed_best, ablation_best = [1] * 8 + [0] * 2, [1] * 5 + [0] * 5  # 8 of 10 right vs 5 of 10
    rows = {r.method: r for r in compare_finals({
        "a": scored("attributed", attributed_best), "u": scored("unattributed", ablation_best),
        "f": scored("answer_feedback", ablation_best)})}
    a = rows["attributed"]
    assert a.gain_vs_unattributed == pytest.approx(0.3) and a.n_vs_unattributed == 10 and a.unattributed_run == "u"
    ids = [f"q{i}" for i in range(10)]
    expected = paired_bootstrap(dict(zip(ids, ablation_best)), dict(zip(ids, attributed_best)))
    assert a.ci_vs_unattributed == pytest.approx((expected.ci_low, expected.ci_high))
    assert a.p_vs_unattributed == pytest.approx(expected.p_value)
    assert a.ci_vs_unattributed[0] >= 0 < a.ci_vs_unattributed[1]  # three wins, no loss: never below zero
    same = rows["answer_feedback"]  # the ablation's very scores
    assert (same.gain_vs_unattributed, same.ci_vs_unattributed, same.p_vs_unattributed) == (0.0, (0.0, 0.0), 1.0)
    u = rows["unattributed"]
    assert (u.gain_vs_unattributed, u.ci_vs_unattributed, u.p_vs_unattributed, u.n_vs_unattributed) == (None,) * 4
    assert a.to_dict()["ci_vs_unattributed"] == list(a.ci_vs_unattributed)
    assert "+30.0 [" in table_text(list(rows.values()))


def test_without_an_unattributed_run_the_fields_are_null_and_the_table_says_so():
    rows = compare_finals({"a": scored("attributed", [1, 0]), "n": scored("none", [0, 0]),
                           "u": scored("unattributed", [1, 1], system="mem0")})
    for r in rows:
        assert r.to_dict()["gain_vs_unattributed"] is None and r.to_dict()["ci_vs_unattributed"] is None
        assert r.n_vs_unattributed is None and r.p_vs_unattributed is None
    assert "vs unattr.: no unattributed run of rag among these dirs" in table_text(rows)


def test_partly_shared_questions_pair_on_the_intersection_and_disjoint_ones_not_at_all():
    ablation = scored("unattributed", [0] * 10, [f"q{i}" for i in range(5, 15)])
    overlap = scored("attributed", [1] * 10, [f"q{i}" for i in range(10)])  # q5..q9 shared
    row = {r.method: r for r in compare_finals({"a": overlap, "u": ablation})}["attributed"]
    assert row.n_vs_unattributed == 5 and row.gain_vs_unattributed == pytest.approx(1.0)
    disjoint = scored("attributed", [1, 1], ["x1", "x2"])
    rows = compare_finals({"a": disjoint, "u": ablation})
    row = next(r for r in rows if r.method == "attributed")
    assert row.unattributed_run == "u" and row.gain_vs_unattributed is None and row.n_vs_unattributed is None
    assert any("shares no held-out question with unattributed run u" in w for w in row.warnings)
    assert "no question shared with the unattributed run: a" in table_text(rows)


def test_several_unattributed_runs_pair_by_seed_or_refuse_the_ambiguity():
    from memtrace_opt.loop.routing import RunRouting

    finals = {"a1": scored("attributed", [1, 1]), "u0": scored("unattributed", [0, 0]),
              "u1": scored("unattributed", [1, 0])}
    seeds = {"a1": RunRouting(seed=1), "u0": RunRouting(seed=0), "u1": RunRouting(seed=1)}
    row = next(r for r in compare_finals(finals, routing=seeds) if r.method == "attributed")
    assert row.unattributed_run == "u1" and row.gain_vs_unattributed == pytest.approx(0.5)
    with pytest.raises(ConfigError, match=r"2 unattributed runs of system rag \(u0, u1\) and 0 with this run's seed "
                                          r"\(2\): compare one unattributed run per seed") as err:
        compare_finals(finals, routing={**seeds, "a1": RunRouting(seed=2)})
    assert "\n" not in str(err.value)


def write_loop_run(run_dir, method, rounds, seed_prompts, best_prompts, seed=0):
    """A finished run dir as the loop leaves it: checkpoint, one blame.json per round, final.json."""
    from memtrace_opt.loop.artifacts import blame_summary
    from memtrace_opt.rundir import round_dir, write_json
    from memtrace_opt.loop.blaming import RoundBlame
    from memtrace_opt.loop.checkpoint import LoopState, save_state

    run_dir.mkdir(parents=True)
    save_state(run_dir, LoopState(plan={"method": method, "seed": seed}, system="rag", settings={},
                                  seed_candidate=seed_prompts, best_candidate=best_prompts, status="done"))
    for k, signals in enumerate(rounds, start=1):
        round_dir(run_dir, k).mkdir(parents=True)
        blame = RoundBlame({s.case_id: s for s in signals}, blame_summary(signals), [], len(signals))
        write_json(round_dir(run_dir, k) / "blame.json", blame.to_dict())
    write_json(run_dir / "final.json", scored(method, [1, 0]))
    return run_dir


def signal(case, component, error="ResponseError", method="tracing", op="answer:q/answer#0"):
    from memtrace_opt.attribution.blame import BlameSignal

    return BlameSignal(case, "q", "g", "p", error, op, component, "why", method=method)


def test_routing_changed_prompts_and_blame_share_from_the_run_dir(tmp_path):
    seed = {"question_answering": "a\nb\n", "fact_extraction": "x\n"}
    best = {"question_answering": "a\nc\nd\ne\n", "fact_extraction": "x\n"}
    rounds = [[signal("c/q1", "fact_extraction"), signal("c/q2", "memory_update"),
               signal("c/q3", None, "RetrievalError", op="answer:q3/search#0"), signal("c/q4", None, error=None)],
              [signal("c/q1", "fact_extraction")]]  # q1 failed again in round 2: routed twice
    attributed = write_loop_run(tmp_path / "attributed", "attributed", rounds, seed, best)
    labels = [signal(f"c/q{i}", None, method="unattributed") for i in range(3)]
    ablation = write_loop_run(tmp_path / "unattributed", "unattributed", [labels], seed, seed)
    none = write_loop_run(tmp_path / "none", "none", [], seed, seed)
    rows = {r.method: r for r in compare_runs([attributed, ablation, none], n_boot=200)}
    a = rows["attributed"]
    assert a.changed_prompts == {"question_answering": {"added_lines": 3, "removed_lines": 1}}
    assert a.blame_share == {"fact_extraction": 0.5, "(no prompt)": 0.25, "memory_update": 0.25}
    assert a.blamed_failures == 4  # the failed attribution is no blame
    u = rows["unattributed"]
    assert u.blame_share is None and u.blamed_failures == 0 and u.changed_prompts == {}
    assert rows["none"].blame_share is None and rows["none"].blamed_failures is None
    text = table_text(list(rows.values()))
    assert "question_answering(+3/-1)" in text
    assert "fact_extraction 0.50, (no prompt) 0.25, memory_update 0.25 (n 4)" in text
    assert "every failure to every prompt" in text


def test_a_malformed_round_blame_record_is_one_line_naming_the_file_and_field(tmp_path):
    from memtrace_opt.errors import DatasetError
    from memtrace_opt.loop.routing import read_routing

    run = write_loop_run(tmp_path / "a", "attributed", [[signal("c/q1", "fact_extraction")]], {}, {})
    path = run / "rounds" / "round_1" / "blame.json"
    payload = json.loads(path.read_text())
    payload["signals"][0]["prompt_component"] = 3
    path.write_text(json.dumps(payload))
    with pytest.raises(DatasetError, match=r"round_1/blame.json: signals\[0\]\.prompt_component: expected text"):
        read_routing(run)
