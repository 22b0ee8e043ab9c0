"""Line deltas: blame one instruction line for a step's failures and propose the prompt without it."""

from __future__ import annotations

import json

import pytest

from memtrace_opt.loop import LoopContext, LoopData, LoopPlan, run_loop
from memtrace_opt.optimizers.delta_proposer import DeltaProposer
from memtrace_opt.optimizers.line_blame import blame_line, drop_line, instruction_lines
from memtrace_opt.graph.prompt_parts import compose_prompt, split_prompt
from memtrace_opt.systems.base import QA_PROMPT
from memtrace_opt.testing import ScriptedLM
from tests.test_loop_fixtures import TaskLM, accounted, backend, conversations, qa_blamer

ABSTAIN = "If the memories do not say, reply exactly: Not mentioned."
SEED = f"Answer the question from the memories.\nAnswer in at most six words.\n{ABSTAIN}"


def record(output: str, gold: str = "Paris") -> dict:
    return {"Inputs": {"question": "Where does Bob live?"}, "Generated Outputs": {"answer": output},
            "Feedback": f"ResponseError. Correct answer: {gold}"}


def silent_lm() -> ScriptedLM:
    """A reflection LM with no rule at all: any call raises, so a test proves none was made."""
    return ScriptedLM(rules=(), default=None)


def test_a_line_that_spells_out_the_wrong_output_is_blamed_without_an_lm_call():
    lm = silent_lm()
    blame = blame_line(lm, QA_PROMPT, SEED, [record("Paris"), record("Not mentioned")])
    assert blame is not None and (blame.line, blame.how) == (3, "quoted") and blame.text == ABSTAIN
    assert lm.n_calls == 0
    # a one-word output that happens to occur in a line is not a quote
    assert blame_line(None, QA_PROMPT, "Task.\nGive the city.", [record("city")]) is None


@pytest.mark.parametrize("reply, expected", [("2", 2), ("Line 3.", 3), ("1", None), ("7", None), ("none", None)])
def test_the_lm_names_a_line_and_only_droppable_lines_count(reply, expected):
    lm = ScriptedLM(rules=((r"Which ONE numbered line", reply),))
    blame = blame_line(lm, QA_PROMPT, SEED, [record("Lyon")])
    assert (blame.line if blame else None) == expected
    assert "1. Answer the question from the memories." in lm.calls[0].prompt  # numbered lines are shown


def test_lines_already_tried_and_placeholder_lines_are_never_blamed():
    lm = ScriptedLM(rules=((r"Which ONE numbered line", "3"),))
    assert blame_line(lm, QA_PROMPT, SEED, [record("Not mentioned")], skip={ABSTAIN}) is None
    with_slot = "Task.\nThe date is {today}."
    assert blame_line(ScriptedLM(rules=((r"Which ONE", "2"),)), QA_PROMPT, with_slot, [record("x")]) is None


def test_drop_line_removes_exactly_one_line_and_keeps_the_rest_verbatim():
    assert drop_line(SEED, 2) == f"Answer the question from the memories.\n{ABSTAIN}"
    assert instruction_lines(drop_line("a\n\n  b\nc", 2)) == ["a", "c"]


def test_the_proposer_drops_the_blamed_line_keeps_rules_and_examples_and_never_retries_it():
    current = compose_prompt(SEED, ["If asked when, give a date."], ["Input: q\nOutput: a"])
    lm = ScriptedLM(rules=((r"Which ONE numbered line", "2"),))
    proposer = DeltaProposer({}, lm, kinds=("lines",))
    records = {QA_PROMPT: [record("Not mentioned")]}
    first = proposer({QA_PROMPT: current}, records, [QA_PROMPT])[QA_PROMPT]
    parts = split_prompt(first)
    assert ABSTAIN not in parts.instruction and parts.rules == ("If asked when, give a date.",)
    assert parts.examples == ("Input: q\nOutput: a",)
    assert lm.n_calls == 0 and proposer.lines_log[0]["how"] == "quoted"
    # the same parent again: the quoted line was tried, so the LM is asked and names another line
    second = proposer({QA_PROMPT: current}, records, [QA_PROMPT])[QA_PROMPT]
    assert "at most six words" not in split_prompt(second).instruction and ABSTAIN in second
    assert lm.n_calls == 1
    # a third time nothing untried is left to name: no change, and the log says why
    assert proposer({QA_PROMPT: current}, records, [QA_PROMPT]) == {}
    assert not proposer.log[-1].accepted and "no untried droppable" in proposer.log[-1].reason


def test_unknown_delta_kinds_are_refused():
    with pytest.raises(ValueError, match="delta kinds"):
        DeltaProposer({}, None, kinds=("lines", "rewrites"))


