"""``memtrace-opt trace show`` on run directories written with the toy system, and ``bench-trace --json``."""

from __future__ import annotations

import json

import pytest

from memtrace_opt.cli import main
from memtrace_opt.graph import MemoryGraph, New, OpFailure, Tracer, operation, save_graph, save_json
from tests.toy_system import PROMPTS, PromptEchoLM, run_toy


@operation("cli.judge", category="llm-judge")
def _judge(ctx, inputs, params):
    raise OpFailure("judge reply was not JSON", fallback={"verdict": {"score": 0, "label": "WRONG"}}, raw="hmm, maybe")


def toy_graph() -> MemoryGraph:
    tracer = Tracer(MemoryGraph({"prompts": PROMPTS}), lm=PromptEchoLM(), prompts=PROMPTS)
    run_toy(tracer, [["alice likes tea", "bob lives in paris"], ["alice likes coffee", "bob moved to rome"]],
            ["what does alice like", "where does bob live"], delete_word="rome")
    with tracer.session("answer:q0", kind="answer"):
        gold = tracer.variable("gold:q0", "coffee", category="gold-answer")
        tracer.call("cli.judge", inputs={"answer": tracer.latest("answer:q0"), "gold": gold},
                    outputs={"verdict": New("judgement:q0", "judgement")})
    return tracer.graph


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    run = tmp_path_factory.mktemp("run")
    save_json(toy_graph(), run / "graphs" / "conv-1.jsonl.gz")
    return run


def test_show_question_slice(run_dir, capsys):
    assert main(["trace", "show", str(run_dir), "--question", "q0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("question q0 (conv-1)")
    assert "gold      'coffee'" in out and "answer    'Answer:Extract:alice likes coffee'" in out
    for expected in ("ingest:s1/toy.extract#0  [extraction · prompt extract]", "← message    message:D1:1@1",
                     "→ unit       mem:1@2", "← _previous  mem:1@1", "answer:q0/toy.retrieve#0  [retrieval]",
                     "answer:q0/toy.answer#0  [question-answering · prompt answer]",
                     "answer:q0/cli.judge#0  [llm-judge]", "✗ FAILED: judge reply was not JSON", "raw reply: 'hmm, maybe'",
                     "1 FAILED: answer:q0/cli.judge#0"):
        assert expected in out, expected
    assert "message:D2:2" not in out  # bob's turns are outside q0's slice
    assert out.index("ingest:s1") < out.index("ingest:s2") < out.index("answer:q0/toy.retrieve")


def test_list_questions(run_dir, capsys):
    assert main(["trace", "show", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "conv-1: 14 ops, 1 failed, 2 questions" in out
    assert "q0  answer='Answer:Extract:alice likes coffee'  judgement={'score': 0, 'label': 'WRONG'}" in out


def test_sqlite_run_dir(tmp_path, capsys):
    save_graph(tmp_path / "graphs.sqlite", "conv-9", toy_graph())
    assert main(["trace", "show", str(tmp_path), "-q", "q1", "-c", "conv-9"]) == 0
    assert "question q1 (conv-9)" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--question", "q0"], "no such run directory"),
    (["--question", "nope"], "question 'nope' is not answered in any conversation"),
    (["--question", "q0", "--conversation", "conv-7"], "no graph for conversation 'conv-7' (have: conv-1)"),
])
def test_user_errors_are_one_line_exit_2(run_dir, tmp_path, capsys, args, message):
    target = tmp_path / "missing" if message == "no such run directory" else run_dir
    assert main(["trace", "show", str(target), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("memtrace-opt: ")


def test_empty_run_dir_is_an_error(tmp_path, capsys):
    assert main(["trace", "show", str(tmp_path)]) == 2
    assert "no graphs/<conversation>.jsonl.gz files and no graphs.sqlite" in capsys.readouterr().err


def test_bench_measurements_small():
    from memtrace_opt.bench.trace import measure_pipeline_overhead, measure_record_overhead, measure_save_load

    rec = measure_record_overhead(calls=200, rounds=1)
    assert 0 < rec["record_overhead_us_median"] < 1000
    pipe = measure_pipeline_overhead(lm_delay_s=0.0005, sessions=1, messages=3, questions=2, rounds=1)
    assert pipe["pipeline_lm_calls"] == 5 and pipe["pipeline_untraced_s"] > 0
    io = measure_save_load(n_ops=300)
    assert set(io) == {"graph_ops", "json", "json_gz", "sqlite"} and io["sqlite"]["load"] > 0


@pytest.mark.slow
def test_bench_trace_cli_prints_one_json_object(capsys):
    assert main(["bench-trace", "--json", "--quick"]) == 0
    out = capsys.readouterr().out.strip()
    result = json.loads(out)
    for key in ("record_overhead_us_median", "pipeline_overhead_pct", "lineage_query_ms_100k", "save_load_ops_per_s",
                "machine", "meets_goals"):
        assert key in result
    assert set(result["save_load_ops_per_s"]) >= {"json", "sqlite"} and result["machine"]["cpu_count"] >= 1


def test_show_puts_evidence_status_and_the_runs_blame_in_the_header(tmp_path, capsys):
    tracer = Tracer(MemoryGraph({"prompts": PROMPTS}), lm=PromptEchoLM(), prompts=PROMPTS)
    run_toy(tracer, [["alice likes tea", "bob lives in paris"], ["alice likes coffee", "bob moved to rome"]],
            ["what does alice like", "where does bob live"], delete_word="rome")
    with tracer.session("answer:q0", kind="answer"):
        gold = tracer.variable("gold:q0", {"answer": "coffee", "evidence": ["D2:1", "D9:9"]}, category="gold-answer")
        tracer.call("cli.judge", inputs={"answer": tracer.latest("answer:q0"), "gold": gold},
                    outputs={"verdict": New("judgement:q0", "judgement")})
    save_json(tracer.graph, tmp_path / "graphs" / "conv-1.jsonl.gz")
    (tmp_path / "blame.json").write_text(json.dumps({"signals": [
        {"case_id": "q0", "error_type": "ResponseError", "op_id": "answer:q0/toy.answer#0", "reason": "the why"}]}))
    assert main(["trace", "show", str(tmp_path), "--question", "q0"]) == 0
    out = capsys.readouterr().out
    assert "evidence  D2:1 (read by the answer op), D9:9 (not in this graph)" in out
    assert "blame     ResponseError at answer:q0/toy.answer#0: the why" in out
    assert main(["trace", "show", str(tmp_path), "--question", "q0", "--full", "--no-blame"]) == 0
    out = capsys.readouterr().out
    assert "…" not in out and "blame " not in out  # --full: values whole; --no-blame: blind labelling
