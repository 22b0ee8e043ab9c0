"""as_dspy_lm: DSPy programs run on an LMClient through DSPy 3.4's custom-engine API."""

from __future__ import annotations

import dspy
import pytest
from dspy.lm15 import Config, Message, Request

from memtrace_opt.lm.base import LMResult
from memtrace_opt.lm.dspy_bridge import as_dspy_lm, request_to_chat


class AnswerLM:
    """Answers in the format the adapter asked for; records what it was sent."""

    model_id = "fake/answer"

    def __init__(self) -> None:
        self.calls = []

    def chat(self, messages, *, max_tokens=512, temperature=0.0, json_schema=None, stop=None):
        self.calls.append({"messages": messages, "max_tokens": max_tokens, "json_schema": json_schema})
        text = '{"answer": "Paris"}' if json_schema else "[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]"
        return LMResult(text=text, model=self.model_id, prompt_tokens=12, completion_tokens=4)


def test_predict_runs_through_the_client_with_usage():
    client = AnswerLM()
    lm = as_dspy_lm(client)
    with dspy.context(lm=lm, track_usage=True):
        pred = dspy.Predict("question -> answer")(question="What is the capital of France?")
    assert pred.answer == "Paris"
    assert client.calls[0]["messages"][0]["role"] == "system"
    assert "capital of France" in client.calls[0]["messages"][-1]["content"]
    usage = next(iter(pred.get_lm_usage().values()))
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (12, 4)


def test_json_adapter_sends_a_schema():
    client = AnswerLM()
    with dspy.context(lm=as_dspy_lm(client), adapter=dspy.JSONAdapter()):
        pred = dspy.Predict("question -> answer")(question="Capital of France?")
    assert pred.answer == "Paris"
    assert "answer" in client.calls[0]["json_schema"]["properties"]


def test_dspy_cache_is_off_and_names_are_unique():
    client = AnswerLM()
    a, b = as_dspy_lm(client), as_dspy_lm(client)
    assert a.model != b.model and a.model.startswith("local/fake-answer")
    assert a.cache is False
    with dspy.context(lm=a):
        dspy.Predict("question -> answer")(question="q")
        dspy.Predict("question -> answer")(question="q")
    assert len(client.calls) == 2  # repeated calls reach the client (its own CachedLM decides)


def test_request_mapping_keeps_only_what_was_set():
    req = Request(model="x", system="sys", messages=(Message.user("hi"),),
                  config=Config(max_tokens=30, stop=("END",), response_format={"type": "json_object"}))
    messages, options = request_to_chat(req)
    assert messages == [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]
    assert options == {"max_tokens": 30, "stop": ["END"], "json_schema": {"type": "object"}}


@pytest.mark.parametrize("reason,expected", [("stop", "stop"), ("length", "length"), ("weird", "stop")])
def test_finish_reason_is_mapped(reason, expected):
    from memtrace_opt.lm.dspy_bridge import result_to_response

    resp = result_to_response(LMResult(text="t", model="m", finish_reason=reason), "m")
    assert resp.finish_reason == expected and resp.text == "t"
