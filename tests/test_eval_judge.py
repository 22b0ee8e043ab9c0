"""Judges: the LLM judge with a scripted fake LM, and the deterministic judge."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from memtrace_opt.eval.judge import (
    JUDGE_PROMPT,
    JUDGE_SCHEMA,
    DeterministicJudge,
    LLMJudge,
    is_abstention,
    parse_label,
)
from memtrace_opt.lm.base import LMClient, LMResult


@dataclass
class FakeLM:
    """Replies with scripted texts in order and records every call."""

    replies: list[str]
    finish_reason: str = "stop"
    model_id: str = "fake/judge"
    calls: list[dict[str, Any]] = field(default_factory=list)

    def chat(self, messages, *, max_tokens=512, temperature=0.0, json_schema=None, stop=None) -> LMResult:
        self.calls.append({"messages": messages, "max_tokens": max_tokens, "temperature": temperature,
                           "json_schema": json_schema})
        return LMResult(text=self.replies.pop(0), model=self.model_id, finish_reason=self.finish_reason)


def test_fake_is_an_lm_client():
    assert isinstance(FakeLM([]), LMClient)


def test_llm_judge_call_follows_the_protocol():
    lm = FakeLM(['{"label": "CORRECT"}'])
    verdict = LLMJudge(lm).judge("When did Ann move?", "May 2023", "She moved in May 2023.")
    assert (verdict.score, verdict.label, verdict.failed) == (1, "CORRECT", False)
    assert verdict.raw == '{"label": "CORRECT"}' and verdict.lm_result.model == "fake/judge"
    (call,) = lm.calls
    assert call["temperature"] == 0.0 and call["json_schema"] == JUDGE_SCHEMA
    content = call["messages"][0]["content"]
    assert "Question: When did Ann move?" in content
    assert "Gold answer: May 2023" in content and "Generated answer: She moved in May 2023." in content
    assert '{"label": "CORRECT"}' in content, "braces in the template are escaped, not format fields"


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        ('{"label": "WRONG"}', "WRONG"),
        ('{"label": "correct"}', "CORRECT"),
        ('The answer matches the topic.\n```json\n{"label": "CORRECT"}\n```', "CORRECT"),
        ("The answer is about a different trip. WRONG", "WRONG"),
        ("CORRECT", "CORRECT"),
        ("It could be CORRECT or WRONG", None),
        ('{"label": "MAYBE"}', None),
        ("", None),
        ('{"label": ', None),
    ],
)
def test_parse_label_is_tolerant(reply, label):
    assert parse_label(reply) == label


def test_unparsable_reply_is_a_recorded_failure_not_a_crash():
    verdict = LLMJudge(FakeLM(["I think so"])).judge("q", "gold", "pred")
    assert (verdict.score, verdict.label, verdict.failed) == (0, "FAILED", True)
    assert "no CORRECT/WRONG label" in verdict.reason and verdict.raw == "I think so"
    cut = LLMJudge(FakeLM(['{"lab'], finish_reason="length")).judge("q", "gold", "pred")
    assert cut.failed and "max_tokens" in cut.reason


def test_empty_prediction_is_wrong_without_a_call():
    lm = FakeLM([])
    assert LLMJudge(lm).judge("q", "gold", "  ").label == "WRONG" and lm.calls == []


def test_prompt_constant_has_exactly_the_three_fields():
    rendered = JUDGE_PROMPT.format(question="Q1", gold="G1", prediction="P1")
    assert all(x in rendered for x in ("Q1", "G1", "P1"))


@pytest.mark.parametrize(
    ("gold", "prediction", "score"),
    [
        ("Biscuit", "Her cat is called Biscuit.", 1),
        ("The city library", "Lena works at the city library now", 1),
        ("Bristol", "Leeds", 0),
        ("7 May 2023", "May 7th, 2023", 1),
        ("7 May 2023", "On 2023-05-07", 1),
        ("7 May 2023", "May 7", 1),
        ("7 May 2023", "8 May 2023", 0),
        ("May 2023", "7 May 2023", 1),
        ("2022", "It was in 2022", 1),
        ("2022", "2021", 0),
        ("The sunday before 25 May 2023", "21 May 2023", 1),
        ("The sunday before 25 May 2023", "20 May 2023", 0),
        ("The week before 9 June 2023", "June 5, 2023", 1),
        ("The week before 9 June 2023", "June 9, 2023", 0),
        ("Not mentioned in the conversation", "The conversation does not mention it.", 1),
        ("Not mentioned in the conversation", "Arsenal", 0),
        ("Arsenal", "Not mentioned", 0),
        ("hiking and painting", "painting and hiking", 1),
        ("hiking, painting, pottery and swimming", "hiking", 0),
        ("Paris", "", 0),
        ("No, not anymore", "No.", 1),
        ("No, not anymore", "Yes, he still is", 0),
        ("No, not anymore", "He is not vegetarian anymore", 1),
        ("Yes", "Yes, she does", 1),
        ("A nurse", "He works as a nurse at the hospital", 1),
    ],
)
def test_deterministic_judge(gold, prediction, score):
    verdict = DeterministicJudge().judge("question?", gold, prediction)
    assert verdict.score == score, verdict.reason
    assert verdict.label == ("CORRECT" if score else "WRONG") and verdict.lm_result is None


def test_abstention_detection():
    assert is_abstention("No information available")
    assert is_abstention("Unknown.")
    assert is_abstention("It cannot be determined from the conversation")
    assert not is_abstention("An unknown artist painted it")
    assert not is_abstention("She mentioned Paris")


class _AlwaysWrongLM:
    """A judge model that says WRONG to everything, and counts how often it was asked."""

    model_id = "scripted/always-wrong"

    def __init__(self) -> None:
        self.calls = 0

    def chat(self, messages, **kw):
        from memtrace_opt.lm.base import LMResult

        self.calls += 1
        return LMResult(text='{"label": "WRONG"}', model=self.model_id)


def test_hybrid_judge_decides_clear_cases_by_rule_and_asks_the_llm_otherwise():
    from memtrace_opt.eval.judge import HybridJudge, LLMJudge

    lm = _AlwaysWrongLM()
    judge = HybridJudge(LLMJudge(lm))
    assert judge.judge("Cat's name?", "Biscuit", "Biscuit").score == 1
    assert judge.judge("When?", "2 March 2024", "4 March 2024").score == 0
    assert lm.calls == 0
    assert judge.judge("Where does Lena work?", "The city library", "At the municipal book lending centre").score == 0
    assert lm.calls == 1
