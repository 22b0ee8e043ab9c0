"""The report's small parts: escaping, number formats, charts, diffs, round scores and benchmark shapes."""

from __future__ import annotations

import json
from pathlib import Path

from memtrace_opt.report.bench import bench_section, read_bench
from memtrace_opt.report.charts import ci_bar, line_chart, stacked_bars
from memtrace_opt.report.diff import diff_html, diff_stats
from memtrace_opt.report.escape import clip, esc, json_blob, plain
from memtrace_opt.report.fmt import count, duration, pct
from memtrace_opt.report.rounds import RoundPoint, read_rounds
from memtrace_opt.report.sections import op_name
from memtrace_opt.report.theme import ERROR_COLORS, error_color, error_order, short_error
from tests.test_report_support import IMG, SCRIPT, bench_payload


def test_escape_text_and_attributes() -> None:
    assert esc(SCRIPT) == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert esc(IMG) == "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"
    assert esc("it's") == "it&#x27;s"
    assert esc(None) == "" and esc({"a": "<b>"}) == '{&quot;a&quot;: &quot;&lt;b&gt;&quot;}'
    assert plain("a\x00b\x1bc") == "a\ufffdb\ufffdc"  # control characters never reach the SVG
    assert clip("a  b\n c", 4) == "a b…"


def test_json_blob_is_inert() -> None:
    blob = json_blob("d", {"x": "</script><!-- & \u2028"})
    body = blob[len('<script type="application/json" id="d">'):-len("</script>")]
    assert "<" not in body and ">" not in body and "&" not in body
    assert json.loads(body) == {"x": "</script><!-- & \u2028"}


def test_formats() -> None:
    assert pct(0.6123) == "61.2%" and pct(None) == "–"
    assert count(12345) == "12,345" and count(2_500_000) == "2.5M"
    assert duration(42) == "42 s" and duration(200) == "3.3 min" and duration(7300) == "2 h 01 min"


def test_theme_is_consistent() -> None:
    assert error_color("UpdateError") == ERROR_COLORS["UpdateError"] and error_color("<x>").startswith("#")
    assert error_order(["ResponseError", "Weird", "ExtractionError"]) == ["ExtractionError", "ResponseError", "Weird"]
    assert short_error("DeletionError") == "Deletion" and short_error(None) == "unattributed"
    assert op_name("answer:conv/q1/qa.answer#0") == "qa.answer" and op_name(None) == "(no operation)"


def test_stacked_bars_escape_labels_and_colour_by_type() -> None:
    svg = stacked_bars([(SCRIPT, {"UpdateError": 2, "ExtractionError": 1})], ["ExtractionError", "UpdateError"])
    assert SCRIPT not in svg and "&lt;script&gt;" in svg
    assert svg.index(ERROR_COLORS["ExtractionError"]) < svg.index(ERROR_COLORS["UpdateError"])
    assert svg.count("<rect") == 2 and ">3</text>" in svg


def test_line_chart_one_series_per_method() -> None:
    pts = [RoundPoint("a", 0, 0.4, 0.3, 0.5), RoundPoint("a", 1, 0.6),
           RoundPoint(IMG, 0, 0.4), RoundPoint(IMG, 1, 0.45)]
    svg = line_chart(pts)
    assert svg.count("<polyline") == 2 and svg.count("<circle") == 4 and svg.count('class="ci"') == 1
    assert IMG not in svg and ">seed</text>" in svg and ">round 1</text>" in svg


def test_ci_bar() -> None:
    svg = ci_bar(0.5, 0.25, 0.75, width=100)
    assert 'width="50"' in svg and 'x1="25"' in svg and 'x2="75"' in svg


def test_diff_marks_words_and_escapes() -> None:
    diff = f"--- seed\n+++ new\n@@ -1,2 +1,2 @@\n keep\n-say {SCRIPT} now\n+say {SCRIPT} later\n"
    html = diff_html(diff)
    assert SCRIPT not in html and "<del>now</del>" in html and "<ins>later</ins>" in html
    assert diff_stats(diff) == (1, 1)


def test_rounds_from_generic_shapes(tmp_path: Path) -> None:
    (tmp_path / "checkpoint.json").write_text(json.dumps({"rounds": [
        {"round": 1, "scores": {"a": {"accuracy": 0.5, "accuracy_ci": [0.4, 0.6]}, "b": 0.4}},
        {"accuracy": 0.7, "method": "a", "round": 2}]}))
    (tmp_path / "round_3").mkdir()
    (tmp_path / "round_3" / "scores.json").write_text(json.dumps({"a": 0.8, "b": {"score": 0.5}}))
    (tmp_path / "rounds" / "round_0").mkdir(parents=True)
    (tmp_path / "rounds" / "round_0" / "summary.json").write_text(json.dumps({"accuracy": 0.3, "n": 10}))
    pts = {(p.method, p.round): p for p in read_rounds(tmp_path, default_method="a")}
    assert pts[("a", 1)].low == 0.4 and pts[("b", 1)].accuracy == 0.4 and pts[("a", 2)].accuracy == 0.7
    assert pts[("a", 3)].accuracy == 0.8 and pts[("b", 3)].accuracy == 0.5 and pts[("a", 0)].accuracy == 0.3


def test_rounds_from_the_loop_checkpoint(tmp_path: Path) -> None:
    checkpoint = {"format": "memtrace-loop/1", "plan": {"method": "unattributed"}, "baseline_val": 0.2,
                  "rounds": [{"index": 1, "val_score": 0.3, "candidate": {}}]}
    (tmp_path / "checkpoint.json").write_text(json.dumps(checkpoint))
    (tmp_path / "rounds" / "round_2").mkdir(parents=True)
    (tmp_path / "rounds" / "round_2" / "scores.json").write_text(json.dumps({"train": {"q": 0.0},
                                                                             "validation": {"q1": 1.0, "q2": 0.0}}))
    pts = [(p.method, p.round, p.accuracy) for p in read_rounds(tmp_path)]
    assert pts == [("unattributed", 0, 0.2), ("unattributed", 1, 0.3), ("unattributed", 2, 0.5)]


def test_bench_rows_per_method_and_system() -> None:
    bench = read_bench([bench_payload()])
    systems = {(r["method"], r["system"]) for r in bench.rows}
    assert ("tracing", "rag") in systems and ("flat_log", "mem0") in systems and ("tracing", "all systems") in systems
    assert {r["system"] for r in bench.by_type} == {"RetrievalError", "UpdateError"}
    html = bench_section(bench)
    assert "<td class='n best'>80.0%</td>" in html and "<svg class=\"chart bars\"" in html
    flat = read_bench([[{"method": "m", "system": "s", "op_accuracy": 0.5}]])
    assert flat.rows == [{"method": "m", "system": "s", "op_accuracy": 0.5}]
    assert not read_bench([None, {"nothing": 1}])
