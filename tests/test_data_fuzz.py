"""LoCoMo-shaped JSON, valid or not, gives a dataset or one DatasetError — never a traceback (issue #14)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtrace_opt.data.locomo import load_locomo
from memtrace_opt.errors import DatasetError

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**6), st.floats(allow_nan=False),
                    st.text(max_size=12), st.sampled_from(["D1:1", "D1:2", "D:1:1", "D9", "", "D1:1; D1:2"]))
leaf = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                    max_leaves=6)
turn = st.fixed_dictionaries({"speaker": st.one_of(st.sampled_from(["A", "B"]), leaf),
                              "dia_id": st.one_of(st.sampled_from(["D1:1", "D1:2", "D2:1"]), leaf),
                              "text": st.one_of(st.text(max_size=20), leaf)})
conversation = st.fixed_dictionaries({
    "speaker_a": st.one_of(st.just("A"), leaf), "speaker_b": st.one_of(st.just("B"), leaf),
    "session_1_date_time": st.one_of(st.just("1:56 pm on 8 May, 2023"), leaf),
    "session_1": st.one_of(st.lists(turn, max_size=3), leaf),
}, optional={"session_2": st.lists(turn, max_size=2), "session_2_date_time": leaf})
qa = st.fixed_dictionaries({"question": st.one_of(st.text(max_size=10), leaf),
                            "category": st.one_of(st.integers(0, 6), leaf)},
                           optional={"answer": st.one_of(st.text(max_size=8), st.integers(), leaf),
                                     "evidence": st.one_of(st.lists(st.sampled_from(["D1:1", "D1:9", "x"])), leaf),
                                     "adversarial_answer": leaf})
sample = st.fixed_dictionaries({"sample_id": st.one_of(st.sampled_from(["c1", "c2"]), leaf),
                                "conversation": st.one_of(conversation, leaf),
                                "qa": st.one_of(st.lists(qa, max_size=3), leaf)})
document = st.one_of(st.lists(sample, max_size=3), leaf)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document)
def test_locomo_shaped_json_loads_or_fails_with_one_dataset_error(tmp_path, doc):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(doc))
    try:
        ds = load_locomo(path)
    except DatasetError as err:
        assert "\n" not in err.one_line() and str(path) in str(err)
    else:
        assert all(c.id for c in ds.conversations)
