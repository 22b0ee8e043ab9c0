"""build_lm / build_roles: composition, configured defaults, sharing, and no eager model loading."""

from __future__ import annotations

import pytest

from memtrace_opt.errors import LMError
from memtrace_opt.lm import factory
from memtrace_opt.lm.config import ModelConfig
from memtrace_opt.lm.embedded import LazyEmbedded
from memtrace_opt.lm.observe import observe_calls
from memtrace_opt.lm.remote import LiteLLMClient
from memtrace_opt.lm.usage import UsageLedger
from tests.lm_helpers import CountingLM, user


@pytest.fixture
def fakes(monkeypatch):
    """Replace real model clients with counting fakes, one per distinct model."""
    made: dict[str, CountingLM] = {}

    def build_base(cfg):
        lm = CountingLM(f"fake/{cfg.model}")
        made.setdefault(cfg.model, lm)
        return lm

    monkeypatch.setattr(factory, "build_base", build_base)
    return made


def test_build_lm_caches_accounts_and_applies_config_defaults(fakes, tmp_path):
    ledger = UsageLedger()
    cfg = ModelConfig(model="m1", temperature=0.0, max_tokens=77)
    lm = factory.build_lm(cfg, cache_dir=tmp_path, ledger=ledger, role="judge")
    with observe_calls() as calls:
        lm.chat(user("q"))
        again = lm.chat(user("q"))
    assert again.cached and len(fakes["m1"].calls) == 1
    assert fakes["m1"].calls[0]["max_tokens"] == 77 and fakes["m1"].calls[0]["temperature"] == 0.0
    assert [c.cached for c in calls] == [False, True]
    assert ledger.to_dict()["by_role"]["judge"]["calls"] == 2
    assert (tmp_path / factory.CACHE_FILE).exists()
    lm.chat(user("q"), max_tokens=5)
    assert fakes["m1"].calls[-1]["max_tokens"] == 5


def test_build_lm_without_cache_dir_does_not_cache(fakes):
    lm = factory.build_lm(ModelConfig(model="m1"), cache_dir=None, ledger=None, role="task")
    lm.chat(user("q"))
    assert not lm.chat(user("q")).cached


def test_equal_configs_share_one_client_but_are_accounted_per_role(fakes, tmp_path):
    ledger = UsageLedger()
    task = ModelConfig(model="small")
    judge = ModelConfig(model="small", temperature=0.0, max_tokens=900)  # same model, other defaults
    reflection = ModelConfig(model="big", temperature=1.0)
    roles = factory.build_roles(task, judge, reflection, cache_dir=tmp_path, ledger=ledger,
                                extra={"extract": ModelConfig(model="small")})
    roles.task.chat(user("q"))
    roles.extra["extract"].chat(user("q"))  # same model + same defaults: a cache hit
    roles.judge.chat(user("q"))  # other max_tokens: a miss, same underlying client
    roles.reflection.chat(user("q"))
    assert set(fakes) == {"small", "big"}
    assert len(fakes["small"].calls) == 2 and fakes["small"].calls[1]["max_tokens"] == 900
    assert fakes["big"].calls[0]["temperature"] == 1.0
    by_role = ledger.to_dict()["by_role"]
    assert by_role["extract"]["cached_calls"] == 1 and set(by_role) == {"task", "judge", "reflection", "extract"}


def test_missing_role_configs_default_to_the_task_model(fakes):
    roles = factory.build_roles(ModelConfig(model="only"))
    assert roles.judge.model_id == roles.reflection.model_id == "fake/only"


def test_build_base_embedded_is_lazy_and_litellm_is_built():
    lazy = factory.build_base(ModelConfig(provider="embedded", model="qwen-0.5b", n_ctx=2048))
    assert isinstance(lazy, LazyEmbedded) and lazy.model_id == "embedded/qwen-0.5b@1d9614638d18"
    remote = factory.build_base(ModelConfig(provider="litellm", model="openai/gpt-4o-mini", api_key_env="X"))
    assert isinstance(remote, LiteLLMClient)


def test_unknown_embedded_tier_fails_at_build_time():
    with pytest.raises(LMError, match="unknown embedded model"):
        factory.build_lm(ModelConfig(provider="embedded", model="llama-70b"))
