"""Rendering the configuration reference: walk the config models, one table per section.

Every key of a run config is a field of :class:`memtrace_opt.config.RunConfig` or of one of its sections,
and every ``system.settings`` key a field of a built-in system's ``settings_model``. This module walks
those models and writes one table per section: key, type, default, meaning. The meaning is the field's
``Field(description=...)`` or, failing that, the ``#:`` comment right above the field in its class
(the Sphinx attribute-doc convention the config modules use). ``tests/test_config_docs.py`` checks that
the committed file is what this module renders and that every field has a meaning, so a new key
without a comment, or a changed default, fails the suite until the reference is regenerated::

    python -m memtrace_opt.configdoc --out docs/configuration.md     # regenerate
    python -m memtrace_opt.configdoc --check docs/configuration.md   # exit 1 when stale
"""

from __future__ import annotations

import argparse
import ast
import inspect
import re
import sys
import textwrap
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from pydantic import AfterValidator, BaseModel
from pydantic.fields import FieldInfo

from memtrace_opt.config import RunConfig
from memtrace_opt.lm.config import ModelConfig
from memtrace_opt.systems.registry import KNOWN_SYSTEMS, get_system

__all__ = ["FieldDoc", "Section", "field_docs", "main", "render", "sections"]

COMMAND = "python -m memtrace_opt.configdoc --out docs/configuration.md"

_INTRO = """\
# Configuration reference

One YAML file describes a run; `memtrace-opt eval`, `optimize`, `attribute` and `campaign` read it, and
a run directory keeps a fully resolved copy (`config.yaml`: defaults filled, paths absolute). Every
section rejects unknown keys, so a misspelt key is an error naming the file and the dotted field, never
a silently ignored setting. Relative paths are resolved against the config file's own directory, so a
config works from any working directory. Only `run_name` and `system.name` are required.

A complete example is [`experiments/configs/quickstart.yaml`](../experiments/configs/quickstart.yaml);
the per-system configs beside it (`<system>_mini.yaml`, `<system>_locomo.yaml`) are shorter.

This file is generated from the config models (`memtrace_opt/config.py`, `memtrace_opt/lm/config.py`
and each system's settings model) by `{command}`; a test fails when it is stale.
Types: *integer > 0* and similar are enforced bounds; *path* is resolved against the config file;
*or null* means the key may be left out. A system of your own takes the `system.settings` keys of its
`settings_model` ([docs/own-system.md](own-system.md)); `memtrace-opt systems` lists every system's defaults.
"""


@dataclass(frozen=True)
class FieldDoc:
    """One row of the reference: the dotted key, its type and default as text, and what it means."""

    key: str
    type: str
    default: str
    meaning: str


@dataclass(frozen=True)
class Section:
    """One table: a heading, the model's own description, and its rows."""

    title: str
    anchor: str
    intro: str
    rows: tuple[FieldDoc, ...]


# -- reading a model ---------------------------------------------------------------------------------
def _attribute_comments(cls: type) -> dict[str, str]:
    """``{field: text}`` from the ``#:`` comment lines right above each annotated field of ``cls``'s body."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    body = ast.parse(source).body[0]
    found: dict[str, str] = {}
    for node in getattr(body, "body", []):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        comment: list[str] = []
        i = node.lineno - 2
        while i >= 0 and lines[i].strip().startswith("#:"):
            comment.insert(0, lines[i].strip()[2:].strip())
            i -= 1
        if comment:
            found[node.target.id] = " ".join(comment)
    return found


def _comments(model: type[BaseModel]) -> dict[str, str]:
    """Attribute comments of ``model`` and its bases (a subclass's comment wins)."""
    merged: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if isinstance(cls, type) and issubclass(cls, BaseModel) and cls is not BaseModel:
            merged.update(_attribute_comments(cls))
    return merged


def _rst_to_md(text: str) -> str:
    """Sphinx markup to Markdown: roles become code spans, double backquotes single ones.

    >>> _rst_to_md("see :class:`~a.B` and ``x: 1``")
    'see `B` and `x: 1`'
    """
    text = re.sub(r":[a-z]+:`~[\w.]*\.(\w+)`", r"`\1`", text)
    text = re.sub(r":[a-z]+:`([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def _docstring(model: type[BaseModel]) -> str:
    doc = model.__dict__.get("__doc__")
    return _rst_to_md(inspect.cleandoc(doc)) if doc else ""


# -- types and defaults as text ----------------------------------------------------------------------
def _bounds(metadata: list[Any]) -> list[str]:
    out: list[str] = []
    for item in metadata:
        if isinstance(item, FieldInfo):
            out += _bounds(list(item.metadata))
        elif isinstance(item, Gt):
            out.append(f"> {item.gt}")
        elif isinstance(item, Ge):
            out.append(f"≥ {item.ge}")
        elif isinstance(item, Lt):
            out.append(f"< {item.lt}")
        elif isinstance(item, Le):
            out.append(f"≤ {item.le}")
        elif isinstance(item, MinLen):
            out.append(f"at least {item.min_length}")
        elif isinstance(item, MaxLen):
            out.append(f"at most {item.max_length}")
    return out


def _is_path(metadata: list[Any]) -> bool:
    return any(isinstance(m, AfterValidator) and getattr(m.func, "__name__", "") == "_resolve" for m in metadata)


def type_text(annotation: Any, metadata: list[Any] | None = None) -> str:
    """A field's type in words: ``integer > 0``, ``one of `a`, `b` ``, ``path or null``, ``list of string``.

    >>> type_text(int | None, [])
    'integer or null'
    >>> type_text(list[Literal["demos", "rules"]])
    'list of `demos`, `rules`'
    """
    meta = list(metadata or [])
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        base, *extra = typing.get_args(annotation)
        return type_text(base, meta + list(extra))
    if origin in (Union, types.UnionType):
        args = typing.get_args(annotation)
        kinds = [type_text(a, meta) for a in args if a is not type(None)]
        return " or ".join(kinds) + (" or null" if type(None) in args else "")
    if origin is Literal:
        return "one of " + ", ".join(f"`{v}`" for v in typing.get_args(annotation))
    if origin is list:
        (item,) = typing.get_args(annotation) or (Any,)
        inner = type_text(item)
        text = f"list of {inner.removeprefix('one of ')}"
        bounds = _bounds(meta)
        return text + (f" ({', '.join(bounds)})" if bounds else "")
    if origin is dict or annotation is dict:
        return "mapping"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    path = _is_path(meta)
    names = {int: "integer", float: "number", bool: "true or false", Path: "path", str: "string"}
    base = "path or URL" if path and annotation is str else str(names.get(annotation, getattr(annotation, "__name__",
                                                                                                   annotation)))
    if annotation is Any:
        base = "any"
    bounds = [b for b in _bounds(meta) if not (annotation is str and b.startswith("at least"))]
    return base + (" " + ", ".join(bounds) if bounds else "")


def _value_text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Path):
        try:
            return value.relative_to(Path.cwd()).as_posix()
        except ValueError:
            return value.as_posix()
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_value_text(v)}" for k, v in value.items()) + "}"
    return str(value)


