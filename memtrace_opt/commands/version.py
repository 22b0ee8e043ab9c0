"""``memtrace-opt --version``: which release is installed, for bug reports and for checking an upgrade took.

The version comes from the installed distribution's metadata (what pip installed), not from a
constant in the source, so a stale checkout on ``sys.path`` cannot report the wrong release.
"""

from __future__ import annotations

from importlib import metadata
from typing import Annotated

import typer

__all__ = ["DISTRIBUTION", "register", "version_line"]

#: The distribution name in pyproject.toml (``memtrace_opt`` is only the import name).
DISTRIBUTION = "memtrace-opt"


def version_line() -> str:
    """``memtrace-opt X.Y.Z``; run from a source tree that was never installed, it says so."""
    try:
        return f"{DISTRIBUTION} {metadata.version(DISTRIBUTION)}"
    except metadata.PackageNotFoundError:
        from memtrace_opt import __version__

        return f"{DISTRIBUTION} {__version__} (source tree, not installed)"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(version_line())
        raise typer.Exit(0)


def register(app: typer.Typer) -> None:
    """Add the top-level ``--version`` option (eager: it answers before any subcommand is parsed)."""

    @app.callback()
    def _root(
        version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_print_version,
                                              help="Print the installed version and exit.")] = False,
    ) -> None:
        """Trace, attribute and fix the failures of LLM memory systems."""
