"""Embedder: offline MiniLM, normalized float32 rows, meaningful similarities, cache, singleton."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from memtrace_opt.lm.embeddings import EMBEDDING_DIM, get_embedder


@pytest.fixture(scope="module")
def embedder():
    return get_embedder()


def test_shape_dtype_and_norm(embedder):
    v = embedder.embed(["I moved to Bristol last spring.", "The cat sat on the mat.", ""])
    assert v.shape == (3, EMBEDDING_DIM) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert embedder.embed([]).shape == (0, EMBEDDING_DIM)


def test_similar_sentences_score_higher_than_unrelated(embedder):
    a, b, c = embedder.embed(["I moved to Bristol.", "I now live in Bristol.", "My favourite food is sushi."])
    assert a @ b > 0.7 and a @ b > a @ c + 0.3


def test_cache_returns_identical_rows_and_keeps_order(embedder):
    first = embedder.embed(["alpha beta", "gamma delta"])
    again = embedder.embed(["gamma delta", "alpha beta", "gamma delta"])
    np.testing.assert_array_equal(again[0], first[1])
    np.testing.assert_array_equal(again[1], first[0])
    np.testing.assert_array_equal(again[2], first[1])
    again[0, 0] = 42.0  # the caller's array is its own
    np.testing.assert_array_equal(embedder.embed(["gamma delta"])[0], first[1])


def test_single_text_is_refused_as_a_sequence(embedder):
    with pytest.raises(TypeError):
        embedder.embed("one text")
    assert embedder.embed_one("one text").shape == (EMBEDDING_DIM,)


def test_singleton_and_threads(embedder):
    assert get_embedder() is embedder
    out = {}
    threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, embedder.embed([f"text {i % 3}"])))
               for i in range(9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(out[0], out[3])
