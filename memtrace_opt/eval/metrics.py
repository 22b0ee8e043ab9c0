"""Answer metrics of mem0's LoCoMo protocol, and the statistics to compare two runs honestly.

- ``token_f1``: F1 over token *sets* of the lower-cased, punctuation-stripped texts (mem0's
  ``calculate_metrics``; mem0 strips only ``.,!?``, we strip all punctuation so ``"Charlotte's"``
  and ``Charlotte's`` tokenise alike).
- ``bleu1``: nltk ``sentence_bleu`` with weights (1, 0, 0, 0) and smoothing method1, as mem0.
  mem0 tokenises with ``nltk.word_tokenize``, which needs the ``punkt`` data package (a download;
  it raises LookupError offline), so we use a regex word/punctuation tokenizer. It differs from
  word_tokenize only on contractions ("don't" → don ' t rather than do n't), a rounding-level
  difference for BLEU-1 on short answers.
- ``bootstrap_ci`` / ``paired_bootstrap``: with ~20-200 questions per run, a few points of
  accuracy are noise; every comparison the project reports carries an interval and a p-value.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "PairedComparison",
    "accuracy",
    "bleu1",
    "bootstrap_ci",
    "by_category",
    "normalize_tokens",
    "paired_bootstrap",
    "token_f1",
    "wordpunct_tokens",
]

_PUNCT = re.compile(r"[^\w\s]|_")
_WORDPUNCT = re.compile(r"\w+|[^\w\s]+")


def normalize_tokens(text: str) -> list[str]:
    """Lower-cased tokens with all punctuation replaced by spaces."""
    return _PUNCT.sub(" ", str(text).lower()).split()


def wordpunct_tokens(text: str) -> list[str]:
    """Lower-cased word and punctuation tokens (what BLEU-1 counts)."""
    return _WORDPUNCT.findall(str(text).lower())


def token_f1(prediction: str, gold: str) -> float:
    """Set-based token F1; 0.0 when either side has no tokens.

    >>> round(token_f1("the cat sat", "a cat sat down"), 4)
    0.5714
    """
    pred, ref = set(normalize_tokens(prediction)), set(normalize_tokens(gold))
    common = len(pred & ref)
    if not pred or not ref or common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def bleu1(prediction: str, gold: str) -> float:
    """Sentence BLEU-1 (brevity penalty times clipped unigram precision); 0.0 on empty input.

    >>> round(bleu1("the cat sat", "the cat sat on the mat"), 4)
    0.3679
    """
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    pred, ref = wordpunct_tokens(prediction), wordpunct_tokens(gold)
    if not pred or not ref:
        return 0.0
    return float(
        sentence_bleu([ref], pred, weights=(1, 0, 0, 0), smoothing_function=SmoothingFunction().method1)
    )


def accuracy(scores: Iterable[float]) -> float:
    """Mean of 0/1 scores; 0.0 for no scores (an empty run is not "perfect")."""
    values = list(scores)
    return float(sum(values) / len(values)) if values else 0.0


def by_category(pairs: Iterable[tuple[str, float]]) -> dict[str, dict[str, float]]:
    """Per-category mean and count of (category, value) pairs, categories in first-seen order."""
    groups: dict[str, list[float]] = defaultdict(list)
    for category, value in pairs:
        groups[category].append(value)
    return {c: {"mean": accuracy(v), "n": len(v)} for c, v in groups.items()}


def bootstrap_ci(
    values: Sequence[float], n: int = 2000, seed: int = 0, level: float = 0.95
) -> tuple[float, float, float]:
    """(mean, low, high): the percentile bootstrap interval of the mean.

    Deterministic for a given seed, so a re-rendered report shows the same numbers.
    """
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return (0.0, 0.0, 0.0)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(n, data.size))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return (float(data.mean()), float(low), float(high))


@dataclass(frozen=True)
class PairedComparison:
    """B minus A on the same questions: mean difference, its CI, and a two-sided p-value."""

    mean_diff: float
    ci_low: float
    ci_high: float
    p_value: float
    n: int


def paired_bootstrap(
    a: Sequence[float] | Mapping[str, float],
    b: Sequence[float] | Mapping[str, float],
    n: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> PairedComparison:
    """Paired bootstrap of mean(b - a) over the same questions.

    Pass two sequences aligned by position or two mappings keyed by question id (they must
    hold the same ids: comparing runs on different questions is the mistake this guards
    against). The p-value uses the null-centred differences (Efron & Tibshirani, §16.4) and
    counts the observed statistic, so it is never exactly 0: (k + 1) / (n + 1).
    """
    diffs = _paired_diffs(a, b)
    if diffs.size == 0:
        raise ValueError("paired_bootstrap needs at least one paired value")
    observed = float(diffs.mean())
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, diffs.size, size=(n, diffs.size))
    boot = diffs[idx].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(boot, [tail, 100 - tail])
    null = (diffs - observed)[idx].mean(axis=1)
    extreme = int(np.sum(np.abs(null) >= abs(observed) - 1e-12))
    return PairedComparison(observed, float(low), float(high), (extreme + 1) / (n + 1), int(diffs.size))


def _paired_diffs(a: Sequence[float] | Mapping[str, float], b: Sequence[float] | Mapping[str, float]) -> np.ndarray:
    if isinstance(a, Mapping) != isinstance(b, Mapping):
        raise TypeError("pass two sequences or two mappings keyed by question id, not one of each")
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
        if only_a or only_b:
            raise ValueError(f"runs cover different questions: only in a {only_a[:5]}, only in b {only_b[:5]}")
        keys = sorted(a)
        return np.array([b[k] - a[k] for k in keys], dtype=float)
    if len(a) != len(b):
        raise ValueError(f"paired runs differ in length: {len(a)} vs {len(b)}")
    diffs: np.ndarray = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    return diffs
