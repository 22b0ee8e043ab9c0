"""Run-dir file schemas: old run dirs load through each reader, newer ones are refused in one line, writers round-trip.

``tests/fixtures/old_run`` is an ``optimize`` run dir in the shapes written before the files carried
schema ids (as of commit 5a0bc80; made-up questions): an unstamped run ``blame.json`` (signals as a
list, grouped blame under ``aggregate``), an unstamped round ``blame.json`` (signals keyed by question,
grouped blame under ``summary`` with ``verification_failed`` inside), unstamped round ``scores.json`` and
``optimizer.json``, and ``final.json``/``checkpoint.json``, which were stamped from the start.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from memtrace_opt.attribution.aggregate import aggregate
from memtrace_opt.attribution.blame import BlameSignal
from memtrace_opt.errors import ConfigError, DatasetError
from memtrace_opt.loop.blaming import RoundBlame
from memtrace_opt.loop.checkpoint import load_state
from memtrace_opt.loop.compare import compare_runs
from memtrace_opt.report.collect import collect_run
from memtrace_opt.rundir.schemas import (
    BLAME, FINAL, convert, read_blame, read_checkpoint, read_final, read_round_optimizer, read_round_scores, stamp,
)

OLD = Path(__file__).parent / "fixtures" / "old_run"
QA = "question_answering"
BLAME_KEYS = {"format", "signals", "aggregate", "verification_failed"}
READERS = {"blame.json": read_blame, "rounds/round_1/blame.json": read_blame, "final.json": read_final,
           "checkpoint.json": read_checkpoint, "rounds/round_1/scores.json": read_round_scores,
           "rounds/round_1/optimizer.json": read_round_optimizer}


def raw(rel: str, root: Path = OLD) -> dict:
    return json.loads((root / rel).read_text(encoding="utf-8"))


def signal(case: str, error_type: str | None, component: str | None) -> BlameSignal:
    return BlameSignal(case, "Which pet?", "a tortoise", "a cat", error_type, f"answer:{case}/toy.answer#0", component,
                       f"reason {case}")


# -- old files convert to the current shape ---------------------------------------------------------------
def test_the_fixture_is_old() -> None:
    """Guards the fixture itself: the blame and round files carry no schema id, the round signals are keyed."""
    assert "format" not in raw("blame.json") and "format" not in raw("rounds/round_1/blame.json")
    old_round = raw("rounds/round_1/blame.json")
    assert isinstance(old_round["signals"], dict) and "summary" in old_round
    assert "format" not in raw("rounds/round_1/scores.json") and "format" not in raw("rounds/round_1/optimizer.json")


def test_old_round_blame_becomes_the_run_shape() -> None:
    old = raw("rounds/round_1/blame.json")
    blame = read_blame(OLD / "rounds/round_1/blame.json")
    assert blame["format"] == BLAME.id == "memtrace-blame/2" and "summary" not in blame
    assert [s["case_id"] for s in blame["signals"]] == list(old["signals"])
    assert blame["aggregate"]["components"] == old["summary"]["components"]
    assert "verification_failed" not in blame["aggregate"] and blame["verification_failed"] == 0
    assert blame["failures"] == 2 and blame["components"] == [QA, "fact_extraction"]  # the round's own fields stay


def test_old_run_blame_and_round_blame_share_one_shape() -> None:
    run, rnd = read_blame(OLD / "blame.json"), read_blame(OLD / "rounds/round_1/blame.json")
    assert BLAME_KEYS <= set(run) and BLAME_KEYS <= set(rnd)
    assert set(run["aggregate"]) == set(rnd["aggregate"]) == {"total", "components", "unoptimizable", "unattributed"}
    assert isinstance(run["signals"], list) and isinstance(rnd["signals"], list)
    assert run["aggregate"]["unoptimizable"]["case_ids"] == ["h1/q2"] and run["method"] == "tracing"


def test_old_files_of_every_kind_load() -> None:
    final = read_final(OLD / "final.json")
    assert final["format"] == "memtrace-final/1" and [c["qa_id"] for c in final["cases"]] == ["h1/q0", "h1/q1", "h1/q2"]
    state = load_state(OLD)
    assert state is not None and state.status == "done" and state.rounds[0].optimized == [QA, "fact_extraction"]
    assert read_round_scores(OLD / "rounds/round_0/scores.json") == {
        "format": "memtrace-round-scores/1", "validation": {"v1/q0": 1.0, "v1/q1": 0.0}}
    assert read_round_optimizer(OLD / "rounds/round_1/optimizer.json")["metric_calls"] == 8


def test_blame_from_before_the_one_grouping_and_before_verification_counts() -> None:
    """Round files before aa6238b grouped with ``cases`` and had no total/unattributed (the unattributed
    ablation spread every failure over every target); run files before 6b8fac2 had no verification_failed;
    the report also took a bare list of signals."""
    sigs = [signal("c/q1", "ResponseError", None).to_dict(), signal("c/q2", None, None).to_dict()]
    old_round = {"failures": 2, "components": [QA, "memory_update"], "not_attributed": [],
                 "signals": {"q1": sigs[0], "q2": sigs[1]},
                 "summary": {"components": {QA: {"count": 2, "error_types": {"ResponseError": 2},
                                                 "cases": ["c/q1", "c/q2"], "reasons": ["r"]}},
                             "unoptimizable": {"count": 0, "error_types": {}}}}
    blame = convert(BLAME, old_round, "round_1/blame.json")
    assert "case_ids" not in old_round["summary"]["components"][QA]  # the file's payload is not changed in place
    group = blame["aggregate"]["components"][QA]
    assert group["case_ids"] == ["c/q1", "c/q2"] and "cases" not in group and group["op_subgraphs"] == []
    assert blame["aggregate"]["total"] == 2 and blame["aggregate"]["unattributed"]["case_ids"] == ["c/q2"]
    old_run = {"method": "tracing", "signals": sigs[:1],
               "aggregate": aggregate([signal("c/q1", "ResponseError", None)])}
    assert convert(BLAME, old_run, "blame.json")["verification_failed"] == 0
    bare = convert(BLAME, sigs, "blame.json")
    assert bare["signals"] == sigs and bare["aggregate"]["unoptimizable"]["case_ids"] == ["c/q1"]
    assert bare["aggregate"]["unattributed"]["count"] == 1


# -- the report and compare read the old run ---------------------------------------------------------------
def test_report_collects_the_old_run() -> None:
    data = collect_run(OLD)
    assert not data.notes
    assert [b.case_id for b in data.blame] == ["h1/q2"] and data.blame[0].error_type == "RetrievalError"
    assert [b.case_id for b in data.round_blame[1]] == ["t1/q0", "t1/q1"]
    assert data.final["n"] == 3 and data.system == "toy" and data.checkpoint["best_round"] == 1
    failed = {f.qa_id: f.blame for f in data.failed}
    assert set(failed) == {"h1/q2"} and failed["h1/q2"] is not None
    assert [(p.round, p.accuracy) for p in data.rounds] == [(0, 0.5), (1, 1.0)]


def test_report_renders_the_old_run(tmp_path: Path) -> None:
    from memtrace_opt.report.page import render_report

    shutil.copytree(OLD, tmp_path / "run")
    html = render_report(tmp_path / "run").read_text(encoding="utf-8")
    assert "could not be read" not in html and 'data-filter="RetrievalError"' in html
    assert "33.3% → 66.7%" in html


def test_compare_reads_the_old_run() -> None:
    (row,) = compare_runs([OLD], n_boot=200)
    assert (row.method, row.system, row.n) == ("attributed", "toy", 3)
    assert row.gain == pytest.approx(1 / 3) and row.changed == [QA] and row.rollouts == 14


# -- newer, unknown or malformed files: one line naming the file and the field --------------------------------
@pytest.mark.parametrize("rel", list(READERS))
def test_a_newer_version_is_one_line_naming_the_file(tmp_path: Path, rel: str) -> None:
    path = tmp_path / Path(rel).name
    current = READERS[rel](OLD / rel)["format"]
    newer = current.rsplit("/", 1)[0] + "/99"
    path.write_text(json.dumps({**raw(rel), "format": newer}), encoding="utf-8")
    with pytest.raises(DatasetError) as err:
        READERS[rel](path)
    message = err.value.one_line()
    assert message == str(err.value) and str(path) in message and "format" in message
    assert f"{newer} is newer than this memtrace-opt reads ({current})" in message


def test_unknown_and_malformed_payloads_name_the_field(tmp_path: Path) -> None:
    path = tmp_path / "blame.json"
    path.write_text(json.dumps({"format": "memtrace-final/1", "signals": []}), encoding="utf-8")
    with pytest.raises(DatasetError, match=r"blame\.json: format: 'memtrace-final/1' is not a blame file"):
        read_blame(path)
    path.write_text(json.dumps(stamp(BLAME, {**read_blame(OLD / "blame.json"), "signals": "lots"})), encoding="utf-8")
    with pytest.raises(DatasetError, match=r"blame\.json: signals: expected a list, got string"):
        read_blame(path)
    final = tmp_path / "final.json"
    cases = [{"qa_id": "q", "seed_score": 1.0}]
    final.write_text(json.dumps(stamp(FINAL, {**raw("final.json"), "cases": cases})), encoding="utf-8")
    with pytest.raises(DatasetError, match=r"final\.json: cases\[0\]\.best_score: missing"):
        read_final(final)
    checkpoint = tmp_path / "checkpoint.json"
    checkpoint.write_text(json.dumps({k: v for k, v in raw("checkpoint.json").items() if k != "format"}))
    with pytest.raises(DatasetError, match="format: no format field; expected a loop checkpoint"):
        read_checkpoint(checkpoint)


def test_the_report_notes_a_newer_blame_file_and_keeps_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "run"
    shutil.copytree(OLD, root)
    (root / "blame.json").write_text(json.dumps({**raw("blame.json"), "format": "memtrace-blame/3"}))
    data = collect_run(root)
    assert data.blame == [] and data.final["n"] == 3 and len(data.round_blame[1]) == 2
    assert data.notes == ["blame.json: could not be read (format: memtrace-blame/3 is newer than this memtrace-opt "
                          "reads (memtrace-blame/2); upgrade memtrace-opt); section omitted"]


def test_a_newer_checkpoint_stops_the_loop_with_its_config_error(tmp_path: Path) -> None:
    (tmp_path / "checkpoint.json").write_text(json.dumps({**raw("checkpoint.json"), "format": "memtrace-loop/2"}))
    with pytest.raises(ConfigError, match=r"unreadable checkpoint \(format: memtrace-loop/2 is newer"):
        load_state(tmp_path)


# -- writers round-trip through their readers ----------------------------------------------------------------
def test_round_blame_round_trips(tmp_path: Path) -> None:
    from memtrace_opt.rundir import write_json

    signals = {"q1": signal("c/q1", "ResponseError", QA), "q2": signal("c/q2", "RetrievalError", None)}
    written = RoundBlame(signals, aggregate(list(signals.values())), [QA], 2, ["q3"], verification_failed=1).to_dict()
    write_json(tmp_path / "blame.json", written)
    blame = read_blame(tmp_path / "blame.json")
    assert blame == written and blame["format"] == "memtrace-blame/2" and blame["verification_failed"] == 1
    assert [BlameSignal.from_dict(s) for s in blame["signals"]] == list(signals.values())


def test_the_loops_files_round_trip(tmp_path: Path) -> None:
    """A whole (scripted) loop run: every file it writes is stamped and reads back unchanged."""
    from memtrace_opt.loop import run_loop
    from tests.test_loop_closed import make_ctx

    ctx, _, _ = make_ctx(tmp_path, rounds=1)
    state = run_loop(ctx)
    files = {"final.json": read_final, "checkpoint.json": read_checkpoint, "rounds/round_0/scores.json":
             read_round_scores, "rounds/round_1/scores.json": read_round_scores,
             "rounds/round_1/optimizer.json": read_round_optimizer, "rounds/round_1/blame.json": read_blame}
    for rel, reader in files.items():
        assert reader(tmp_path / rel) == raw(rel, tmp_path), rel
    assert raw("rounds/round_1/blame.json", tmp_path)["format"] == "memtrace-blame/2"
    assert raw("rounds/round_1/scores.json", tmp_path)["format"] == "memtrace-round-scores/1"
    assert raw("rounds/round_1/optimizer.json", tmp_path)["format"] == "memtrace-round-optimizer/1"
    assert load_state(tmp_path) == state and read_final(tmp_path / "final.json")["n"] == state.final["n"]


def test_attribute_writes_a_stamped_blame_file_that_round_trips(tmp_path: Path) -> None:
    from memtrace_opt import rundir as rd
    from memtrace_opt.run import attribute
    from memtrace_opt.systems.runner import run_conversation
    from memtrace_opt.testing import HashEmbedder, ScriptedLM, judge_lm, make_conversation

    conv = make_conversation([[("Ann", "My tortoise is called Pebble."), ("Bob", "Nice.")]],
                             [{"question": "What is Ann's tortoise called?", "answer": "Pebble", "evidence": ["D1:1"]}])
    result = run_conversation("long_context", conv, lms={"task": ScriptedLM([], default="Not mentioned"),
                                                         "judge": judge_lm()})
    rd.write_graph(tmp_path, conv.id, result.graph)
    payload = rd.blame_payload(attribute(tmp_path, counterfactual=False, embed=HashEmbedder().embed))
    assert payload["format"] == "memtrace-blame/2" and len(payload["signals"]) == 1
    assert read_blame(tmp_path / "blame.json") == json.loads(json.dumps(payload)) == raw("blame.json", tmp_path)
