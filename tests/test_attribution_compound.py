"""Compound failures: when fixing the earliest fault does not rescue the answer, counterfactual replay
traces the replayed graph for the fault still standing (the blame's ``chain``); the loop charges the
chain's components too and the demo miner gives both halves of the failure a repair demo."""

from __future__ import annotations

import pytest

from memtrace_opt.attribution.aggregate import aggregate
from memtrace_opt.attribution.blame import BlameSignal, ChainedFault
from memtrace_opt.attribution.counterfactual import CounterfactualAttributor, merge_overrides
from memtrace_opt.attribution.failures import collect_cases
from memtrace_opt.bench.inject import Injection, inject_case, plan_injections
from memtrace_opt.attribution.tracing import TracingAttributor
from memtrace_opt.graph import Overrides
from memtrace_opt.loop.blaming import round_blame
from memtrace_opt.optimizers.cases import CaseTrace, QACase
from memtrace_opt.optimizers.demos import mine_repair_demos
from tests.test_attribution_system import ScriptLM, record_tt, rerun_tt


def lms():
    return {"task": ScriptLM(), "judge": ScriptLM()}


@pytest.fixture(scope="module")
def plans():
    """The recorded run, question q1's case and its single-fault injections by type."""
    recorded = record_tt()[0]
    case = next(c for c in collect_cases(recorded) if c.qa_id == "q1")
    planned, _ = plan_injections(recorded, case)
    return recorded, case, {inj.error_type: inj for inj in planned}


def compound(plans, *types):
    """The case made by injecting every fault of ``types`` at once (the first names the start op)."""
    recorded, case, by_type = plans
    overrides = Overrides()
    for t in types:
        overrides = merge_overrides(overrides, by_type[t].overrides)
    inj = Injection(types[0], by_type[types[0]].op_id, overrides, "+".join(types))
    made = inject_case(recorded, case, inj, rerun_tt(), lms())
    assert not isinstance(made, str), made
    return inj, made


def attributor(base, **kw):
    return CounterfactualAttributor(TracingAttributor(embed=None), rerun_tt(), lms(), base=base, **kw)


@pytest.mark.parametrize("first", ["RetrievalError", "UpdateError", "DeletionError"])
def test_a_fix_that_leaves_a_broken_answer_op_names_it_as_the_next_link(plans, first):
    inj, made = compound(plans, first, "ResponseError")
    answer_op = plans[2]["ResponseError"].op_id
    blame = attributor(inj.overrides).attribute(made.graph, made.case)
    # the earliest decisive fault is unchanged, and so is its verdict: its fix alone does not rescue
    assert (blame.error_type, blame.op_id, blame.counterfactual_rescued) == (first, inj.op_id, False)
    assert [(link.error_type, link.op_id, link.prompt_component, link.rescued) for link in blame.chain] == [
        ("ResponseError", answer_op, "question_answering", None)]  # no fix short of the gold answer
    assert blame.chained_components == ("question_answering",)
    assert f"compound: ResponseError@{answer_op}" in blame.reason
    assert blame.cost.replays == 1  # tracing the replayed graph costs no replay


@pytest.mark.parametrize("first", ["UpdateError", "DeletionError"])
def test_a_second_fault_whose_fix_rescues_is_a_rescuing_link(plans, first):
    inj, made = compound(plans, first, "RetrievalError")
    retrieval_op = plans[2]["RetrievalError"].op_id
    blame = attributor(inj.overrides).attribute(made.graph, made.case)
    assert (blame.error_type, blame.op_id, blame.counterfactual_rescued) == (first, inj.op_id, False)
    assert [(link.error_type, link.op_id, link.rescued) for link in blame.chain] == [
        ("RetrievalError", retrieval_op, True)]
    assert blame.chained_components == ()  # retrieval has no prompt: nothing more for the optimizer
    assert blame.cost.replays == 2  # the first fix, then both fixes together


def test_a_single_fault_and_a_disabled_chain_give_no_chain(plans):
    recorded, case, by_type = plans
    single = by_type["ExtractionError"]
    made = inject_case(recorded, case, single, rerun_tt(), lms())
    assert attributor(single.overrides).attribute(made.graph, made.case).chain == ()
    inj, both = compound(plans, "ExtractionError", "ResponseError")
    assert attributor(inj.overrides, max_chain=0).attribute(both.graph, both.case).chain == ()


def _signal(case_id, component, chain=()):
    return BlameSignal(case_id, "q", "g", "p", "ExtractionError", "op#1", component, "lost", chain=chain)


