"""Slicing datasets with ``select`` and counting them with ``dataset_stats``."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtrace_opt.data import dataset_stats, load_dataset, select
from memtrace_opt.errors import DatasetError

LOCOMO = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo" / "locomo10.json"


@pytest.fixture(scope="module")
def mini():
    return load_dataset("mini")


def test_first_sessions_keep_only_answerable_questions(mini):
    sliced = select(mini, ["mini-1"], max_sessions=1)
    (conv,) = sliced.conversations
    assert len(conv.sessions) == 1
    kept = {t.id for t in conv.turns()}
    assert all(set(q.evidence) <= kept for q in conv.qa)
    # single-hop and temporal live in session 1; the unanswerable question survives truncation
    assert {q.id for q in conv.qa} == {"mini-1/q0", "mini-1/q1", "mini-1/q5"}
    assert len(mini.conversation("mini-1").sessions) == 3, "the original is untouched"


def test_conversation_order_and_unknown_ids(mini):
    assert [c.id for c in select(mini, ["mini-2", "mini-1", "mini-2"]).conversations] == ["mini-2", "mini-1"]
    with pytest.raises(DatasetError, match=r"unknown conversation ids \['conv-1'\]"):
        select(mini, ["conv-1"])
    with pytest.raises(ValueError, match="max_sessions must be at least 1"):
        select(mini, max_sessions=0)


def test_max_questions_caps_each_conversation(mini):
    sliced = select(mini, max_questions=2)
    assert [len(c.qa) for c in sliced.conversations] == [2] * 9
    assert select(mini, max_sessions=10) == mini


@pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo not present")
def test_locomo_slice_of_conv_26():
    ds = load_dataset("locomo", LOCOMO)
    sliced = select(ds, ["conv-26"], max_sessions=3, max_questions=5)
    (conv,) = sliced.conversations
    assert [s.index for s in conv.sessions] == [1, 2, 3]
    assert sum(q.scored for q in conv.qa) == 5
    assert all(conv.has_turn(e) for q in conv.qa for e in q.evidence)
    stats = dataset_stats(sliced)
    assert stats["conversations"] == 1 and stats["sessions"] == 3 and stats["warnings"] == 0
    full = select(ds, ["conv-26"], max_sessions=3)
    assert all(q.evidence and all(e.split(":")[0] in ("D1", "D2", "D3") for e in q.evidence)
               for q in full.conversations[0].qa)
    # unresolvable-evidence warnings of dropped conversations go with them
    assert len(select(ds, ["conv-42"]).warnings) == 2


def test_min_evidence_session_keeps_only_questions_a_shorter_cut_never_asked():
    from memtrace_opt.data import load_dataset, select

    ds = load_dataset("mini", None)
    conv = ds.conversations[0]
    first = {t.id for t in conv.sessions[0].turns}
    later = select(ds, [conv.id], min_evidence_session=2).conversations[0]
    short = select(ds, [conv.id], max_sessions=1).conversations[0]
    assert later.qa and all(any(e not in first for e in q.evidence) for q in later.qa)
    assert not {q.id for q in later.qa} & {q.id for q in short.qa if q.evidence}  # disjoint from the 1-session cut
    assert {q.id for q in later.qa} | {q.id for q in short.qa} >= {q.id for q in conv.qa if q.evidence}
