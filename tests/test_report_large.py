"""A report of a 10k-op graph stays small and structured: capped slices, one graph per failure, "+N more" nodes.

Only size and structure are asserted here; ``benchmarks/bench_report.py`` times it.
"""

from __future__ import annotations

import re

import pytest

from memtrace_opt.report import render_report
from tests.test_report_support import build_synthetic_run

N_QUESTIONS = 20


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = build_synthetic_run(tmp_path_factory.mktemp("big") / "run", n_messages=5000, n_questions=N_QUESTIONS)
    return render_report(root, max_nodes=30).read_text(encoding="utf-8")


def test_graph_has_10k_ops() -> None:
    from tests.test_report_support import synthetic_graph

    assert len(synthetic_graph(5000, N_QUESTIONS)) >= 10_000


def test_every_failure_gets_one_capped_slice(report: str) -> None:
    svgs = re.findall(r'<svg class="slice".*?</svg>', report, re.S)
    assert len(svgs) == N_QUESTIONS
    for svg in svgs:
        nodes = svg.count('<g class="node ')
        more = svg.count('<g class="node more')
        assert more >= 4 and nodes - more <= 30 + 6  # budget, plus the answer session which is always drawn
    assert "+4999 more" in report and "not drawn" in report


def test_report_size_stays_small(report: str) -> None:
    assert len(report.encode("utf-8")) < 60_000 * N_QUESTIONS  # about 20-40 kB per failed question
    assert report.count("<details class='q'") == N_QUESTIONS
    assert "of 25008 nodes drawn" in report or re.search(r"of \d{5} nodes drawn", report)
