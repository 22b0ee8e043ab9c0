"""EmbeddedLlama request/response mapping against a fake xllamacpp server (no model loaded)."""

from __future__ import annotations

import threading

import pytest

from memtrace_opt.errors import LMError
from memtrace_opt.lm.embedded import EmbeddedLlama
from tests.lm_helpers import user


class FakeServer:
    def __init__(self, reply):
        self.reply = reply
        self.requests = []

    def handle_chat_completions(self, request):
        self.requests.append(request)
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


def client(reply) -> EmbeddedLlama:
    lm = EmbeddedLlama.__new__(EmbeddedLlama)  # skip loading: only the mapping is under test
    lm.tier, lm.n_ctx, lm.threads, lm.model_id = "qwen-1.5b", 4096, 2, "embedded/qwen-1.5b@cc324af070c2"
    lm.speculative = "none"
    lm._call_lock = threading.Lock()
    lm._server = FakeServer(reply)
    lm.draft_log, lm.timing_log = [], []
    return lm


OK = {
    "choices": [{"finish_reason": "length", "message": {"role": "assistant", "content": '{"a": 1'}}],
    "usage": {"prompt_tokens": 41, "completion_tokens": 2},
}


def test_request_carries_schema_stop_and_sampling():
    lm = client(OK)
    result = lm.chat(user("hi"), max_tokens=2, temperature=0.0, json_schema={"type": "object"}, stop=["\n\n"])
    sent = lm._server.requests[0]
    assert sent["response_format"]["json_schema"]["schema"] == {"type": "object"}
    assert sent["stop"] == ["\n\n"] and sent["max_tokens"] == 2 and sent["temperature"] == 0.0
    assert (result.text, result.finish_reason, result.prompt_tokens, result.completion_tokens) == ('{"a": 1', "length", 41, 2)
    assert result.model == "embedded/qwen-1.5b@cc324af070c2" and not result.cached


def test_server_error_dict_becomes_lm_error():
    lm = client({"error": {"code": 400, "message": "request (830 tokens) exceeds the available context size"}})
    with pytest.raises(LMError, match="exceeds the available context size"):
        lm.chat(user("long"))


def test_rejected_request_becomes_lm_error():
    lm = client(ValueError("Expected 'messages' to be an array"))
    with pytest.raises(LMError, match="rejected"):
        lm.chat(user("x"))


def test_closed_model_refuses_calls():
    lm = client(OK)
    lm.close()
    with pytest.raises(LMError, match="closed"):
        lm.chat(user("x"))
    assert "api" not in repr(lm).lower()


@pytest.mark.parametrize("extra, reused", [
    ({"usage": {"prompt_tokens": 41, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 30}}}, 30),
    ({"timings": {"cache_n": 12, "prompt_n": 29}}, 12),
    ({}, 0),
])
def test_prompt_tokens_reused_from_the_kv_cache_are_reported(extra, reused):
    result = client({**OK, **extra}).chat(user("x"))
    assert result.reused_prompt_tokens == reused and result.to_dict()["reused_prompt_tokens"] == reused


def test_each_call_logs_its_drafts_and_timings_in_order():
    timings = {"draft_n": 16, "draft_n_accepted": 13, "prompt_n": 40, "prompt_ms": 500.0, "predicted_n": 2,
               "predicted_ms": 125.0}
    lm = client({**OK, "timings": timings})
    lm.chat(user("a"))
    lm._server.reply = OK  # no speculation, no timings reported
    lm.chat(user("b"))
    assert lm.draft_log == [(16, 13), (0, 0)]
    assert lm.timing_log == [(40, 0.5, 2, 0.125), (0, 0.0, 0, 0.0)]


def test_draft_speculation_refuses_to_draft_for_the_draft_model_itself():
    import xllamacpp

    from memtrace_opt.lm.embedded import DRAFT_TIER, _speculate
    from memtrace_opt.lm.embedded_model import tier_of

    params = xllamacpp.CommonParams()
    params.model.path = f"/models/{tier_of(DRAFT_TIER).filename}"
    with pytest.raises(LMError, match="cannot speed up qwen-0.5b itself"):
        _speculate(params, "draft")
    with pytest.raises(LMError, match="unknown speculative mode"):
        _speculate(params, "draft+ngram_simple")
