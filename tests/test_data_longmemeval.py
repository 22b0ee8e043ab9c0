"""LongMemEval loader on a small file written here in the published schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memtrace_opt.data import dataset_stats, load_dataset, select
from memtrace_opt.errors import DatasetError


def _item(qid: str, qtype: str, answer, sessions: list[list[dict]]) -> dict:
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": f"question {qid}?",
        "answer": answer,
        "question_date": "2023/06/01 (Thu) 10:00",
        "haystack_session_ids": [f"s{i}" for i in range(len(sessions))],
        "haystack_dates": [f"2023/05/{20 + i} (Sat) 09:0{i}" for i in range(len(sessions))],
        "haystack_sessions": sessions,
        "answer_session_ids": ["s1"],
    }


ITEMS = [
    _item("q1", "knowledge-update", "Lyon", [
        [{"role": "user", "content": "I live in Paris."}, {"role": "assistant", "content": "Nice."}],
        [{"role": "user", "content": "I moved to Lyon.", "has_answer": True},
         {"role": "assistant", "content": "Congrats!", "has_answer": False}],
    ]),
    _item("q2_abs", "single-session-user", "The information is not enough to answer.", [
        [{"role": "user", "content": "Hello."}, {"role": "assistant", "content": "Hi."}],
    ]),
    _item("q3", "temporal-reasoning", 3, [
        [{"role": "user", "content": "Bought a bike."}],
    ]),
]


@pytest.fixture()
def lme_path(tmp_path: Path) -> Path:
    p = tmp_path / "longmemeval_s.json"
    p.write_text(json.dumps(ITEMS))
    return p


def test_each_question_becomes_a_conversation(lme_path):
    ds = load_dataset("longmemeval", lme_path)
    assert [c.id for c in ds.conversations] == ["q1", "q2_abs", "q3"]
    conv = ds.conversation("q1")
    assert conv.speakers == ("user", "assistant")
    assert [s.source_id for s in conv.sessions] == ["s0", "s1"]
    assert conv.sessions[1].date_time == "2023/05/21 (Sat) 09:01"
    assert conv.turn("D2:1").text == "I moved to Lyon." and conv.turn("D2:1").speaker == "user"
    (qa,) = conv.qa
    assert qa.id == "q1/q0" and qa.category == "knowledge-update" and qa.category_id is None
    assert qa.evidence == ("D2:1",) and qa.flags == frozenset({"update"})
    assert qa.question_date == "2023/06/01 (Thu) 10:00"


def test_abstention_and_missing_evidence_flags(lme_path):
    ds = load_dataset("longmemeval", lme_path)
    abs_qa = ds.conversation("q2_abs").qa[0]
    assert abs_qa.flags == frozenset({"unanswerable"}) and abs_qa.evidence == () and abs_qa.scored
    q3 = ds.conversation("q3").qa[0]
    assert q3.answer == "3" and q3.flags == frozenset({"no_evidence"})
    stats = dataset_stats(ds)
    assert stats["qa"] == stats["qa_scored"] == 3 and stats["turns"] == 7
    assert stats["qa_per_category"] == {"single-session-user": 1, "temporal-reasoning": 1, "knowledge-update": 1}


def test_select_works_on_longmemeval(lme_path):
    ds = select(load_dataset("longmemeval", lme_path), ["q1"], max_sessions=1)
    assert len(ds.conversations[0].sessions) == 1 and ds.conversations[0].qa == ()


def test_path_is_required(tmp_path):
    with pytest.raises(DatasetError, match="no path given"):
        load_dataset("longmemeval")


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d[0].pop("question"), "item 0 (q1): missing 'question'"),
        (lambda d: d[0]["haystack_dates"].pop(), "haystack lists differ in length"),
        (lambda d: d[0]["haystack_sessions"][1][0].pop("role"), "haystack_sessions[1][0]: missing 'role'"),
        (lambda d: d[0]["haystack_sessions"][1][0].update(has_answer="yes"), "expected a boolean for 'has_answer'"),
    ],
)
def test_malformed_items(tmp_path, mutate, expected):
    data = json.loads(json.dumps(ITEMS))
    mutate(data)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(data))
    with pytest.raises(DatasetError) as info:
        load_dataset("longmemeval", p)
    assert str(p) in str(info.value) and expected in str(info.value)


def test_unknown_question_type_is_kept_with_a_warning(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps([_item("z", "new-type", "a", [[{"role": "user", "content": "c"}]])]))
    ds = load_dataset("longmemeval", p)
    assert ds.conversations[0].qa[0].category == "new-type"
    assert ds.warnings == ["z/q0: unknown question_type 'new-type'; kept as its category"]


def test_duplicate_question_ids_are_rejected(lme_path, tmp_path):
    import json

    from memtrace_opt.data.longmemeval import load_longmemeval
    from memtrace_opt.errors import DatasetError

    items = json.loads(lme_path.read_text())
    dup = tmp_path / "dup.json"
    dup.write_text(json.dumps(items + items[:1]))
    with pytest.raises(DatasetError, match=rf"item {len(items)}.question_id: duplicate id"):
        load_longmemeval(dup)
