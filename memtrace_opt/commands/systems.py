"""``memtrace-opt systems``: which memory systems exist, their prompt components and default settings.

What a config's ``system.name``, ``system.prompts`` and ``system.settings`` may say, as a table (or
JSON with ``--json``), so a user (or a script) can write a config without reading the source.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer


def describe_systems() -> list[dict[str, Any]]:
    """``[{name, module, prompts, published_seed, settings, answer_op, ops, ops_without_prompt,
    unoptimizable_lm_ops}]``, by name.

    ``published_seed`` maps each component ``system: {seed: published}`` replaces to the package text
    it is read from (empty: the system ships none).

    ``ops`` are the operations registered by the system's module (the shared answer op included when
    it is the system's); ``ops_without_prompt`` cannot be optimized if they call an LM;
    ``unoptimizable_lm_ops`` are those this process has seen calling one (see ``OpContext.chat``).
    """
    from memtrace_opt.graph.ops import REGISTRY, UNOPTIMIZABLE_LM_OPS
    from memtrace_opt.systems.published import published_sources
    from memtrace_opt.systems.registry import get_system, system_names

    out = []
    for name in system_names():
        cls = get_system(name)
        ops = sorted(n for n, spec in REGISTRY.items()
                     if spec.fn.__module__.startswith(cls.__module__) or n == cls.answer_op)
        out.append({"name": name, "module": cls.__module__, "prompts": sorted(cls.prompts()),
                    "published_seed": published_sources(name),
                    "settings": cls.settings_model().model_dump(mode="json"), "answer_op": cls.answer_op,
                    "ops": ops, "ops_without_prompt": [n for n in ops if REGISTRY[n].prompt is None],
                    "unoptimizable_lm_ops": sorted(set(ops) & UNOPTIMIZABLE_LM_OPS)})
    return out


def register(app: typer.Typer) -> None:
    """Add the ``systems`` command to the CLI."""

    @app.command("systems")
    def systems(
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    ) -> None:
        """List the memory systems with their prompt components and default settings."""
        from rich.table import Table

        from memtrace_opt.commands.console import Reporter

        described = describe_systems()
        table = Table(title="memory systems")
        for column in ("system", "prompt components", "published seed (seed: published)", "default settings"):
            table.add_column(column)
        for row in described:
            settings = ", ".join(f"{k}={v}" for k, v in (row.get("settings") or {}).items())
            published = ", ".join(sorted(row.get("published_seed") or {})) or "-"
            table.add_row(row["name"], ", ".join(row.get("prompts") or []), published, settings or "-")
        Reporter(as_json=as_json).result(described, table)
