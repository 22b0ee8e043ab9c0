"""End to end on the real embedded 1.5B model (slow: loads ~1.1 GB; run with `-m slow`)."""

from __future__ import annotations

import json

import dspy
import pytest

from memtrace_opt.lm.config import ModelConfig
from memtrace_opt.lm.dspy_bridge import as_dspy_lm
from memtrace_opt.lm.embedded import get_embedded
from memtrace_opt.lm.factory import build_lm
from memtrace_opt.lm.usage import UsageLedger

pytestmark = pytest.mark.slow


CFG = ModelConfig(provider="embedded", model="qwen-1.5b", n_ctx=4096, max_tokens=128)


@pytest.fixture(scope="module")
def ledger():
    return UsageLedger()


@pytest.fixture(scope="module")
def lm(tmp_path_factory, ledger):
    return build_lm(CFG, cache_dir=tmp_path_factory.mktemp("lmcache"), ledger=ledger, role="task")


def test_dspy_predict_answers_through_the_embedded_model(lm, ledger):
    with dspy.context(lm=as_dspy_lm(lm)):
        pred = dspy.Predict("question -> answer")(question="What is the capital of France?")
    assert "paris" in pred.answer.lower()
    totals = ledger.to_dict()["total"]
    assert totals["calls"] >= 1 and totals["prompt_tokens"] > 50 and totals["completion_tokens"] > 0


def test_json_schema_constrained_call_parses(lm):
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
        "required": ["city", "country"],
    }
    messages = [{"role": "user", "content": "Name the capital of Italy and its country, as JSON."}]
    result = lm.chat(messages, json_schema=schema)
    data = json.loads(result.text)
    assert set(data) >= {"city", "country"} and "rome" in data["city"].lower()
    assert result.finish_reason == "stop" and result.model == "embedded/qwen-1.5b@cc324af070c2"
    assert lm.chat(messages, json_schema=schema).cached


def test_length_limit_is_reported(lm):
    model = get_embedded("qwen-1.5b", n_ctx=4096)
    logged = len(model.timing_log)
    result = lm.chat([{"role": "user", "content": "Count from 1 to 100, one per line."}], max_tokens=8)
    assert result.finish_reason == "length" and result.completion_tokens == 8
    prompt_n, prompt_s, decoded, decode_s = model.timing_log[logged]  # llama.cpp's own timings of this call
    assert len(model.timing_log) == logged + 1 and decoded == 8 and decode_s > 0
    assert 0 < prompt_n <= result.prompt_tokens and prompt_s > 0


def test_local_listener_requires_the_random_api_key(lm):
    import urllib.error
    import urllib.request

    lm.chat([{"role": "user", "content": "hi"}], max_tokens=2)  # make sure the shared model is loaded
    address = get_embedded(CFG.model, n_ctx=CFG.n_ctx)._server.listening_address
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{address}/v1/models", timeout=5)
    assert info.value.code == 401


def test_ngram_speculation_returns_the_same_text_at_temperature_zero():
    """Speculation is an execution detail: the copy-heavy reply (a memory list re-emitted with events,
    as Mem0's update decision writes) must be the same text with and without it."""
    from memtrace_opt.lm.embedded import EmbeddedLlama

    memories = "\n".join(f'{{"id": "{i}", "text": "User likes hobby number {i} very much"}}' for i in range(8))
    messages = [{"role": "user", "content": f"Memories:\n{memories}\n\nRepeat every memory above as a JSON list, "
                 "adding \"event\": \"NONE\" to each. Reply with the JSON only."}]
    replies = {}
    for mode in ("none", "ngram_mod"):
        model = EmbeddedLlama(CFG.model, n_ctx=CFG.n_ctx, speculative=mode)
        try:
            replies[mode] = [model.chat(messages, max_tokens=400).text for _ in range(2)]
        finally:
            model.close()
    assert replies["none"][0] == replies["ngram_mod"][0] == replies["ngram_mod"][1]
    assert "hobby number 7" in replies["none"][0]
