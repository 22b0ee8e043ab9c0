"""Typed access to parsed JSON that fails with a :class:`DatasetError` naming file and item.

Loaders read third-party files; a ``KeyError: 'question'`` deep in a loop tells the user nothing.
These helpers turn every missing key or wrong type into one line that says which file, which
item (``conversation 2 (conv-41): qa[17]``) and what was expected.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from memtrace_opt.errors import DatasetError

_TYPE_NAMES = {str: "a string", int: "an integer", list: "a list", dict: "an object", bool: "a boolean"}
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")
_EVIDENCE_REF = re.compile(r"D:?(\d+):(\d+)")


def read_json(path: Path) -> Any:
    """Parse a JSON file; a missing file or bad JSON becomes a DatasetError naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError(str(path), None, "file not found; check --path") from None
    except (OSError, UnicodeDecodeError) as err:
        raise DatasetError(str(path), None, f"cannot read file: {err}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise DatasetError(
            str(path), None, f"not valid JSON: {err.msg} at line {err.lineno} column {err.colno}"
        ) from None


def _describe(expected: type | tuple[type, ...]) -> str:
    types = expected if isinstance(expected, tuple) else (expected,)
    return " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)


def check_type(value: Any, expected: type | tuple[type, ...], *, path: str, item: str, what: str) -> Any:
    """Return ``value`` if it has the expected type (bool never passes as int), else raise."""
    types = expected if isinstance(expected, tuple) else (expected,)
    if isinstance(value, bool) and bool not in types:
        ok = False
    else:
        ok = isinstance(value, types)
    if not ok:
        raise DatasetError(
            path, item, f"expected {_describe(expected)} for {what}, found {type(value).__name__}"
        )
    return value


def require(obj: dict[str, Any], key: str, expected: type | tuple[type, ...], *, path: str, item: str) -> Any:
    """``obj[key]`` checked for presence and type."""
    if key not in obj:
        raise DatasetError(path, item, f"missing '{key}'")
    return check_type(obj[key], expected, path=path, item=item, what=f"'{key}'")


def optional(
    obj: dict[str, Any], key: str, expected: type | tuple[type, ...], *, path: str, item: str, default: Any = None
) -> Any:
    """``obj[key]`` checked for type when present and not null, else ``default``."""
    if obj.get(key) is None:
        return default
    return check_type(obj[key], expected, path=path, item=item, what=f"'{key}'")


def as_text(value: Any) -> str:
    """Answers are sometimes ints or floats in the source (LoCoMo has six); compare them as text."""
    return value if isinstance(value, str) else str(value)


def split_evidence(raw: list[str]) -> list[str]:
    """Split evidence strings like ``"D8:6; D9:17"`` or ``"D9:1 D4:4"`` into single references."""
    return [tok for entry in raw for tok in _EVIDENCE_SPLIT.split(entry) if tok]


def normalise_ref(ref: str) -> str | None:
    """``D30:05`` → ``D30:5``, ``D:11:26`` → ``D11:26``; None when ``ref`` is not a turn reference."""
    match = _EVIDENCE_REF.fullmatch(ref)
    if match is None:
        return None
    return f"D{int(match[1])}:{int(match[2])}"
