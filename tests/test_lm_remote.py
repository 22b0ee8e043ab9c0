"""LiteLLMClient: the key is read at call time, passed through, and never kept, shown or cached."""

from __future__ import annotations

import pickle
from types import SimpleNamespace

import pytest

from memtrace_opt.errors import LMError
from memtrace_opt.lm import remote
from memtrace_opt.lm.cache import CachedLM
from memtrace_opt.lm.remote import LiteLLMClient
from memtrace_opt.lm.usage import AccountedLM, UsageLedger
from tests.lm_helpers import user

SECRET = "sk-test-SECRET-0123456789abcdef"


class FakeLiteLLM:
    def __init__(self, fail: bool = False) -> None:
        self.kwargs: list[dict] = []
        self.fail = fail

    def completion(self, **kwargs):
        self.kwargs.append(kwargs)
        if self.fail:
            raise RuntimeError(f"AuthenticationError: Incorrect API key provided: {kwargs.get('api_key')}")
        message = SimpleNamespace(content='{"answer": "ok"}')
        usage = SimpleNamespace(prompt_tokens=11, completion_tokens=4)
        return SimpleNamespace(choices=[SimpleNamespace(message=message, finish_reason="stop")], usage=usage)


@pytest.fixture
def fake(monkeypatch):
    fake = FakeLiteLLM()
    monkeypatch.setattr(remote, "_litellm", lambda: fake)
    monkeypatch.setenv("MEMTRACE_TEST_KEY", SECRET)
    return fake


def make():
    return LiteLLMClient("openai/gpt-4o-mini", api_base="http://localhost:9999/v1", api_key_env="MEMTRACE_TEST_KEY")


def test_call_passes_key_base_schema_and_reports_usage(fake):
    result = make().chat(user("hi"), max_tokens=9, temperature=0.0, json_schema={"type": "object"}, stop=["\n"])
    sent = fake.kwargs[0]
    assert sent["api_key"] == SECRET and sent["api_base"] == "http://localhost:9999/v1"
    assert sent["max_tokens"] == 9 and sent["stop"] == ["\n"]
    assert sent["response_format"]["json_schema"]["schema"] == {"type": "object"}
    assert (result.text, result.prompt_tokens, result.completion_tokens) == ('{"answer": "ok"}', 11, 4)
    assert result.model == "litellm/openai/gpt-4o-mini@http://localhost:9999/v1"


def test_key_never_in_repr_dict_pickle_or_cache_file(fake, tmp_path):
    client = make()
    ledger = UsageLedger()
    lm = AccountedLM(CachedLM(client, tmp_path / "c.sqlite"), ledger, "task")
    lm.chat(user("hi"))
    lm.chat(user("hi"))
    for text in (repr(client), repr(lm), str(vars(client)), str(ledger.to_dict())):
        assert SECRET not in text
    assert SECRET.encode() not in pickle.dumps(client)
    for f in tmp_path.iterdir():
        assert SECRET.encode() not in f.read_bytes()


def test_missing_env_var_names_it(fake, monkeypatch):
    monkeypatch.delenv("MEMTRACE_TEST_KEY")
    with pytest.raises(LMError, match="MEMTRACE_TEST_KEY"):
        make().chat(user("hi"))
    assert fake.kwargs == []


def test_error_messages_are_scrubbed_of_the_key(monkeypatch):
    monkeypatch.setattr(remote, "_litellm", lambda: FakeLiteLLM(fail=True))
    monkeypatch.setenv("MEMTRACE_TEST_KEY", SECRET)
    with pytest.raises(LMError) as info:
        make().chat(user("hi"))
    assert SECRET not in str(info.value) and "***" in str(info.value)
    assert info.value.__cause__ is None


def test_model_without_provider_prefix_is_refused():
    with pytest.raises(LMError, match="provider prefix"):
        LiteLLMClient("gpt-4o-mini")