def default_text(info: FieldInfo) -> str:
    """The default as a config would spell it: ``required``, ``null``, ``[demos, rules, lines]``, ``(section)``."""
    if info.is_required():
        return "required"
    # no factory here reads the other fields (pydantic's validated_data), so an empty mapping suffices
    value = info.get_default(call_default_factory=True, validated_data={})
    if isinstance(value, BaseModel):
        return "(section)"
    return f"`{_value_text(value)}`"


# -- the sections ------------------------------------------------------------------------------------
def field_docs(model: type[BaseModel], prefix: str) -> list[FieldDoc]:
    """One row per field of ``model``, keys prefixed with ``prefix`` (``optimizer.``)."""
    comments = _comments(model)
    rows = []
    for name, info in model.model_fields.items():
        meaning = info.description or comments.get(name, "")
        rows.append(FieldDoc(f"{prefix}{name}", type_text(info.annotation, list(info.metadata)), default_text(info),
                             _rst_to_md(meaning)))
    return rows


def _section_models() -> list[tuple[str, str, type[BaseModel]]]:
    """``(key prefix, title, model)`` for every section of a run config, in the order a config lists them."""
    out: list[tuple[str, str, type[BaseModel]]] = [("", "Top level", RunConfig)]
    for name, info in RunConfig.model_fields.items():
        model = _model_of(info.annotation)
        if model is None:
            continue
        out.append((f"{name}.", f"`{name}`", model))
        if name == "models":
            out.append(("models.<role>.", "`models.<role>` (each of `task`, `judge`, `reflection`)", ModelConfig))
    return out


def _model_of(annotation: Any) -> type[BaseModel] | None:
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _system_settings() -> list[tuple[str, type[BaseModel]]]:
    """``(system name, settings model)`` for each built-in system, from the system registry."""
    return [(name, get_system(name).settings_model) for name in KNOWN_SYSTEMS]


def sections() -> list[Section]:
    """Every table of the reference: the run config's sections, then each built-in system's settings."""
    out = []
    for prefix, title, model in _section_models():
        rows = field_docs(model, prefix)
        if not prefix:  # the top level: a section's row points at its own table
            rows = [_pointer(r) for r in rows]
        out.append(Section(title, _anchor(prefix or "top-level"), _docstring(model), tuple(rows)))
    for name, model in _system_settings():
        out.append(Section(f"`system.settings` of `{name}` ({model.__name__})", _anchor(f"settings-{name}"),
                           _docstring(model), tuple(field_docs(model, "system.settings."))))
    return out


def _pointer(row: FieldDoc) -> FieldDoc:
    if not row.type.startswith("section"):
        return row
    link = f"the [`{row.key}`](#{_anchor(row.key + '.')}) section"
    return FieldDoc(row.key, row.type, row.default, f"{link}: {row.meaning}" if row.meaning else link)


def _anchor(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render() -> str:
    """The whole reference as Markdown (what ``docs/configuration.md`` holds)."""
    parts = [_INTRO.format(command=COMMAND)]
    every = sections()
    parts.append("Sections: " + " · ".join(f"[{s.title}](#{s.anchor})" for s in every) + "\n")
    for section in every:
        parts.append(f'<a id="{section.anchor}"></a>\n\n## {section.title}\n')
        if section.intro:
            parts.append(section.intro + "\n")
        parts.append("| key | type | default | meaning |\n| --- | --- | --- | --- |")
        parts.extend(f"| `{r.key}` | {_cell(r.type)} | {_cell(r.default)} | {_cell(r.meaning)} |" for r in section.rows)
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m memtrace_opt.configdoc [--out FILE | --check FILE]``: print, write or check the reference."""
    parser = argparse.ArgumentParser(prog="python -m memtrace_opt.configdoc", description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--out", type=Path, help="write the reference to this file")
    group.add_argument("--check", type=Path, help="exit 1 when this file differs from the generated reference")
    args = parser.parse_args(argv)
    text = render()
    if args.out:
        args.out.write_text(text, encoding="utf-8")
        return 0
    if args.check:
        current = args.check.read_text(encoding="utf-8") if args.check.exists() else ""
        if current != text:
            print(f"{args.check} is stale: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(text)
    return 0

