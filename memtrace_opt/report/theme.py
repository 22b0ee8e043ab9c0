"""Colours and names shared by every chart, graph and legend, so one error type looks the same everywhere.

Error types use the Okabe-Ito palette (distinguishable with the common colour-vision deficiencies);
the blamed operation's outline is a red used for nothing else.
"""

from __future__ import annotations

from typing import Iterable

from memtrace_opt.attribution.blame import ERROR_TYPES

__all__ = [
    "ATTRIBUTION_FAILED", "BLAME_RED", "ERROR_COLORS", "ERROR_HELP", "METHOD_COLORS", "error_color", "error_order",
    "method_color", "short_error",
]

ERROR_COLORS: dict[str, str] = {
    "ExtractionError": "#E69F00",
    "UpdateError": "#56B4E9",
    "DeletionError": "#CC79A7",
    "RetrievalError": "#009E73",
    "ResponseError": "#0072B2",
    "AnnotationError": "#8A8A8A",
    "JudgeError": "#B59F00",
}
UNKNOWN_COLOR = "#5B6472"
#: The label of a blame whose method gave no error type (shown, counted, never dropped).
ATTRIBUTION_FAILED = "AttributionFailed"

#: One line per error type, for legends: what a newcomer needs to read the colour.
ERROR_HELP: dict[str, str] = {
    "ExtractionError": "the fact never entered any memory unit",
    "UpdateError": "a memory unit held it; a later update lost or garbled it",
    "DeletionError": "a memory unit holding it was deleted",
    "RetrievalError": "the store held it; the retrieved context did not",
    "ResponseError": "the context had it; the answer was still wrong",
    "AnnotationError": "the gold answer or evidence is wrong",
    "JudgeError": "the judge scored a right answer as wrong",
    ATTRIBUTION_FAILED: "the attribution method gave no answer",
}

BLAME_RED = "#DC2626"

METHOD_COLORS: tuple[str, ...] = (
    "#2563EB", "#D97706", "#059669", "#9333EA", "#DB2777", "#0891B2", "#65A30D", "#475569",
)


def error_color(error_type: str | None) -> str:
    """The colour of ``error_type`` (a neutral slate for an unknown or missing type)."""
    return ERROR_COLORS.get(error_type or "", UNKNOWN_COLOR)


def error_order(types: Iterable[str]) -> list[str]:
    """``types`` in the taxonomy's order (memory errors first), unknown types after, alphabetically."""
    present = set(types)
    known = [t for t in ERROR_TYPES if t in present]
    return known + sorted(present - set(ERROR_TYPES))


def short_error(error_type: str | None) -> str:
    """``UpdateError`` → ``Update``: the label used where space is tight."""
    if not error_type:
        return "unattributed"
    return error_type[:-5] if error_type.endswith("Error") and len(error_type) > 5 else error_type


def method_color(index: int) -> str:
    """The colour of the ``index``-th optimization method in a chart."""
    return METHOD_COLORS[index % len(METHOD_COLORS)]
