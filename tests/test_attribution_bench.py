"""Benchmark metrics on hand-made predictions, the constant baseline's exact share, LLM baselines with
scripted LMs (robust parsing, failed attributions as data), blame aggregation, and the export."""

from __future__ import annotations

from dataclasses import replace

import json

import pytest

from memtrace_opt.attribution.aggregate import aggregate
from memtrace_opt.attribution.baselines import BASELINES, Constant, make_baseline, match_op, normalise_type
from memtrace_opt.bench.attribution import BenchCase, bench_payload, export_bench, label_real_failures, run_methods, score
from memtrace_opt.bench.cases import CaseBuilder
from memtrace_opt.attribution.blame import AttributionCost, BlameSignal
from memtrace_opt.attribution.failures import FailureCase, collect_failures
from memtrace_opt.graph import MemoryGraph
from memtrace_opt.graph.io_json import load_json
from memtrace_opt.lm.base import LMResult
from tests.test_attribution_system import ScriptLM, record_tt, rerun_tt


def case(i: int) -> FailureCase:
    return FailureCase(f"q{i}", "question?", "gold", "wrong", 0, conversation="c")


def bench_case(i: int, error_type: str, op_id: str | None, system: str = "rag") -> BenchCase:
    return BenchCase(system, error_type, op_id, case(i), MemoryGraph(), "injected")


def blame(i: int, error_type: str | None, op_id: str | None, calls: int = 0, component: str | None = None) -> BlameSignal:
    return BlameSignal(f"c/q{i}", "question?", "gold", "wrong", error_type, op_id, component, "why",
                       cost=AttributionCost(llm_calls=calls, prompt_tokens=10 * calls, completion_tokens=calls))


TRUTH = [bench_case(0, "ExtractionError", "a"), bench_case(1, "RetrievalError", "b"),
         bench_case(2, "ResponseError", "c", "mem0"), bench_case(3, "ResponseError", "d", "mem0")]


def test_score_counts_type_and_op_hits_and_cost():
    preds = [blame(0, "ExtractionError", "a", 2), blame(1, "RetrievalError", "x", 2),
             blame(2, "UpdateError", "c", 0), blame(3, None, None, 4)]
    s = score(list(zip(TRUTH, preds)))
    assert s["n"] == 4 and s["type_accuracy"] == 0.5 and s["op_accuracy"] == 0.5 and s["joint_accuracy"] == 0.25
    assert s["failed"] == 1 and s["llm_calls_per_case"] == 2.0 and s["tokens_per_case"] == 22.0


def test_always_response_scores_exactly_the_share_of_response_errors():
    results = run_methods(TRUTH, {"always": Constant()})
    payload = bench_payload(results)
    [row] = payload["rows"]
    assert row["type_accuracy"] == 2 / 4
    assert row["by_type"]["ResponseError"]["type_accuracy"] == 1.0
    assert row["by_type"]["ExtractionError"]["type_accuracy"] == 0.0
    assert row["by_system"]["mem0"]["type_accuracy"] == 1.0 and row["by_system"]["rag"]["type_accuracy"] == 0.0
    assert payload["case_counts"] == {"rag": {"ExtractionError": 1, "RetrievalError": 1},
                                      "mem0": {"ResponseError": 2}}


def test_a_crashing_method_is_a_recorded_failed_attribution():
    class Broken:
        name = "broken"

        def attribute(self, graph, case):
            raise KeyError("boom")

    [(_, signal)] = run_methods(TRUTH[:1], {"broken": Broken()})["broken"]
    assert signal.error_type is None and "KeyError" in signal.reason


# -- LLM baselines on the tt system -----------------------------------------------------------------
class Oracle:
    """A scripted attribution LM that knows the answer: the deletion decision of the tt run."""

    model_id = "scripted/oracle"
    target = "ingest:s3/tt.decide#1"

    def __init__(self, garbage: bool = False):
        self.garbage, self.calls = garbage, 0

    def chat(self, messages, **kw):
        self.calls += 1
        prompt = messages[-1]["content"]
        assert kw["json_schema"]["type"] == "object" and kw["temperature"] == 0.0
        if self.garbage:
            return LMResult("I am not sure.", self.model_id, 10, 3)
        if "first half" in prompt:
            first = prompt.split("Second half:")[0]
            return LMResult(json.dumps({"reason": "r", "first_half": self.target in first}), self.model_id, 10, 3)
        if "Current operation:" in prompt:
            current = prompt.split("Current operation:")[1]
            hit = self.target in current.split("\n")[1]
            return LMResult(json.dumps({"reason": "r", "decisive": hit, "error_type": "DeletionError"}), self.model_id, 10, 3)
        return LMResult('```json\n{"reason": "r", "op_id": "ingest:s3/tt.decide#1", "error_type": "deletion error"}\n```',
                        self.model_id, 10, 3)


