"""bench-lm's measurements on scripted models: speculation must keep outputs; scoped replay must cost less."""

from __future__ import annotations

from memtrace_opt.bench.lm import measure_scoped_replay, measure_variants
from tests.test_loop_fixtures import PROMPTS, TaskLM, conversations
from tests.test_scoped_replay import SYSTEM, recorded


class DriftingTaskLM(TaskLM):
    """The task LM with one changed habit: extraction upper-cases its fact (a speculation bug would look so)."""

    def chat(self, messages, **kw):
        result = super().chat(messages, **kw)
        if messages[-1]["content"].startswith("Message: "):
            return type(result)(text=result.text.upper(), model=result.model, prompt_tokens=result.prompt_tokens,
                                completion_tokens=result.completion_tokens)
        return result


def test_speculation_rows_compare_every_mode_with_the_first():
    convs = conversations()
    conv = convs[0]
    makers = {"none": lambda: TaskLM(convs), "ngram_mod": lambda: TaskLM(convs), "ngram_simple": lambda: DriftingTaskLM(convs)}
    result = measure_variants(SYSTEM, conv, list(conv.qa), lambda mode: makers[mode](),
                                 ["none", "ngram_mod", "ngram_simple"], turns=4)
    rows = result["modes"]
    assert rows["none"]["identical_outputs"] and rows["ngram_mod"]["identical_outputs"]
    assert not rows["ngram_simple"]["identical_outputs"]
    assert any("looptest.extract" in op for op in rows["ngram_simple"]["differing_ops"])
    assert rows["none"]["ops"]["looptest.extract"]["calls"] == 4
    assert result["graph"].meta["system"] == SYSTEM


def test_scoped_replay_measurement_costs_less_and_agrees_with_full_replay():
    task = TaskLM(conversations())
    _, conv, graph = recorded(task)
    qa = next(q for q in conv.qa if "cat" in q.question)
    changed = {"fact_extraction": PROMPTS["fact_extraction"] + " Keep names."}
    result = measure_scoped_replay(SYSTEM, conv, graph, [qa], changed, task)
    assert result["scoped"]["lm_calls"] < result["full"]["lm_calls"]
    assert result["ratio_lm_calls"] < 0.5 and result["same_answers"] is True
    assert result["scoped"]["kept_out_of_scope"] == 3 and result["full"]["kept_out_of_scope"] == 0


class LoggingTaskLM(TaskLM):
    """The task LM keeping a per-call log as the embedded model does (``draft_log``, ``timing_log``): the entry
    ``extraction`` for fact extraction calls, ``other`` for the rest."""

    def __init__(self, convs, log, extraction, other):
        super().__init__(convs)
        self.log, self.entries = [], (extraction, other)
        setattr(self, log, self.log)

    def chat(self, messages, **kw):
        self.log.append(self.entries[0] if messages[-1]["content"].startswith("Message: ") else self.entries[1])
        return super().chat(messages, **kw)


def test_draft_acceptance_is_read_per_op_kind_and_refused_when_the_log_does_not_line_up():
    from memtrace_opt.bench.lm import add_draft_acceptance

    convs = conversations()
    conv = convs[0]
    result = measure_variants(SYSTEM, conv, list(conv.qa), lambda mode: LoggingTaskLM(convs, "draft_log", (10, 7), (4, 1)), ["draft"], turns=4)
    row = result["modes"]["draft"]
    assert row["draft_log_matched"] is True
    extract = row["ops"]["looptest.extract"]
    assert (extract["drafted_tokens"], extract["accepted_draft_tokens"], extract["draft_acceptance"]) == (40, 28, 0.7)
    assert all(r["draft_acceptance"] == 0.25 for name, r in row["ops"].items() if name != "looptest.extract")
    ops = {name: {} for name in row["ops"]}
    assert add_draft_acceptance(ops, result["graph"], [(1, 1)]) is False and ops == {name: {} for name in ops}


