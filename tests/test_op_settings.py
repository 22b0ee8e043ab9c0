"""Each system's ``op_settings`` names its own prompt-less ops and real settings; the hint line reads them."""

from __future__ import annotations

import pytest

from memtrace_opt.attribution.aggregate import aggregate, unoptimizable_line
from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.graph.ops import REGISTRY
from memtrace_opt.systems.registry import get_system, system_names


@pytest.mark.parametrize("name", ["long_context", "rag", "mem0", "evermemos"])
def test_op_settings_name_prompt_less_ops_of_the_system_and_its_settings(name):
    system = get_system(name)
    assert system.op_settings, f"{name} declares no governing settings"
    prefix = {"long_context": "long_context.", "rag": "rag.", "mem0": "mem0.", "evermemos": "evermemos."}[name]
    fields = set(system.settings_model.model_fields)
    for op, settings in system.op_settings.items():
        assert op.startswith(prefix) and op in REGISTRY, op
        assert REGISTRY[op].prompt is None, f"{op} has a prompt: its blame is optimizable"
        assert settings and set(settings) <= fields, (op, settings)
    assert name in system_names()


def _signal(case: str, op_id: str | None, component: str | None, error: str | None = "UpdateError") -> BlameSignal:
    return BlameSignal(case, "q", "g", "p", error, op_id, component, "why")


def test_the_hint_counts_unoptimizable_ops_and_names_their_settings():
    signals = [_signal("c/q1", "s1/long_context.trim#0", None), _signal("c/q2", "s2/long_context.trim#3", None),
               _signal("c/q3", "answer:c/q3/qa.answer#0", "question_answering", "ResponseError"),
               _signal("c/q4", None, None, "AnnotationError"), _signal("c/q5", "x", None, None)]
    agg = aggregate(signals, op_settings=get_system("long_context").op_settings)
    assert agg["unoptimizable"]["ops"] == {"long_context.trim": 2, "(no operation)": 1}
    assert agg["unoptimizable"]["settings"] == {"long_context.trim": ["context_tokens"]}
    line = unoptimizable_line(agg)
    assert line == ("3 failure(s) on steps no prompt controls: long_context.trim 2 (setting context_tokens), "
                    "(no operation) 1 — tune those settings (config `tuning.space`)")


def test_no_hint_without_unoptimizable_blame_or_under_the_ablation():
    answer = _signal("c/q1", "answer:c/q1/qa.answer#0", "question_answering", "ResponseError")
    assert unoptimizable_line(aggregate([answer])) is None
    trim = _signal("c/q2", "s1/long_context.trim#0", None)
    spread = aggregate([trim], spread_over=["question_answering"])  # the ablation charges every component
    assert spread["unoptimizable"]["ops"] == {} and unoptimizable_line(spread) is None
    assert unoptimizable_line({}) is None  # an old blame.json without the group
