"""Number formatting for the report: percentages, counts, durations, all tolerant of missing values."""

from __future__ import annotations

from typing import Any

__all__ = ["count", "duration", "num", "pct"]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def pct(value: Any, digits: int = 1) -> str:
    """``0.6123`` → ``61.2%``; a missing value → an en dash."""
    v = _number(value)
    return "–" if v is None else f"{v * 100:.{digits}f}%"


def count(value: Any) -> str:
    """``12345`` → ``12,345``; large counts get a k/M suffix (``1.2M``)."""
    v = _number(value)
    if v is None:
        return "–"
    if abs(v) >= 1e6:
        return f"{v / 1e6:.1f}M"
    if abs(v) >= 1e5:
        return f"{v / 1e3:.0f}k"
    return f"{int(round(v)):,}"


def num(value: Any, digits: int = 3) -> str:
    """A metric value: ints as counts, floats with ``digits`` significant digits."""
    v = _number(value)
    if v is None:
        return "–" if value is None else str(value)
    if isinstance(value, int):
        return count(value)
    return f"{v:.{digits}g}"


def duration(seconds: Any) -> str:
    """``42`` → ``42 s``, ``200`` → ``3.3 min``, ``7300`` → ``2 h 02 min``."""
    v = _number(seconds)
    if v is None:
        return "–"
    if v < 90:
        return f"{v:.0f} s" if v >= 10 else f"{v:.1f} s"
    if v < 3600:
        return f"{v / 60:.1f} min"
    return f"{int(v // 3600)} h {int(v % 3600 // 60):02d} min"
