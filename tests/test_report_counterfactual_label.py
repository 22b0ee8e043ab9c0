"""The report's counterfactual label says what was done: a replay without a single-op fix is not "not checked"."""

from __future__ import annotations

from typing import Any

import pytest

from memtrace_opt.attribution.blame import AttributionCost, BlameSignal
from memtrace_opt.report.questions import _why


def _blame(rescued: bool | None, replays: int) -> BlameSignal:
    return BlameSignal(case_id="c/q1", question="When?", gold="23 June 2024", prediction="6 June 2024",
                       error_type="ResponseError", op_id="answer:c/q1/qa.answer#0",
                       prompt_component="question_answering", reason="the context held it",
                       counterfactual_rescued=rescued, cost=AttributionCost(replays=replays))


@pytest.mark.parametrize(("rescued", "replays", "label"), [
    (None, 0, "counterfactual not checked"),
    (None, 1, "counterfactual: 1 replay(s), no single-op fix to test"),
    (True, 2, "✓ counterfactual: correcting this op rescues the answer"),
    (False, 2, "✗ counterfactual: correcting this op alone did not rescue the answer"),
])
def test_counterfactual_label(rescued: bool | None, replays: int, label: str) -> None:
    failed: Any = None  # _why reads only the blame
    html = _why(failed, _blame(rescued, replays))
    assert label in html
    if replays:
        assert "not checked" not in html


def test_a_compound_failure_lists_the_faults_still_standing() -> None:
    from dataclasses import replace

    from memtrace_opt.attribution.blame import ChainedFault

    failed: Any = None
    link = ChainedFault("ResponseError", "answer:c/q1/qa.answer#0", "question_answering", "context held it <b>", None)
    html = _why(failed, replace(_blame(False, 1), error_type="ExtractionError", op_id="ingest:s1/extract#3",
                                prompt_component="memcell_extraction", chain=(link,)))
    assert "Compound failure" in html and "answer:c/q1/qa.answer#0" in html
    assert "no fix short of the gold answer" in html and "&lt;b&gt;" in html  # escaped
    assert "Compound failure" not in _why(failed, _blame(False, 1))
