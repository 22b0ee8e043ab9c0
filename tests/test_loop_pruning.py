"""Pruning a round's winner: learned deltas validation does not pay for are undone, the rest stay."""

from __future__ import annotations

import json

from memtrace_opt.loop import LoopContext, LoopData, LoopPlan, run_loop
from memtrace_opt.loop.pruning import prune, undos
from memtrace_opt.graph.prompt_parts import compose_prompt, split_prompt
from memtrace_opt.systems.base import QA_PROMPT
from memtrace_opt.testing import ScriptedLM
from tests.test_line_blame import ABSTAIN, SEED, AbstainingTaskLM
from tests.test_loop_fixtures import accounted, backend, conversations, qa_blamer

PARENT = {"qa": compose_prompt("Answer.\nSay: Not mentioned."), "extract": "Extract facts."}
CHILD = {"qa": compose_prompt("Answer.", ["If asked when, give a date.", "If asked who, give a name."],
                              ["Input: q\nOutput: a"]), "extract": "Extract facts."}


def scored_by(needed: dict[str, str]):
    """Validation that scores 1.0 when each needed text is (or is not, for '!text') in the QA prompt; counts calls."""
    calls: list[dict[str, str]] = []

    def evaluate(candidate: dict[str, str]) -> tuple[float, dict[str, float]]:
        calls.append(candidate)
        text = candidate["qa"]
        ok = all((t[1:] not in text) if t.startswith("!") else (t in text) for t in needed.values())
        return (1.0 if ok else 0.5), {"q1": 1.0 if ok else 0.5}

    return evaluate, calls


def test_every_learned_delta_of_the_child_is_listed_once_and_unchanged_components_are_not():
    found = undos(PARENT, CHILD)
    assert [(u.component, u.kind) for u in found] == [("qa", "rule"), ("qa", "rule"), ("qa", "examples"),
                                                      ("qa", "instruction")]
    assert undos(PARENT, PARENT) == []


def test_passenger_deltas_are_undone_and_the_delta_that_pays_stays():
    # Only dropping the abstain line matters; both rules and the examples are passengers.
    evaluate, calls = scored_by({"line": "!Say: Not mentioned."})
    result = prune(PARENT, CHILD, 1.0, {"q1": 1.0}, evaluate)
    parts = split_prompt(result.candidate["qa"])
    assert parts.rules == () and parts.examples == () and parts.instruction == "Answer."
    assert result.score == 1.0 and len(calls) == 4
    assert [s["kept"] for s in result.log] == [True, True, True, False]
    assert result.candidate["extract"] == "Extract facts."


def test_a_delta_whose_undo_lowers_validation_is_kept():
    evaluate, _ = scored_by({"rule": "If asked who, give a name.", "line": "!Say: Not mentioned."})
    result = prune(PARENT, CHILD, 1.0, {"q1": 1.0}, evaluate)
    assert split_prompt(result.candidate["qa"]).rules == ("If asked who, give a name.",)
    kept = {(s["undo"], s["detail"]): s["kept"] for s in result.log}
    assert kept[("rule", "If asked who, give a name.")] is False
    assert kept[("rule", "If asked when, give a date.")] is True


def test_each_undo_is_announced_before_its_validation_pass_and_reported_after():
    evaluate, calls = scored_by({"line": "!Say: Not mentioned."})
    heard: list[tuple[int, int, str, bool | None, int]] = []
    prune(PARENT, CHILD, 1.0, {"q1": 1.0}, evaluate,
          lambda n, total, undo, step: heard.append((n, total, undo.kind, None if step is None else step["kept"],
                                                     len(calls))))
    assert heard == [(1, 4, "rule", None, 0), (1, 4, "rule", True, 1), (2, 4, "rule", None, 1),
                     (2, 4, "rule", True, 2), (3, 4, "examples", None, 2), (3, 4, "examples", True, 3),
                     (4, 4, "instruction", None, 3), (4, 4, "instruction", False, 4)]


def test_the_loop_prunes_a_passenger_rule_and_logs_it(tmp_path):
    convs = conversations()
    reflection = ScriptedLM(rules=((r"(?s).*", "If the step receives a question naming a person, it should answer briefly."),))
    ctx = LoopContext(
        backend=backend(AbstainingTaskLM(convs)), data=LoopData(tuple(convs[:1]), tuple(convs[1:2]), tuple(convs[2:])),
        plan=LoopPlan(method="attributed", rounds=1, patience=0, max_metric_calls=80, minibatch_size=3,
                      deltas=("rules", "lines"), acceptance="equal"),
        run_dir=tmp_path, reflection_lm=accounted(reflection, "reflection"), attributor=qa_blamer(),
        base_prompts={QA_PROMPT: SEED},
    )
    said: list[str] = []
    ctx.progress = said.append
    state = run_loop(ctx)
    assert any(line.startswith("  undo 1/") and "→ validation on" in line for line in said)
    assert any("(undo kept)" in line for line in said)
    info = json.loads((tmp_path / "rounds" / "round_1" / "optimizer.json").read_text())
    best = split_prompt((tmp_path / "prompts" / f"{QA_PROMPT}.txt").read_text())
    assert ABSTAIN not in best.instruction and state.final["best_accuracy"] == 1.0
    assert best.rules == ()  # the rule never changed an answer: validation did not pay for it
    assert any(s["undo"] == "rule" and s["kept"] for s in info["pruning"])
    assert all(not s["kept"] for s in info["pruning"] if s["undo"] == "instruction")
