"""CachedLM: hits, what the key depends on, what is never cached, thread safety, persistence."""

from __future__ import annotations

import threading

import pytest

from memtrace_opt.errors import LMError
from memtrace_opt.lm.cache import CachedLM, cache_key
from tests.lm_helpers import CountingLM, user


@pytest.fixture
def db(tmp_path):
    return tmp_path / "cache" / "lm.sqlite"


def test_repeated_call_is_a_hit_with_recorded_text_and_tokens(db):
    inner = CountingLM()
    lm = CachedLM(inner, db)
    first = lm.chat(user("hello"), max_tokens=20)
    second = lm.chat(user("hello"), max_tokens=20)
    assert len(inner.calls) == 1
    assert not first.cached and second.cached
    assert second.latency_s == 0.0
    assert (second.text, second.prompt_tokens, second.completion_tokens, second.model) == (
        first.text, first.prompt_tokens, first.completion_tokens, first.model)


def test_cache_survives_reopening_the_file(db):
    CachedLM(CountingLM(), db).chat(user("hello"))
    inner = CountingLM()
    again = CachedLM(inner, db).chat(user("hello"))
    assert again.cached and inner.calls == []


BASE = {"max_tokens": 64, "temperature": 0.0, "json_schema": None, "stop": None}


@pytest.mark.parametrize(
    "change",
    [
        {"model_id": "other/model"},
        {"messages": user("bye")},
        {"messages": [{"role": "system", "content": "hello"}]},
        {"temperature": 0.7},
        {"max_tokens": 65},
        {"json_schema": {"type": "object"}},
        {"stop": ["\n"]},
    ],
)
def test_key_depends_on_everything_that_determines_the_answer(change):
    args = {"model_id": "fake/a", "messages": user("hello"), **BASE}
    changed = {**args, **change}
    key = cache_key(args.pop("model_id"), args.pop("messages"), **args)
    assert key != cache_key(changed.pop("model_id"), changed.pop("messages"), **changed)


def test_key_is_canonical():
    a = cache_key("m", [{"role": "user", "content": "x"}], max_tokens=1, temperature=0, json_schema={"a": 1, "b": 2}, stop=None)
    b = cache_key("m", [{"content": "x", "role": "user"}], max_tokens=1, temperature=0.0, json_schema={"b": 2, "a": 1}, stop=[])
    assert a == b


def test_model_id_is_part_of_the_key(db):
    a, b = CountingLM("fake/a"), CountingLM("fake/b")
    CachedLM(a, db).chat(user("hello"))
    result = CachedLM(b, db).chat(user("hello"))
    assert not result.cached and len(b.calls) == 1


def test_sampled_calls_are_not_cached_by_default(db):
    inner = CountingLM()
    lm = CachedLM(inner, db)
    lm.chat(user("hello"), temperature=0.8)
    assert not lm.chat(user("hello"), temperature=0.8).cached
    assert len(inner.calls) == 2 and len(lm) == 0


def test_sampled_calls_are_cached_when_asked(db):
    inner = CountingLM()
    lm = CachedLM(inner, db, cache_sampled=True)
    lm.chat(user("hello"), temperature=0.8)
    assert lm.chat(user("hello"), temperature=0.8).cached and len(inner.calls) == 1


def test_failed_call_is_never_cached(db):
    lm = CachedLM(CountingLM(fail=True), db)
    with pytest.raises(LMError):
        lm.chat(user("hello"))
    assert len(lm) == 0
    ok = CountingLM()
    assert not CachedLM(ok, db).chat(user("hello")).cached


def test_replay_only_fails_on_an_unrecorded_call(db):
    CachedLM(CountingLM(), db).chat(user("seen"))
    inner = CountingLM()
    lm = CachedLM(inner, db, replay_only=True)
    assert lm.chat(user("seen")).cached
    with pytest.raises(LMError, match="no recorded answer"):
        lm.chat(user("unseen"))
    assert inner.calls == []


def test_many_threads_same_key_call_the_model_once(db):
    inner = CountingLM(delay_s=0.05)
    lm = CachedLM(inner, db)
    results, errors = [], []

    def work():
        try:
            results.append(lm.chat(user("same")))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(inner.calls) == 1
    assert {r.text for r in results} == {"echo:same"}
    assert sum(not r.cached for r in results) == 1


def test_many_threads_different_keys(db):
    inner = CountingLM()
    lm = CachedLM(inner, db)
    threads = [threading.Thread(target=lambda i=i: [lm.chat(user(f"q{i % 10}")) for _ in range(5)]) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(inner.calls) == 10 and len(lm) == 10


@pytest.mark.parametrize("content", [b"garbage, not sqlite" * 100, b"SQLite format 3\x00" + b"\x00" * 50, "schema"])
def test_a_corrupt_cache_is_moved_aside_with_a_warning_and_rebuilt(tmp_path, capsys, content):
    import sqlite3

    from memtrace_opt.lm.base import LMResult
    from memtrace_opt.lm.cache import CachedLM

    path = tmp_path / "lm_cache.sqlite"
    if content == "schema":
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE lm_cache (key TEXT, other TEXT)")
        db.commit()
        db.close()
    else:
        path.write_bytes(content)

    class Echo:
        model_id = "echo"

        def chat(self, messages, **kw):
            return LMResult(text="hi", model="echo")

    cached = CachedLM(Echo(), path)
    assert cached.chat([{"role": "user", "content": "x"}]).text == "hi"
    assert cached.chat([{"role": "user", "content": "x"}]).cached
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is unreadable" in err and "moved aside" in err
    assert len(list(tmp_path.glob("lm_cache.sqlite.corrupt-*"))) == 1
