"""``memtrace-opt systems``: which memory systems exist, their prompt components and default settings.

What a config's ``system.name``, ``system.prompts`` and ``system.settings`` may say, as JSON, so a
user (or a script) can write a config without reading the source.
"""

from __future__ import annotations

import json
from typing import Any

import typer


def describe_systems() -> list[dict[str, Any]]:
    """``[{name, prompts: [component names], settings: {name: default}}]``, sorted by name."""
    from memtrace_opt.systems.registry import get_system, system_names

    out = []
    for name in system_names():
        cls = get_system(name)
        out.append({"name": name, "prompts": sorted(cls.prompts()),
                    "settings": cls.settings_model().model_dump(mode="json")})
    return out


def register(app: typer.Typer) -> None:
    """Add the ``systems`` command to the CLI."""

    @app.command("systems")
    def systems() -> None:
        """List the memory systems with their prompt components and default settings (JSON)."""
        typer.echo(json.dumps(describe_systems(), indent=2))