def test_chain_round_trips_and_is_counted_apart_in_the_aggregate():
    link = ChainedFault("ResponseError", "answer:q1/qa#0", "question_answering", "misread", None)
    signals = [_signal("c/q1", "extract", (link,)), _signal("c/q2", "extract")]
    assert BlameSignal.from_dict(signals[0].to_dict()) == signals[0]
    assert BlameSignal.from_dict({k: v for k, v in signals[1].to_dict().items() if k != "chain"}) == signals[1]
    agg = aggregate(signals)
    assert (agg["components"]["extract"]["count"], agg["components"]["extract"]["chained"]) == (2, 0)
    qa = agg["components"]["question_answering"]
    assert (qa["count"], qa["chained"], qa["chained_case_ids"]) == (0, 1, ["c/q1"])
    # the ablation spreads every failure itself: no chain counting on top
    assert "chained" not in {k for g in aggregate(signals, spread_over=["x"])["components"].values()
                             for k, v in g.items() if k == "chained" and v}


def test_attributed_round_optimizes_the_chained_component_and_mines_both_repair_demos(plans):
    inj, made = compound(plans, "ExtractionError", "ResponseError")
    blame = attributor(inj.overrides).attribute(made.graph, made.case)
    trace = CaseTrace(QACase("c1", "q1"), made.case.question, made.case.gold, made.case.prediction, 0.0, "WRONG",
                      made.graph)

    def attribute(graph, conversation, qas):
        return {"q1": blame}

    rb = round_blame("attributed", [trace], ["extract", "update", "question_answering"], attribute, {"c1": _Conv()})
    assert rb.components[0] == "extract" and "question_answering" in rb.components
    trace.blame = blame
    pools = mine_repair_demos([trace])
    assert {"extract", "question_answering"} <= set(pools)
    (qa_demo,) = pools["question_answering"]
    context = " ".join(text for _, text in qa_demo.inputs)
    assert "Leeds" in context and qa_demo.output == "Leeds"  # the evidence the fix delivered, then the gold
    # without the chain, an unrescued extraction blame mines nothing: the correction is unverified
    trace.blame = BlameSignal(**{**blame.__dict__, "chain": ()})
    assert mine_repair_demos([trace]) == {}
    # and a single-op ResponseError demo keeps the recorded inputs (no evidence is added to them)
    _, response = compound(plans, "ResponseError")
    trace = CaseTrace(QACase("c1", "q1"), response.case.question, response.case.gold, response.case.prediction, 0.0,
                      "WRONG", response.graph, BlameSignal("c1/q1", "q", "Leeds", "Not mentioned", "ResponseError",
                                                           plans[2]["ResponseError"].op_id, "question_answering", "x"))
    (plain,) = mine_repair_demos([trace])["question_answering"]
    assert plain.inputs != qa_demo.inputs


class _Conv:
    qa: list = []


def test_attribute_table_shows_chained_failures_apart():
    from rich.console import Console

    from memtrace_opt.commands.attribute import summary_table
    from memtrace_opt.rundir import BlameReport

    link = ChainedFault("ResponseError", "answer:q1/qa#0", "question_answering", "misread", None)
    signals = [_signal("c/q1", "extract", (link,)), _signal("c/q2", "extract")]
    report = BlameReport("tracing", True, "annotated", tuple(signals), aggregate(signals))
    console = Console(width=200, record=True)
    console.print(summary_table(report))
    text = console.export_text()
    assert "0 (+1 compound)" in text and "1 compound failure(s)" in text


def test_a_compound_failure_brings_its_chained_component_into_the_step_and_its_records():
    from dataclasses import replace

    from memtrace_opt.graph import MemoryGraph
    from memtrace_opt.optimizers import BlamedSelector
    from memtrace_opt.optimizers.feedback import reflective_records

    link = ChainedFault("ResponseError", "answer:q1/qa#0", "question_answering", "context held it, said 'No'")
    blame = replace(_signal("c/q1", "extract"), chain=(link,))
    t = CaseTrace(QACase("c", "q1"), "Where?", "Leeds", "No", 0.0, "WRONG", MemoryGraph(), blame)
    sel = BlamedSelector(["extract", "update", "question_answering"])
    candidate = {"extract": "a", "update": "b", "question_answering": "c"}
    assert sel(None, [t], [0.0], 0, candidate) == ["extract", "question_answering"]
    (record,) = reflective_records("attributed", [t], "question_answering")
    assert "also at fault" in record["Feedback"] and "said 'No'" in record["Feedback"]
    assert [r["Feedback"].startswith("This step caused") for r in reflective_records("attributed", [t], "extract")] \
        == [True]
    assert reflective_records("attributed", [t], "update") == []
