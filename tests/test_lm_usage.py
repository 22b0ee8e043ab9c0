"""UsageLedger totals, AccountedLM, and call observers."""

from __future__ import annotations

import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from memtrace_opt.errors import LMError
from memtrace_opt.lm.base import LMResult
from memtrace_opt.lm.cache import CachedLM
from memtrace_opt.lm.observe import observe_calls
from memtrace_opt.lm.usage import AccountedLM, UsageLedger
from tests.lm_helpers import CountingLM, user


def result(model="m/a", p=10, c=5, latency=1.0, cached=False):
    return LMResult(text="x", model=model, prompt_tokens=p, completion_tokens=c, latency_s=latency, cached=cached)


def test_ledger_totals_per_model_and_role():
    ledger = UsageLedger()
    ledger.record(result("m/a", 10, 5, 1.0), "task")
    ledger.record(result("m/a", 20, 1, 2.0), "judge")
    ledger.record(result("m/b", 100, 50, 4.0), "reflection")
    ledger.record(result("m/a", 10, 5, 0.0, cached=True), "task")
    d = ledger.to_dict()
    assert d["total"]["calls"] == 4 and d["total"]["cached_calls"] == 1
    assert d["total"]["prompt_tokens"] == 130 and d["total"]["completion_tokens"] == 56
    assert d["total"]["cached_prompt_tokens"] == 10 and d["total"]["latency_s"] == 7.0
    assert d["by_model"]["m/a"]["calls"] == 3 and d["by_model"]["m/a"]["prompt_tokens"] == 30
    assert d["by_role"]["task"] == {
        "calls": 2, "cached_calls": 1, "failed_calls": 0, "prompt_tokens": 10, "completion_tokens": 5,
        "cached_prompt_tokens": 10, "cached_completion_tokens": 5, "latency_s": 1.0,
    }
    assert set(d["by_role"]) == {"task", "judge", "reflection"}


def test_ledger_is_thread_safe():
    ledger = UsageLedger()
    threads = [threading.Thread(target=lambda: [ledger.record(result(), "task") for _ in range(500)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ledger.to_dict()["total"]["calls"] == 4000
    assert ledger.to_dict()["by_role"]["task"]["prompt_tokens"] == 40000


def test_accounted_lm_records_hits_misses_and_failures(tmp_path):
    ledger = UsageLedger()
    lm = AccountedLM(CachedLM(CountingLM(), tmp_path / "c.sqlite"), ledger, "judge")
    lm.chat(user("a"))
    lm.chat(user("a"))
    failing = AccountedLM(CountingLM(fail=True), ledger, "judge")
    with pytest.raises(LMError):
        failing.chat(user("a"))
    role = ledger.to_dict()["by_role"]["judge"]
    assert (role["calls"], role["cached_calls"], role["failed_calls"]) == (3, 1, 1)
    assert lm.model_id == "fake/counting"


def test_observe_calls_sees_each_call_made_inside():
    lm = AccountedLM(CountingLM(), None, "task")
    lm.chat(user("before"))
    with observe_calls() as outer:
        lm.chat(user("one"))
        with observe_calls() as inner:
            lm.chat(user("two"))
        with observe_calls(exclusive=True) as alone:
            lm.chat(user("three"))
    lm.chat(user("after"))
    assert [r.text for r in outer] == ["echo:one", "echo:two"]
    assert [r.text for r in inner] == ["echo:two"]
    assert [r.text for r in alone] == ["echo:three"]


def test_observer_callback_failure_does_not_break_the_call():
    seen = []

    def bad(r):
        seen.append(r)
        raise RuntimeError("tracer bug")

    lm = AccountedLM(CountingLM(), None, "task")
    with observe_calls(bad) as calls:
        assert lm.chat(user("x")).text == "echo:x"
    assert len(seen) == 1 and len(calls) == 1


def test_observers_are_per_context_and_follow_copied_contexts():
    lm = AccountedLM(CountingLM(), None, "task")
    with observe_calls() as calls:
        with ThreadPoolExecutor(2) as pool:
            pool.submit(lm.chat, user("plain thread")).result()
            ctx = contextvars.copy_context()
            pool.submit(ctx.run, lm.chat, user("copied context")).result()
    assert [r.text for r in calls] == ["echo:copied context"]
