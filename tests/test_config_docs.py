"""docs/configuration.md is generated from the config models: committed text, every key, every meaning."""

from __future__ import annotations

import typing
from pathlib import Path

from pydantic import BaseModel

from memtrace_opt.config import RunConfig
from memtrace_opt.configdoc import COMMAND, main, render, sections
from memtrace_opt.lm.config import ModelConfig
from memtrace_opt.systems.registry import KNOWN_SYSTEMS, get_system

DOC = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def test_the_committed_reference_is_the_generated_one():
    assert DOC.read_text(encoding="utf-8") == render(), f"docs/configuration.md is stale: run `{COMMAND}`"


def _section_fields(model: type[BaseModel], prefix: str) -> set[str]:
    """Every dotted key of ``model``, walking into its section models independently of the generator."""
    keys = set()
    for name, info in model.model_fields.items():
        keys.add(f"{prefix}{name}")
        for candidate in (info.annotation, *typing.get_args(info.annotation)):
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                if candidate is ModelConfig:
                    continue  # one table for the three roles: models.<role>.*
                keys |= _section_fields(candidate, f"{prefix}{name}.")
    return keys


def test_every_field_of_every_section_and_system_has_a_row_with_a_meaning():
    rows = [row for section in sections() for row in section.rows]
    keys = {row.key for row in rows}
    expected = _section_fields(RunConfig, "") | {f"models.<role>.{name}" for name in ModelConfig.model_fields}
    assert expected <= keys, sorted(expected - keys)
    text = DOC.read_text(encoding="utf-8")
    for name in KNOWN_SYSTEMS:  # each built-in system's settings, from the registry
        model = get_system(name).settings_model
        table = text.split(f"## `system.settings` of `{name}` ({model.__name__})", 1)[1].split("\n## ", 1)[0]
        for field in model.model_fields:
            assert f"| `system.settings.{field}` |" in table, (name, field)
    assert not [row.key for row in rows if not row.meaning.strip()], "a field lacks Field(description=) or a #: comment"


def test_the_defaults_are_the_models_defaults():
    rows = {row.key: row for section in sections() for row in section.rows}
    assert rows["optimizer.rounds"].default == "`3`" and rows["run_name"].default == "required"
    assert rows["output_dir"].default == "`runs`" and rows["optimizer.deltas"].default == "`[demos, rules, lines]`"
    assert rows["models.<role>.provider"].type == "one of `embedded`, `litellm`, `openai_compatible`"
    assert rows["dataset.max_sessions"].type == "integer > 0 or null"


def test_check_mode_reports_a_stale_file(tmp_path, capsys):
    stale = tmp_path / "configuration.md"
    stale.write_text("old\n")
    assert main(["--check", str(stale)]) == 1 and COMMAND in capsys.readouterr().err
    assert main(["--out", str(stale)]) == 0 and main(["--check", str(stale)]) == 0