@pytest.fixture(scope="module")
def deletion():
    graph, _ = record_tt()
    return graph, collect_failures(graph)[0]


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_baselines_find_the_op_an_oracle_lm_points_at(deletion, name):
    graph, fail = deletion
    lm = Oracle()
    signal = make_baseline(name, lm, embed=None).attribute(graph, fail)
    assert (signal.error_type, signal.op_id) == ("DeletionError", Oracle.target), signal.reason
    assert signal.prompt_component == "update" and signal.method == name
    assert signal.cost.llm_calls == lm.calls >= 1


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_unparsable_replies_are_failed_attributions(deletion, name):
    graph, fail = deletion
    signal = make_baseline(name, Oracle(garbage=True), embed=None).attribute(graph, fail)
    assert signal.error_type is None and signal.confidence == 0.0


def test_binary_search_takes_logarithmically_many_calls(deletion):
    graph, fail = deletion
    lm = Oracle()
    make_baseline("binary_search", lm, embed=None).attribute(graph, fail)
    assert lm.calls <= 7  # ~22 ops: 5 halvings + 1 type question


def test_loose_labels_and_op_ids_are_normalised(deletion):
    graph, _ = deletion
    assert normalise_type("retrieval error") == "RetrievalError" and normalise_type("Extraction") == "ExtractionError"
    assert normalise_type("??") is None and normalise_type("") is None
    assert match_op("tt.delete#0", graph) == "ingest:s3/tt.delete#0"
    assert match_op("op ingest:s3/tt.delete#0.", graph) == "ingest:s3/tt.delete#0"
    assert match_op("tt.decide#1", graph) is None  # three sessions have one
    assert match_op("x", graph) is None and match_op("extract", graph) is None  # no guessing from fragments
    op = graph.ops["ingest:s3/tt.delete#0"]
    assert match_op(str(op.time), graph) == op.id and match_op(f"[{op.time}]", graph) == op.id  # the log's stamp
    assert match_op(str(op.time), graph, candidates=["ingest:s1/tt.extract#0"]) is None  # not among the shown ops
    assert match_op("999999", graph) is None


# -- aggregate, real-failure labels, export --------------------------------------------------------
def test_aggregate_groups_by_prompt_component(deletion):
    graph, _ = deletion
    signals = [blame(0, "ExtractionError", "ingest:s1/tt.extract#0", component="extract"),
               blame(1, "ExtractionError", "ingest:s1/tt.extract#1", component="extract"),
               blame(2, "UpdateError", "ingest:s3/tt.decide#1", component="update"),
               blame(3, "RetrievalError", "answer:q4/tt.retrieve#0"),
               blame(4, None, None)]
    agg = aggregate(signals, {"c/q0": graph, "c/q3": graph})
    assert agg["total"] == 5 and list(agg["components"]) == ["extract", "update"]
    ext = agg["components"]["extract"]
    assert ext["count"] == 2 and ext["error_types"] == {"ExtractionError": 2} and ext["case_ids"] == ["c/q0", "c/q1"]
    assert ext["reasons"] == ["why"] and ext["op_subgraphs"][0]["op_id"] == "ingest:s1/tt.extract#0"
    assert agg["unoptimizable"]["count"] == 1 and agg["unoptimizable"]["error_types"] == {"RetrievalError": 1}
    assert agg["unoptimizable"]["op_subgraphs"][0]["category"] == "retrieval"
    assert agg["unattributed"]["count"] == 1


def test_real_failures_are_labelled_only_when_unambiguous(deletion):
    graph, fail = deletion
    labelled, skipped = label_real_failures(graph, [fail, replace(fail, evidence=())], system="mem0")
    assert [(c.error_type, c.op_id, c.source) for c in labelled] == [("DeletionError", "ingest:s3/tt.decide#1", "lineage")]
    assert list(skipped.values()) == ["no annotated evidence"]
    flagged, _ = label_real_failures(graph, [replace(fail, flags=frozenset({"audit_wrong_gold"}))], system="mem0")
    assert flagged[0].error_type == "AnnotationError" and flagged[0].source == "audit"


def test_case_builder_and_export_write_annotated_graphs(tmp_path):
    graph, _ = record_tt()
    lms = {"task": ScriptLM(), "judge": ScriptLM()}
    builder = CaseBuilder(per_type=1)
    builder.add_run(graph, [], rerun_tt(), lms, system="mem0")
    kinds = sorted((c.source, c.error_type) for c in builder.cases)
    assert kinds == [("injected", t) for t in sorted(["DeletionError", "ExtractionError", "ResponseError",
                                                       "RetrievalError", "UpdateError"])] + [("lineage", "DeletionError")]
    assert builder.full(["mem0"])
    paths = export_bench(builder.cases, tmp_path / "bench")
    assert len(paths) == 6 and all(p.parent.name == "mem0" for p in paths)
    real = load_json(next(p for p in paths if "__run__" in p.name))
    [ann] = real.meta["annotations"]
    assert ann["query_id"] == "q4" and ann["final_error_type"] == "DeletionError" and ann["golden_answers"] == ["pottery"]
    assert ann["source_evidence_ids"] == ["D3:1"] and ann["final_op_id"] == "ingest:s3/tt.decide#1"
    assert "annotations" not in graph.meta  # the recorded graph is not edited
