"""LoCoMo loader: the published counts, the file's known pitfalls, audit flags, malformed input.

Reads ../shared/data/locomo (CC BY-NC, never copied into the repo); skipped when it is absent.
Assertions compare the loader against the raw file, so no dataset text appears here.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import pytest

from memtrace_opt.data import dataset_stats, load_dataset
from memtrace_opt.data import locomo as locomo_mod
from memtrace_opt.data.locomo import ABSTENTION_ANSWER, load_audit, load_locomo
from memtrace_opt.errors import DatasetError

LOCOMO_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo"
LOCOMO = LOCOMO_DIR / "locomo10.json"
AUDIT = LOCOMO_DIR / "locomo_audit_errors.json"
needs_locomo = pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo not present in ../shared/data/locomo")


@pytest.fixture(scope="module")
def raw():
    return json.loads(LOCOMO.read_text())


@pytest.fixture(scope="module")
def ds():
    return load_dataset("locomo", LOCOMO, audit_path=AUDIT if AUDIT.exists() else None)


@needs_locomo
def test_published_counts(ds):
    stats = dataset_stats(ds)
    assert stats["conversations"] == 10
    assert stats["sessions"] == 272
    assert stats["turns"] == 5882
    assert stats["qa"] == 1986
    assert stats["qa_scored"] == 1540
    assert stats["qa_per_category"] == {
        "multi-hop": 282,
        "temporal": 321,
        "open-domain": 96,
        "single-hop": 841,
        "adversarial": 446,
    }


@needs_locomo
def test_ids_and_category_map(ds, raw):
    assert [c.id for c in ds.conversations] == [c["sample_id"] for c in raw]
    names = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
    for conv, raw_conv in zip(ds.conversations, raw):
        for i, (qa, raw_qa) in enumerate(zip(conv.qa, raw_conv["qa"])):
            assert qa.id == f"{conv.id}/q{i}"
            assert qa.category_id == raw_qa["category"]
            assert qa.category == names[raw_qa["category"]]


@needs_locomo
def test_sessions_come_from_session_lists_not_date_keys(ds, raw):
    body = raw[0]["conversation"]
    date_keys = [k for k in body if k.endswith("_date_time")]
    session_keys = [k for k in body if k.startswith("session_") and isinstance(body[k], list)]
    conv = ds.conversation(raw[0]["sample_id"])
    assert len(conv.sessions) == len(session_keys) < len(date_keys)
    for session in conv.sessions:
        assert session.date_time == body[f"session_{session.index}_date_time"]
        assert all(t.date == session.date_time and t.session == session.index for t in session.turns)


@needs_locomo
def test_turn_ids_match_positions_and_dia_ids(ds, raw):
    assert not [w for w in ds.warnings if "dia_id" in w]
    conv = ds.conversations[3]
    for session in conv.sessions:
        for t in session.turns:
            assert t.id == f"D{session.index}:{t.index}"
            assert conv.turn(t.id) is t
    with pytest.raises(KeyError, match="no turn"):
        conv.turn("D999:1")


@needs_locomo
def test_int_answers_become_strings(ds, raw):
    casted = 0
    for conv, raw_conv in zip(ds.conversations, raw):
        for qa, raw_qa in zip(conv.qa, raw_conv["qa"]):
            assert isinstance(qa.answer, str)
            if isinstance(raw_qa.get("answer"), int) and raw_qa["category"] != 5:
                assert qa.answer == str(raw_qa["answer"])
                casted += 1
    assert casted == 6


@needs_locomo
def test_image_turns_carry_the_caption(ds, raw):
    with_caption = [t for c in ds.conversations for t in c.turns() if t.image_caption]
    assert len(with_caption) == 1226
    assert all(t.text.endswith(f" [shares {t.image_caption}]") for t in with_caption)


@needs_locomo
def test_adversarial_items_are_kept_flagged_and_unscored(ds, raw):
    adv = [qa for _, qa in ds.all_qa() if qa.category_id == 5]
    assert len(adv) == 446
    for qa in adv:
        assert qa.answer == ABSTENTION_ANSWER
        assert qa.adversarial_answer
        assert {"adversarial", "unanswerable", "unscored"} <= qa.flags
        assert not qa.scored
    included = load_locomo(LOCOMO, include_adversarial=True)
    assert dataset_stats(included)["qa_scored"] == 1986


@needs_locomo
def test_evidence_is_normalised_and_resolvable(ds, raw):
    for conv in ds.conversations:
        for qa in conv.qa:
            assert all(conv.has_turn(e) for e in qa.evidence), qa.id
            assert len(set(qa.evidence)) == len(qa.evidence)
    # "D:11:26" (conversation 4) and "D8:6; D9:17" (conversation 0) are split and normalised.
    for ci, qi in [(4, 18), (0, 37)]:
        raw_refs = raw[ci]["qa"][qi]["evidence"]
        qa = ds.conversations[ci].qa[qi]
        assert len(qa.evidence) >= 1 and all(e.count(":") == 1 for e in qa.evidence), raw_refs
    flags = Counter(f for _, qa in ds.all_qa() for f in qa.flags)
    assert flags["no_evidence"] == 4
    assert flags["unresolved_evidence"] == 3
    unresolved = [w for w in ds.warnings if "unresolvable evidence" in w]
    assert len(unresolved) == 3
    assert {w.split(":")[0] for w in unresolved} == {"conv-42/q58", "conv-42/q88", "conv-47/q38"}


@needs_locomo
@pytest.mark.skipif(not AUDIT.exists(), reason="audit file absent")
def test_audit_flags(ds):
    audit = load_audit(AUDIT)
    assert len(audit) == 156
    wrong_gold = [qa for _, qa in ds.all_qa() if "audit_wrong_gold" in qa.flags]
    wrong_ev = [qa for _, qa in ds.all_qa() if "audit_wrong_evidence" in qa.flags]
    assert len(wrong_gold) == 99 and len(wrong_ev) == 57
    assert all(qa.corrected_answer for qa in wrong_gold)
    assert all(qa.corrected_answer is None for qa in wrong_ev)
    for (ci, qi), entry in audit.items():
        qa = ds.conversations[ci].qa[qi]
        assert qa.question == entry["question"]
        assert qa.corrected_evidence is not None
    assert not [w for w in ds.warnings if "audit" in w]
    some = wrong_gold[0]
    assert some.gold(use_audit=True) == some.corrected_answer and some.gold() == some.answer


# --- malformed input (synthetic files written by the test) -------------------------------------


def _conv(sample_id: str = "conv-x", qa: list | None = None) -> dict:
    return {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:00 pm on 2 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "hello"},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "hi", "blip_caption": "a photo of a cat"},
            ],
            "session_2_date_time": "2:00 pm on 9 May, 2023",
        },
        "qa": qa if qa is not None else [{"question": "q?", "answer": 7, "evidence": ["D1:02"], "category": 4}],
    }


def _write(tmp_path: Path, data, name: str = "locomo.json") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return p


def test_synthetic_file_loads(tmp_path):
    ds = load_locomo(_write(tmp_path, [_conv()]))
    conv = ds.conversations[0]
    assert len(conv.sessions) == 1 and conv.speakers == ("Ann", "Bo")
    assert conv.turn("D1:2").text == "hi [shares a photo of a cat]"
    assert conv.qa[0].answer == "7" and conv.qa[0].evidence == ("D1:2",)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d[0]["qa"].append({"answer": "x", "evidence": [], "category": 1}),
         "conversation 0 (conv-x): qa[1]: missing 'question'"),
        (lambda d: d[0]["qa"][0].update(question=3), "qa[0]: expected a string for 'question', found int"),
        (lambda d: d[0]["qa"][0].update(category=9), "category 9 is not one of 1-5"),
        (lambda d: d[0]["qa"][0].update(evidence="D1:1"), "expected a list for 'evidence'"),
        (lambda d: d[0]["conversation"].pop("speaker_b"), "conversation 0 (conv-x): missing 'speaker_b'"),
        (lambda d: d[0]["conversation"].pop("session_1_date_time"), "missing 'session_1_date_time'"),
        (lambda d: d[0]["conversation"]["session_1"][1].pop("text"), "session_1[1]: missing 'text'"),
        (lambda d: d[0].pop("sample_id"), "conversation 0: missing 'sample_id'"),
    ],
)
def test_malformed_items_name_file_and_item(tmp_path, mutate, expected):
    data = [_conv()]
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(DatasetError) as info:
        load_locomo(path)
    assert str(path) in str(info.value)
    assert expected in str(info.value)


def test_bad_json_and_missing_file(tmp_path):
    with pytest.raises(DatasetError, match=r"not valid JSON: .* line 1"):
        load_locomo(_write(tmp_path, "[{"))
    with pytest.raises(DatasetError, match="file not found"):
        load_locomo(tmp_path / "absent.json")
    with pytest.raises(DatasetError, match="expected a list"):
        load_locomo(_write(tmp_path, {"a": 1}))


def test_unresolvable_evidence_is_a_warning_not_an_error(tmp_path):
    qa = [{"question": "q", "answer": "a", "evidence": ["D1:1", "D9:9", "D"], "category": 1}]
    ds = load_locomo(_write(tmp_path, [_conv(qa=qa)]))
    qa = ds.conversations[0].qa[0]
    assert qa.evidence == ("D1:1",) and "unresolved_evidence" in qa.flags
    assert ds.warnings == ["conv-x/q0: unresolvable evidence 'D9:9', 'D'; dropped"]


def test_audit_entry_for_unknown_question_is_warned(tmp_path):
    audit = [{"question_id": "locomo_0_qa5", "error_type": "HALLUCINATION", "correct_answer": "z"},
             {"question_id": "locomo_0_qa0", "error_type": "TEMPORAL_ERROR", "question": "q?",
              "correct_answer": "8", "correct_evidence": ["D1:1"]}]
    ds = load_locomo(_write(tmp_path, [_conv()]), audit_path=_write(tmp_path, audit, "audit.json"))
    qa = ds.conversations[0].qa[0]
    assert qa.corrected_answer == "8" and qa.corrected_evidence == ("D1:1",) and "audit_wrong_gold" in qa.flags
    assert ds.warnings == ["audit entry locomo_0_qa5 matches no question; ignored"]
    with pytest.raises(DatasetError, match="not locomo_<conv>_qa<index>"):
        load_audit(_write(tmp_path, [{"question_id": "x", "error_type": "E"}], "bad_audit.json"))


def test_url_is_downloaded_once_into_the_cache(tmp_path, monkeypatch):
    payload = json.dumps([_conv()]).encode()
    calls = []

    def fake_urlopen(url, timeout):
        calls.append(url)
        return io.BytesIO(payload)

    monkeypatch.setattr(locomo_mod.urllib.request, "urlopen", fake_urlopen)
    url = "https://example.org/data/locomo10.json"
    for _ in range(2):
        ds = load_locomo(url, cache_dir=tmp_path / "cache")
        assert ds.source == url and len(ds.conversations) == 1
    assert calls == [url]
    assert [p.name.endswith("-locomo10.json") for p in (tmp_path / "cache").iterdir()] == [True]


def test_download_failure_is_a_dataset_error(tmp_path, monkeypatch):
    def failing(url, timeout):
        raise locomo_mod.urllib.error.URLError("offline")

    monkeypatch.setattr(locomo_mod.urllib.request, "urlopen", failing)
    with pytest.raises(DatasetError, match="download failed"):
        load_locomo("https://example.org/x.json", cache_dir=tmp_path)