def test_bench_lm_refuses_a_changed_prompt_the_system_does_not_have_before_loading_a_model():
    import pytest

    from memtrace_opt.bench.lm_run import run_bench_lm
    from memtrace_opt.errors import ConfigError

    with pytest.raises(ConfigError, match="memcell_extraction") as info:
        run_bench_lm(system="evermemos", modes=("none",), changed_prompt="question_answering")
    assert "--changed-prompt" in str(info.value)


def test_prefill_decode_split_per_op_kind_bounds_what_faster_decoding_can_gain():
    from memtrace_opt.bench.lm import add_prefill_decode_split

    convs = conversations()
    conv = convs[0]
    result = measure_variants(SYSTEM, conv, list(conv.qa), lambda mode: LoggingTaskLM(convs, "timing_log", (100, 1.0, 30, 3.0), (60, 0.5, 5, 0.5)), ["none"], turns=4)
    row = result["modes"]["none"]
    extract = row["ops"]["looptest.extract"]
    assert (extract["prefill_tokens"], extract["prefill_s"], extract["decode_tokens"], extract["decode_s"]) == \
        (400, 4.0, 120, 12.0)
    assert extract["decode_share"] == 0.75 and extract["decode_free_bound"] == 4.0
    others = [r for name, r in row["ops"].items() if name != "looptest.extract" and "decode_s" in r]
    assert others and all(r["decode_share"] == 0.5 and r["decode_free_bound"] == 2.0 for r in others)
    totals = row["prefill_decode"]
    calls = 4 + sum(r["calls"] for r in others)
    assert totals["prefill_s"] == round(4.0 + 0.5 * (calls - 4), 3) and totals["decode_s"] == round(12.0 + 0.5 * (calls - 4), 3)
    assert totals["prefill_tok_s"] == round((400 + 60 * (calls - 4)) / totals["prefill_s"], 1)
    assert 1 < totals["decode_free_bound"] < 4.0
    ops = {name: {} for name in row["ops"]}
    assert add_prefill_decode_split(ops, result["graph"], [(1, 0.1, 1, 0.1)]) is None
    assert ops == {name: {} for name in ops}


def test_settings_variants_report_speed_and_accuracy_on_the_same_questions():
    from memtrace_opt.bench.lm import Variant
    from tests.test_mem0_system import QAS, SESSIONS, mem0_lm
    from tests.scripted_lm import make_conversation

    conv = make_conversation(SESSIONS, QAS)
    result = measure_variants("mem0", conv, list(conv.qa), lambda mode: mem0_lm(),
                              [Variant("pairs", settings={"turns_per_add": 2}),
                               Variant("session", settings={"turns_per_add": "session"})], turns=8)
    pairs, session = result["modes"]["pairs"], result["modes"]["session"]
    assert pairs["ops"]["mem0.extract_facts"]["calls"] == 4 and session["ops"]["mem0.extract_facts"]["calls"] == 2
    assert session["settings"] == {"turns_per_add": "session"} and result["baseline"] == "pairs"
    assert pairs["extracted_per_turn"] == session["extracted_per_turn"] == 5 / 8  # the same five facts either way
    assert set(session["correct"]) == {qa.id for qa in conv.qa} and session["accuracy"] is not None
    assert not session["identical_outputs"]  # a different graph: accuracy, not identity, is its check
    assert session["failed_ops"] == [] == pairs["failed_ops"]  # a failed op would explain a cheaper run


def test_a_malformed_variant_or_setting_is_refused_naming_it_before_loading_a_model():
    import pytest

    from memtrace_opt.bench.lm_run import parse_variant, run_bench_lm
    from memtrace_opt.errors import ConfigError

    assert parse_variant("s: turns_per_add=session, extract_max_tokens=768").settings == {
        "turns_per_add": "session", "extract_max_tokens": 768}
    with pytest.raises(ConfigError, match="LABEL"):
        parse_variant("turns_per_add=session")
    with pytest.raises(ConfigError, match="--variant bad.*turns_per_add"):
        run_bench_lm(system="mem0", modes=("none",), variants=("bad: turns_per_add=0",))