class AbstainingTaskLM(TaskLM):
    """Answers from the memories, except that an instruction to abstain makes it abstain on every question."""

    def _answer(self, system: str, user: str) -> str:
        import re

        question = re.search(r"Question: (.+?)(?:\n|$)", user).group(1)  # type: ignore[union-attr]
        memories = user.split("Question:")[0].lower()
        found = [g for g in self.golds.get(question, []) if g.lower() in memories]
        return "Not mentioned" if ABSTAIN in system or not found else found[0]


def test_the_loop_removes_the_line_that_caused_the_failures_and_gains_on_heldout(tmp_path):
    convs = conversations()
    ctx = LoopContext(
        backend=backend(AbstainingTaskLM(convs)), data=LoopData(tuple(convs[:1]), tuple(convs[1:2]), tuple(convs[2:])),
        plan=LoopPlan(method="attributed", rounds=1, patience=0, max_metric_calls=60, minibatch_size=3,
                      deltas=("lines",)),
        run_dir=tmp_path, reflection_lm=accounted(silent_lm(), "reflection"), attributor=qa_blamer(),
        base_prompts={QA_PROMPT: SEED},
    )
    state = run_loop(ctx)
    assert state.final["seed_accuracy"] == 0.0 and state.final["best_accuracy"] == 1.0
    best = (tmp_path / "prompts" / f"{QA_PROMPT}.txt").read_text()
    assert ABSTAIN not in best and "at most six words" in best
    info = json.loads((tmp_path / "rounds" / "round_1" / "optimizer.json").read_text())
    assert info["lines"][0]["how"] == "quoted" and info["lines"][0]["text"] == ABSTAIN


def test_config_lists_the_delta_kinds_and_rejects_unknown_ones():
    from pydantic import ValidationError

    from memtrace_opt.config import OptimizerConfig

    assert OptimizerConfig().deltas == ["demos", "rules", "lines"]
    assert OptimizerConfig(deltas=["lines"]).deltas == ["lines"]
    with pytest.raises(ValidationError):
        OptimizerConfig(deltas=["rewrites"])


def test_a_line_quoted_by_several_of_the_rounds_failures_is_blamed_when_the_minibatch_shows_none():
    from memtrace_opt.optimizers.line_blame import most_quoted_line

    lines = instruction_lines(SEED)
    assert most_quoted_line(lines, ["Not mentioned.", "Paris", "not mentioned"]) == 3
    assert most_quoted_line(lines, ["Paris", "Lyon"]) is None
    assert most_quoted_line(lines, ["Not mentioned.", "Paris"], at_least=2) is None
    # the minibatch's outputs quote nothing; the round's failures do: no LM call is needed
    blame = blame_line(silent_lm(), "qa", SEED, [record("Lyon")], round_outputs=["Paris", "Not mentioned."])
    assert blame is not None and blame.how == "quoted by the round" and blame.text == ABSTAIN


def test_the_rounds_line_evidence_is_what_attribution_charged_to_the_component():
    from memtrace_opt.attribution.blame import BlameSignal
    from memtrace_opt.loop.artifacts import blame_summary
    from memtrace_opt.loop.blaming import RoundBlame
    from memtrace_opt.loop.driver import _failure_outputs
    from memtrace_opt.optimizers.cases import CaseTrace, QACase

    def trace(qa_id, prediction):
        return CaseTrace(QACase("c", qa_id), "q?", "gold", prediction, 0.0, "WRONG", graph=None)  # type: ignore[arg-type]

    def signal(qa_id, component, error):
        return BlameSignal(qa_id, "q?", "gold", "x", error, "op", component, "why")

    traces = [trace("q1", "Not mentioned."), trace("q2", "Not mentioned."), trace("q3", "Paris")]
    # q2 abstained because the evidence was cut upstream (no prompt to blame): not the answer prompt's doing
    signals = [signal("q1", QA_PROMPT, "ResponseError"), signal("q2", None, "UpdateError"),
               signal("q3", QA_PROMPT, "ResponseError")]
    attributed = RoundBlame({s.case_id: s for s in signals}, blame_summary(signals), [QA_PROMPT], 3)
    spread = RoundBlame({s.case_id: s for s in signals}, blame_summary(signals, [QA_PROMPT]), [QA_PROMPT], 3)
    assert sorted(_failure_outputs(traces, attributed)[QA_PROMPT]) == ["Not mentioned.", "Paris"]
    assert sorted(_failure_outputs(traces, spread)[QA_PROMPT]) == ["Not mentioned.", "Not mentioned.", "Paris"]
