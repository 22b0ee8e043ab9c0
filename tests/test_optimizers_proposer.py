"""The reflection step: reading a small model's reply in every shape it comes in, and refusing bad ones."""

from __future__ import annotations

import pytest

from memtrace_opt.lm.base import LMResult
from memtrace_opt.optimizers import ReflectionProposer, extract_instruction, validate_instruction
from memtrace_opt.optimizers.proposer import extract_rules
from tests.test_loop_fixtures import ReflectionLM

OLD = "Extract the facts stated in the message on {date}."
NEW = "Extract every fact stated in the message on {date}, in full sentences."


@pytest.mark.parametrize("reply", [
    f"```\n{NEW}\n```",
    f"Sure! Here it is:\n```text\n{NEW}\n```\nHope this helps.",
    f'{{"new_instruction": "{NEW}"}}',
    f'Answer: {{"new_instruction": "{NEW}"}} done',
    f"New instruction: {NEW}",
    f"**Improved instruction:** {NEW}",
    f'"{NEW}"',
    f"```\n{NEW}",  # the fence is never closed
    f"```\nshort\n```\n```markdown\n{NEW}\n```",  # the longest block wins
])
def test_extract_instruction_reads_every_reply_shape(reply):
    assert extract_instruction(reply) == NEW


@pytest.mark.parametrize("new, problem", [
    ("", "empty"),
    (f"  {OLD}\n", "unchanged"),
    ("Extract facts.", "too short"),
    ("Extract every fact stated in the message, in full sentences please.", "drops placeholders"),
    ("x" * 5000, "too long"),
    ("Improve: <curr_param> with the feedback given here", "echoes"),
])
def test_validate_instruction_rejects(new, problem):
    assert problem in validate_instruction(new, OLD)


def test_validate_instruction_accepts_a_real_rewrite():
    assert validate_instruction(NEW, OLD) is None


@pytest.mark.parametrize("style", ["fenced", "json", "label"])
def test_proposer_rewrites_components_with_records(style):
    lm = ReflectionLM(style=style)
    proposer = ReflectionProposer(lm)
    record = {"Inputs": {"question": "q"}, "Generated Outputs": "a", "Feedback": "wrong"}
    out = proposer({"qa": "Answer briefly from the memories.", "x": "Other prompt text here."},
                   {"qa": [record], "x": []}, ["qa", "x"])
    assert out == {"qa": "Answer briefly from the memories. Always check every memory before answering."}
    assert lm.components == ["qa"]  # no records, no call
    assert proposer.log[0].accepted and proposer.log[0].records == 1


class _FixedLM:
    model_id = "scripted/fixed"

    def __init__(self, text: str, finish: str = "stop") -> None:
        self.text, self.finish = text, finish

    def chat(self, messages, **kw):
        return LMResult(self.text, self.model_id, finish_reason=self.finish)


def test_rejected_or_truncated_replies_leave_the_component_unchanged():
    record = {"Inputs": {}, "Generated Outputs": "", "Feedback": "wrong"}
    for lm, reason in ((_FixedLM("ok"), "too short"), (_FixedLM("```\n" + NEW, finish="length"), "cut off")):
        proposer = ReflectionProposer(lm)
        assert proposer({"c": OLD}, {"c": [record]}, ["c"]) == {}
        assert not proposer.log[0].accepted and reason in proposer.log[0].reason


def test_an_echoed_instruction_falls_back_to_added_rules():
    lm = ReflectionLM(style="echo")
    proposer = ReflectionProposer(lm)
    record = {"Inputs": {"question": "q"}, "Generated Outputs": "a", "Feedback": "wrong"}
    out = proposer({"qa": "Answer briefly from the memories."}, {"qa": [record]}, ["qa"])
    assert out == {"qa": "Answer briefly from the memories.\n- Always check every memory before answering."}
    assert lm.components == ["qa", "qa"]
    assert proposer.log[0].mode == "rules" and "unchanged" in proposer.log[0].reason


def test_extract_rules():
    current = "Answer briefly.\n- Use dates."
    reply = "Rules:\n1. Convert relative dates to absolute ones.\n- Use dates.\n* Prefer the latest memory.\nok"
    assert extract_rules(reply, current) == ["Convert relative dates to absolute ones.", "Prefer the latest memory."]
    assert extract_rules("Always give the full name of places.", current) == ["Always give the full name of places."]
    assert extract_rules("", current) == []
    restated = "- If the context lacks the answer, reply exactly: Not mentioned.\n- Quote names in full."
    assert extract_rules(restated, "- If the memories lack the answer, reply exactly: Not mentioned.") == [
        "Quote names in full."]
