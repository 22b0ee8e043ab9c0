"""The held-out audit of selection: candidates validation rejected, scored on held-out after the final
comparison, kept apart from the method's spend and from every decision."""

from __future__ import annotations

import json
from types import SimpleNamespace

import yaml

from memtrace_opt.cli import main
from memtrace_opt.loop.audit import describe_delta, rejected_candidates
from memtrace_opt.graph.prompt_parts import compose_prompt
from tests.test_loop_compare import write_config
from tests.test_loop_fixtures import SEED_QA, ReflectionLM, TaskLM, accounted, conversations

SEED = {"question_answering": "Answer briefly.\n- Use dates.\n- Say Not mentioned if unsure."}


def _round(index, *entries):
    return SimpleNamespace(index=index, optimizer={"validated": [
        {"candidate": {"question_answering": text}, "val_score": score} for text, score in entries]})


def test_rejected_candidates_are_distinct_exclude_seed_and_kept_and_come_best_first():
    best = {"question_answering": "kept"}
    rounds = [_round(1, ("a", 0.2), (SEED["question_answering"], 0.5), ("kept", 0.9), ("b", 0.4)),
              _round(2, ("a", 0.2), ("c", 0.4), ("d", 0.1))]
    got = rejected_candidates(rounds, seed=SEED, best=best, limit=3)
    assert [(e["round"], e["candidate"]["question_answering"], e["val_score"]) for e in got] == [
        (1, "b", 0.4), (2, "c", 0.4), (1, "a", 0.2)]  # ties keep the order found; "a" counted once
    assert rejected_candidates(rounds, seed=SEED, best=best, limit=0) == []
    assert rejected_candidates([SimpleNamespace(index=1, optimizer={})], seed=SEED, best=best, limit=3) == []


def test_describe_delta_names_rules_examples_and_lines():
    seed = SEED["question_answering"]
    added = compose_prompt(seed, ["If asked when, give a date."], ["Input: q\nOutput: a", "Input: r\nOutput: b"])
    assert describe_delta(SEED, {"question_answering": added}) == "question_answering: +1 rule, +2 examples"
    dropped = "Answer briefly.\n- Use dates."
    assert describe_delta(SEED, {"question_answering": dropped}) == "question_answering: -1 line"
    assert describe_delta(SEED, dict(SEED)) == "no change"


def _audited_run(tmp_path, audit_candidates: int):
    """A scripted attributed run whose demo set ties the minibatch, goes to validation and loses to the rule."""
    from memtrace_opt.run.lms import Injected

    config = write_config(tmp_path, "attributed")
    cfg = yaml.safe_load(config.read_text())
    cfg["optimizer"].update({"acceptance": "equal", "deltas": ["demos", "rules"], "rounds": 1,
                             "audit_candidates": audit_candidates})
    config.write_text(yaml.safe_dump(cfg))
    task = accounted(TaskLM(conversations()), "task")
    inj = Injected.of({"task": task, "judge": task, "reflection": accounted(ReflectionLM(), "reflection")})
    assert main(["optimize", str(config)], injected=inj) == 0
    return tmp_path / "runs" / "cli-attributed"


def test_optimize_audits_the_rejected_candidates_on_held_out(tmp_path, capsys):
    _audited_run(tmp_path, 2)
    out = capsys.readouterr().out
    final = json.loads((tmp_path / "runs" / "cli-attributed" / "final.json").read_text())
    audit = final["audit"]
    assert audit, "the demo set tied the minibatch, went to validation and lost to the rule: it is audited"
    kept = (tmp_path / "runs" / "cli-attributed" / "prompts" / "question_answering.txt").read_text()
    for entry in audit:
        assert entry["candidate"]["question_answering"] not in (kept, SEED_QA)
        scores = entry["scores"]
        assert set(scores) == set(entry["predictions"]) == {c["qa_id"] for c in final["cases"]}
        seed_scores = {c["qa_id"]: c["seed_score"] for c in final["cases"]}
        assert entry["gain"] == sum(scores[q] - seed_scores[q] for q in scores) / len(scores)
        assert entry["fixed"] == sum(scores[q] > seed_scores[q] for q in scores)
        assert entry["change"].startswith("question_answering: +")
    # the audit's cost is its own: the method's spend is what every method is compared on
    assert final["audit_spend"]["rollouts"] == len(audit) * final["n"]
    assert "held-out audit of candidates validation rejected" in out and f"round 1 · {audit[0]['change']}" in out
    state = json.loads((tmp_path / "runs" / "cli-attributed" / "checkpoint.json").read_text())
    assert not {"candidate", "scores", "predictions"} & set(state["final"]["audit"][0])  # the summary only


def test_the_report_shows_the_audit_as_a_check_with_each_candidates_diff(tmp_path):
    run = _audited_run(tmp_path, 1)
    assert main(["report", str(run), "--out", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text()
    assert "Candidates validation rejected, on the held-out questions" in html and "never a choice" in html
    assert "candidate 1: <code>question_answering</code>" in html and "Worked examples" in html
