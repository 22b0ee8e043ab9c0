"""mem0-protocol metrics against hand-computed values, and the bootstrap statistics."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memtrace_opt.eval.metrics import (
    accuracy,
    bleu1,
    bootstrap_ci,
    by_category,
    normalize_tokens,
    paired_bootstrap,
    token_f1,
    wordpunct_tokens,
)


def test_normalisation_lowercases_and_strips_punctuation():
    assert normalize_tokens("Hello, World! It's 7-May.") == ["hello", "world", "it", "s", "7", "may"]
    assert wordpunct_tokens("Hi, Bob!") == ["hi", ",", "bob", "!"]


@pytest.mark.parametrize(
    ("pred", "gold", "expected"),
    [
        ("Paris", "paris.", 1.0),
        # sets: {the, cat, sat} vs {a, cat, sat, down}: p = 2/3, r = 2/4 -> 4/7
        ("the cat sat", "a cat sat down", 4 / 7),
        # duplicates count once: {sat} vs {sat, down}: p = 1, r = 1/2 -> 2/3
        ("sat sat sat", "sat down", 2 / 3),
        ("yes", "no", 0.0),
        ("", "anything", 0.0),
        ("...", "x", 0.0),
    ],
)
def test_token_f1_hand_computed(pred, gold, expected):
    assert token_f1(pred, gold) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("pred", "gold", "expected"),
    [
        ("the cat sat on the mat", "the cat sat on the mat", 1.0),
        # P1 = 3/3; brevity penalty exp(1 - 6/3)
        ("the cat sat", "the cat sat on the mat", math.exp(-1)),
        # 6 tokens, clipped matches: the x2, cat, mat = 4 -> 4/6, no brevity penalty
        ("the the the cat mat dog", "the cat sat on the mat", 4 / 6),
        # punctuation tokens count: [7, may, ,, 2023] vs [7, may, 2023] -> 3/4
        ("7 May, 2023", "7 May 2023", 3 / 4),
        ("dog", "cat", 0.0),
        ("", "cat", 0.0),
    ],
)
def test_bleu1_hand_computed(pred, gold, expected):
    assert bleu1(pred, gold) == pytest.approx(expected)


@given(st.text(max_size=40), st.text(max_size=40))
def test_f1_is_symmetric_and_bounded(a, b):
    assert token_f1(a, b) == pytest.approx(token_f1(b, a))
    assert 0.0 <= token_f1(a, b) <= 1.0


def test_accuracy_and_categories():
    assert accuracy([1, 0, 1, 1]) == 0.75 and accuracy([]) == 0.0
    assert by_category([("a", 1), ("b", 0), ("a", 0)]) == {"a": {"mean": 0.5, "n": 2}, "b": {"mean": 0.0, "n": 1}}


def test_bootstrap_ci():
    assert bootstrap_ci([1, 1, 1]) == (1.0, 1.0, 1.0)
    assert bootstrap_ci([]) == (0.0, 0.0, 0.0)
    values = [1] * 60 + [0] * 40
    mean, low, high = bootstrap_ci(values, n=2000, seed=1)
    assert mean == 0.6
    # normal approximation: 0.6 +- 1.96 * sqrt(0.24 / 100) = [0.504, 0.696]
    assert low == pytest.approx(0.504, abs=0.02) and high == pytest.approx(0.696, abs=0.02)
    assert bootstrap_ci(values, seed=1) == bootstrap_ci(values, seed=1), "deterministic per seed"


def test_paired_bootstrap_identical_runs():
    cmp = paired_bootstrap([1, 0, 1, 0], [1, 0, 1, 0])
    assert (cmp.mean_diff, cmp.ci_low, cmp.ci_high, cmp.p_value, cmp.n) == (0.0, 0.0, 0.0, 1.0, 4)


def test_paired_bootstrap_detects_a_real_difference():
    a = [0] * 50 + [1] * 50
    b = [1] * 90 + [0] * 10  # fixes a's 50 failures, breaks 10 of its successes
    cmp = paired_bootstrap(a, b, n=2000, seed=3)
    assert cmp.mean_diff == pytest.approx(0.4)
    assert cmp.ci_low > 0.2 and cmp.p_value < 0.01
    assert cmp.p_value >= 1 / 2001


def test_paired_bootstrap_small_noisy_difference_is_not_significant():
    a = [1, 0, 1, 0, 1, 0, 1, 0, 1, 0]
    b = [1, 1, 1, 0, 1, 0, 0, 0, 1, 0]
    cmp = paired_bootstrap(a, b, seed=0)
    assert cmp.mean_diff == 0.0 and cmp.p_value > 0.5


def test_paired_bootstrap_by_question_id():
    a = {"q1": 0.0, "q2": 1.0, "q3": 0.0}
    b = {"q3": 1.0, "q1": 1.0, "q2": 1.0}
    assert paired_bootstrap(a, b).mean_diff == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match=r"only in b \['q4'\]"):
        paired_bootstrap(a, {**b, "q4": 1.0})
    with pytest.raises(ValueError, match="differ in length"):
        paired_bootstrap([1, 0], [1])
    with pytest.raises(TypeError):
        paired_bootstrap(a, [1, 0, 1])
