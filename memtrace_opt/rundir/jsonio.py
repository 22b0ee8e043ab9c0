"""The one way a run directory's JSON files are written and read.

Every writer goes through :func:`write_json` (atomic: a reader, a resumed run or the report sees the
old file or the new one, never half of one; indented UTF-8 with a final newline, so files diff well in
git), every reader through :func:`read_json` (a missing, unparsable or non-UTF-8 file is one
DatasetError naming the file). What a file's payload must look like is its schema's business
(:mod:`.schemas`), not the reader's.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> read_json(write_json(d / "x.json", {"a": [1, "é"]}))
{'a': [1, 'é']}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeAlias

from memtrace_opt.atomic import atomic_write_text
from memtrace_opt.errors import DatasetError

__all__ = ["JSONObject", "JSONValue", "read_json", "read_object", "write_json", "write_text"]

#: A parsed JSON document (what :func:`json.loads` returns), spelled out so signatures need no ``Any``.
JSONValue: TypeAlias = "str | int | float | bool | None | list[JSONValue] | dict[str, JSONValue]"
JSONObject: TypeAlias = "dict[str, JSONValue]"


def write_json(path: str | Path, data: object) -> Path:
    """Write ``data`` as JSON atomically, indented, UTF-8; values JSON cannot hold are written as ``str()``."""
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"
    return atomic_write_text(path, text)


def write_text(path: str | Path, text: str) -> Path:
    """Write a run directory's text file (a prompt, a diff) atomically."""
    return atomic_write_text(path, text)


def read_json(path: str | Path) -> JSONValue:
    """Read a JSON file of a run; DatasetError naming the file when missing or unparsable."""
    p = Path(path)
    try:
        parsed: JSONValue = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(str(p), None, "file not found (is this a run directory?)") from None
    except json.JSONDecodeError as err:
        raise DatasetError(str(p), None, f"not valid JSON: {err.msg} at line {err.lineno}") from None
    except UnicodeDecodeError as err:
        raise DatasetError(str(p), None, f"not UTF-8 text (byte {err.start})") from None
    return parsed


def read_object(path: str | Path) -> JSONObject:
    """:func:`read_json` of a file whose top level must be an object (DatasetError naming the file otherwise)."""
    parsed = read_json(path)
    if not isinstance(parsed, dict):
        raise DatasetError(str(path), "top level", f"expected a JSON object, got {type(parsed).__name__}")
    return parsed
