"""Property tests: random traced runs are always valid graphs, survive storage exactly, and replay exactly.

A run is a random plan of steps (new message -> extracted fact -> new unit, unit update, unit
deletion, a read of several live units, a new session) executed through the tracer with ops that
use three prompt components. Every op's output depends on all of its inputs and its prompt, so a
prompt change must re-execute exactly the ops using it and their descendants.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Any

import networkx as nx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtrace_opt.graph import (
    End, MemoryGraph, New, Next, Overrides, Tracer, Variable, load_graph, load_json, operation, replay, save_graph,
    save_json, validate,
)
from memtrace_opt.graph.io_json import dumps, encode_value, loads
from memtrace_opt.graph.queries import descendants
from memtrace_opt.lm.base import LMResult

PROMPTS = {"p_extract": "Extract facts.", "p_revise": "Revise memory.", "p_read": "Answer question."}
LM_OPS = {"prop.extract", "prop.revise", "prop.read"}
SETTINGS = settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


class HashLM:
    """Replies with a hash of (system prompt, user text): any change upstream changes the reply."""

    model_id = "scripted/hash"

    def __init__(self) -> None:
        self.calls = 0

    def chat(self, messages: list[dict[str, str]], **kw: Any) -> LMResult:
        self.calls += 1
        digest = hashlib.sha1("\x00".join(m["content"] for m in messages).encode()).hexdigest()[:10]
        return LMResult(text=f"r{digest}", model=self.model_id, prompt_tokens=5, completion_tokens=1)


def _ask(ctx: Any, text: str) -> str:
    return ctx.chat([{"role": "system", "content": ctx.prompt}, {"role": "user", "content": text}]).text


@operation("prop.extract", category="extraction", prompt="p_extract")
def _extract(ctx, inputs, params):
    return {"fact": _ask(ctx, inputs["message"])}


@operation("prop.store", category="update", memoize=False)
def _store(ctx, inputs, params):
    return {"unit": inputs["fact"]}


@operation("prop.revise", category="update", prompt="p_revise")
def _revise(ctx, inputs, params):
    return {"unit": _ask(ctx, f"{inputs['old']}|{inputs['fact']}")}


@operation("prop.delete", category="deletion", memoize=False)
def _delete(ctx, inputs, params):
    return {"unit": None}


@operation("prop.read", category="question-answering", prompt="p_read")
def _read(ctx, inputs, params):
    return {"answer": _ask(ctx, "|".join(inputs["units"]) + f"|k={params['k']}")}


step = st.one_of(
    st.tuples(st.just("new")), st.tuples(st.just("session")),
    st.tuples(st.just("update"), st.integers(0, 50)), st.tuples(st.just("delete"), st.integers(0, 50)),
    st.tuples(st.just("read"), st.lists(st.integers(0, 50), min_size=1, max_size=4)),
)
plans = st.lists(step, min_size=1, max_size=25)


def run_plan(tracer: Tracer, plan: list[tuple]) -> None:
    """Execute ``plan`` deterministically (control flow depends on the plan only, never on values)."""
    live: list[Variable] = []
    session, n = 0, 0
    ctx = tracer.session("s0", kind="ingest")
    ctx.__enter__()
    try:
        for k, (kind, *args) in enumerate(plan):
            if kind == "session":
                ctx.__exit__(None, None, None)
                session += 1
                ctx = tracer.session(f"s{session}", kind="ingest")
                ctx.__enter__()
            elif kind == "new" or not live:
                msg = tracer.variable(f"message:{k}", f"turn {k}", category="message")
                fact = tracer.call("prop.extract", inputs={"message": msg}, outputs={"fact": New(f"fact:{k}", "facts")})
                live.append(tracer.call("prop.store", inputs={"fact": fact["fact"]},
                                        outputs={"unit": New(f"mem:{n}", "memory-unit")})["unit"])
                n += 1
            elif kind == "update":
                i = args[0] % len(live)
                fact = tracer.variable(f"hint:{k}", f"hint {k}", category="message")
                live[i] = tracer.call("prop.revise", inputs={"old": live[i], "fact": fact}, outputs={"unit": Next(live[i])})["unit"]
            elif kind == "delete":
                victim = live.pop(args[0] % len(live))
                tracer.call("prop.delete", inputs={}, outputs={"unit": End(victim)})
            else:
                picked = list(dict.fromkeys(live[i % len(live)] for i in args[0]))
                tracer.call("prop.read", inputs={"units": picked}, params={"k": len(picked)},
                            outputs={"answer": New(f"answer:{k}", "answer")})
    finally:
        ctx.__exit__(None, None, None)


def record(plan: list[tuple]) -> tuple[MemoryGraph, HashLM]:
    lm = HashLM()
    tracer = Tracer(MemoryGraph({"prompts": PROMPTS, "plan_len": len(plan)}), lm=lm, prompts=PROMPTS)
    run_plan(tracer, plan)
    return tracer.graph, lm


def assert_same(a: MemoryGraph, b: MemoryGraph) -> None:
    assert a.fingerprint() == b.fingerprint()
    assert list(a.variables.values()) == list(b.variables.values())
    assert list(a.ops.values()) == list(b.ops.values())  # incl. lm_calls, memo_key, reused, params
    assert list(a.sessions.values()) == list(b.sessions.values())
    assert a.meta == b.meta and a.producer == b.producer and a.latest == b.latest
    assert set(a.nx.edges) == set(b.nx.edges)


@SETTINGS
@given(plans)
def test_random_runs_give_valid_bipartite_acyclic_graphs(plan):
    g, _ = record(plan)
    validate(g)
    assert nx.is_directed_acyclic_graph(g.nx)
    assert all((a in g.ops) != (b in g.ops) for a, b in g.nx.edges)
    for name, latest in g.latest.items():
        assert all(f"{name}@{v}" in g.variables for v in range(1, latest + 1))


@SETTINGS
@given(plans)
def test_json_and_sqlite_round_trips_are_exact(plan):
    g, _ = record(plan)
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("g.jsonl", "g.jsonl.gz"):
            assert_same(g, load_json(save_json(g, Path(tmp, name))))
        db = Path(tmp, "run.sqlite")
        save_graph(db, "conv", g)
        save_graph(db, "conv", g)  # re-saving replaces
        back = load_graph(db, "conv")
        assert_same(g, back)
    lm = HashLM()  # a loaded graph is as replayable as the recorded one
    assert replay(back, lambda t: run_plan(t, plan), lm=lm).graph.fingerprint() == g.fingerprint() and lm.calls == 0


@SETTINGS
@given(plans)
def test_replay_without_overrides_is_exact_and_free(plan):
    g, _ = record(plan)
    lm = HashLM()
    result = replay(g, lambda t: run_plan(t, plan), lm=lm)
    assert lm.calls == 0
    assert result.graph.fingerprint() == g.fingerprint()
    assert result.changed_answers == {}


@SETTINGS
@given(plans, st.sampled_from(sorted(PROMPTS)))
def test_changed_prompt_reexecutes_exactly_its_users_and_their_descendants(plan, component):
    g, _ = record(plan)
    users = {o.id for o in g.ops.values() if o.prompt and o.prompt.component == component}
    affected = set(users)
    for op_id in users:
        affected |= descendants(g, op_id, kind="operation")
    expected = {o for o in affected if g.ops[o].name in LM_OPS}
    lm = HashLM()
    result = replay(g, lambda t: run_plan(t, plan), overrides=Overrides(prompts={component: "Changed prompt."}), lm=lm)
    executed_lm_ops = {o for o in result.stats.executed if result.graph.ops[o].name in LM_OPS}
    assert executed_lm_ops == expected
    assert lm.calls == len(expected)
    assert {o.id for o in result.graph.ops.values() if o.reused} == {o for o in g.ops if g.ops[o].name in LM_OPS} - expected


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8))
hashable = st.one_of(st.integers(), st.text(max_size=5), st.tuples(st.integers(), st.text(max_size=3)))
values = st.recursive(
    json_leaf | st.binary(max_size=8) | st.sampled_from([float("inf"), float("-inf")]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    | st.tuples(inner, inner) | st.frozensets(hashable, max_size=3) | st.sets(hashable, max_size=3)
    | st.dictionaries(hashable, inner, max_size=3) | st.fixed_dictionaries({"__t__": inner}),
    max_leaves=12,
)


def _typed(v: Any) -> Any:
    """A structure that differs whenever types differ (1 vs 1.0 vs True, list vs tuple)."""
    if isinstance(v, dict):
        return ("dict", sorted(((repr(_typed(k)), _typed(x)) for k, x in v.items()), key=repr))
    if isinstance(v, (set, frozenset)):
        return (type(v).__name__, sorted(repr(_typed(x)) for x in v))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [_typed(x) for x in v])
    return (type(v).__name__, v)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(values)
def test_value_encoding_round_trips_types_exactly(value):
    back = loads(dumps(encode_value(value)))
    assert _typed(back) == _typed(value)
