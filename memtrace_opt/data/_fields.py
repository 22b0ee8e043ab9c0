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
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise DatasetError(
            str(path), None, f"not valid JSON: {err.msg} at line {err.lineno} column {err.colno}"
        ) from None
    except RecursionError:
        raise DatasetError(str(path), None, "JSON nested too deeply to be a dataset") from None
    except ValueError as err:  # e.g. an integer of more than 4300 digits
        raise DatasetError(str(path), None, f"not a usable JSON value: {err}") from None
    _check_strings(data, path)
    return data


def check_unique_ids(conversations: Any, path: str, field: str) -> None:
    """Every conversation id is non-empty and unique (two conversations sharing an id would share one graph
    file and one results entry); DatasetError naming the position(s) otherwise."""
    seen: dict[str, int] = {}
    for i, conv in enumerate(conversations):
        if not str(conv.id).strip():
            raise DatasetError(path, f"item {i}.{field}", "empty id")
        if conv.id in seen:
            raise DatasetError(path, f"item {i}.{field}", f"duplicate id {conv.id!r} (also item {seen[conv.id]})")
        seen[conv.id] = i


def _check_strings(data: Any, path: Path) -> None:
    """Every string is valid Unicode: a lone surrogate (a JSON escape like \\ud800) would load here and crash
    every later writer of graphs and results, so it is refused now, naming where it is."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise DatasetError(str(path), where or "top level",
                                   "text holds a lone UTF-16 surrogate (invalid Unicode)") from None
        elif isinstance(value, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in value.items())
            stack.extend((k, f"{where} key" if where else "key") for k in value if isinstance(k, str))
        elif isinstance(value, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(value))


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
