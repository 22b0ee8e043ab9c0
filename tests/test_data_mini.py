"""The bundled mini dataset: shape, coverage of the question kinds, and the loader's strictness."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from memtrace_opt.data import dataset_stats, load_dataset
from memtrace_opt.data.dates import before_windows, find_dates, parse_datetime
from memtrace_opt.data.mini import bundled_path, load_mini
from memtrace_opt.errors import DatasetError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ds():
    return load_dataset("mini")


def test_shape_is_small_enough_for_a_cpu_model(ds):
    stats = dataset_stats(ds)
    assert stats["conversations"] == 9 and stats["qa"] == stats["qa_scored"] == 54
    assert 180 <= stats["turns"] <= 230
    for conv in ds.conversations:
        assert len(conv.speakers) == 2 and 3 <= len(conv.sessions) <= 4
        assert all(6 <= len(s.turns) <= 8 for s in conv.sessions)
        assert {t.speaker for t in conv.turns()} == set(conv.speakers)
        assert all(parse_datetime(s.date_time) is not None for s in conv.sessions)
        dates = [parse_datetime(s.date_time) for s in conv.sessions]
        assert dates == sorted(dates)


def test_every_question_kind_is_covered_in_each_conversation(ds):
    for conv in ds.conversations:
        cats = {q.category for q in conv.qa}
        flags = {f for q in conv.qa for f in q.flags}
        assert {"single-hop", "multi-hop", "temporal"} <= cats
        assert {"update", "deletion", "unanswerable"} <= flags
        for qa in conv.qa:
            assert all(conv.has_turn(e) for e in qa.evidence)
            if "unanswerable" in qa.flags:
                assert qa.evidence == () and "not mentioned" in qa.answer.lower()
            if qa.category == "multi-hop":
                assert len({conv.turn(e).session for e in qa.evidence}) >= 2
            if qa.flags & {"update", "deletion"}:
                assert len({conv.turn(e).session for e in qa.evidence}) >= 2


DAYS_AGO = {"yesterday": 1, "two days ago": 2, "three days ago": 3}


def test_temporal_answers_need_the_session_date(ds):
    """The evidence says "last Saturday" or "yesterday", "three days ago"; the gold is that day,
    counted back from the session's date."""
    for conv in ds.conversations:
        for qa in (q for q in conv.qa if q.category == "temporal"):
            (ev,) = qa.evidence
            turn = conv.turn(ev)
            assert not find_dates(turn.text), "the turn itself must not give the date"
            (gold,) = [d.as_date() for d in find_dates(qa.answer)]
            session_day = parse_datetime(turn.date).date()
            text = turn.text.lower()
            back = [n for phrase, n in DAYS_AGO.items() if phrase in text]
            if back:
                assert (session_day - gold).days == back[0], qa.id
                continue
            weekday = gold.strftime("%A").lower()
            assert f"last {weekday}" in text, qa.id
            assert before_windows(f"the {weekday} before {session_day:%d %B %Y}") == [(gold, gold)]


def test_bundled_as_package_data():
    assert bundled_path().is_file()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    setuptools = pyproject["tool"]["setuptools"]
    assert "memtrace_opt.data.mini" in setuptools["packages"]  # unlisted, its data is not shipped (test_wheel.py)
    assert any(bundled_path().match(g) for g in setuptools["package-data"]["memtrace_opt.data.mini"])


def _broken(tmp_path: Path, mutate) -> Path:
    data = json.loads(bundled_path().read_text())
    mutate(data)
    p = tmp_path / "mini.json"
    p.write_text(json.dumps(data))
    return p


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["conversations"][0]["qa"][0].update(evidence=["D9:1"]), "qa[0]: evidence ['D9:1'] names no turn"),
        (lambda d: d["conversations"][0]["qa"][0].update(flags=["updated"]), "unknown flags ['updated']"),
        (lambda d: d["conversations"][0]["qa"][0].update(category="trivia"), "category 'trivia' is not one of"),
        (lambda d: d["conversations"][0]["qa"][5].update(evidence=["D1:1"]), "unanswerable questions have no evidence"),
        (lambda d: d["conversations"][1]["sessions"][0]["turns"][0].update(speaker="Zed"),
         "speaker 'Zed' is not one of"),
        (lambda d: d["conversations"][1].update(id="mini-1"), "duplicate conversation ids"),
        (lambda d: d.update(format="other/2"), "format 'other/2' is not"),
        (lambda d: d["conversations"][0]["sessions"][0].pop("date_time"), "sessions[0]: missing 'date_time'"),
    ],
)
def test_loader_is_strict(tmp_path, mutate, expected):
    path = _broken(tmp_path, mutate)
    with pytest.raises(DatasetError) as info:
        load_mini(path)
    assert str(path) in str(info.value) and expected in str(info.value)
