"""The ``memtrace-opt`` command line.

Each subcommand lives in its own module under :mod:`memtrace_opt.commands` and registers
itself on the shared Typer app; a command parses its options, calls one :mod:`memtrace_opt.run`
(or campaign, report) function and renders the typed result. Those calls, and every heavy import
(torch, mem0, llama.cpp, the loop), happen inside the command bodies so ``--help`` stays instant.
User errors surface as one line and an exit code.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Protocol

import typer

from memtrace_opt.errors import MemtraceError

if TYPE_CHECKING:
    from memtrace_opt.run.lms import Injected

COMMAND_MODULES: tuple[str, ...] = (
    "memtrace_opt.commands.version",
    "memtrace_opt.commands.init",
    "memtrace_opt.commands.data",
    "memtrace_opt.commands.systems",
    "memtrace_opt.commands.eval",
    "memtrace_opt.commands.trace",
    "memtrace_opt.commands.bench",
    "memtrace_opt.commands.optimize",
    "memtrace_opt.commands.compare",
    "memtrace_opt.commands.campaign",
    "memtrace_opt.commands.estimate",
    "memtrace_opt.commands.attribute",
    "memtrace_opt.commands.bench_attribution",
    "memtrace_opt.commands.bench_lm",
    "memtrace_opt.commands.bench_serve",
    "memtrace_opt.commands.serve",
    "memtrace_opt.commands.report",
    "memtrace_opt.commands.export",
)

app = typer.Typer(
    name="memtrace-opt",
    help="Trace, attribute and fix the failures of LLM memory systems.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for _module in COMMAND_MODULES:
    importlib.import_module(_module).register(app)


#: Exit code of an interrupted run (128 + SIGINT), never 0: a wrapper script must not count it a success.
INTERRUPTED = 130
_INTERRUPTED_LINE = "memtrace-opt: interrupted; finished work is checkpointed, rerun the same command to resume"


def main(argv: list[str] | None = None, *, injected: Injected | None = None) -> int:
    """Entry point: run the app, turning user errors into one line on stderr and a non-zero exit.

    ``injected`` hands the commands LM clients instead of the configured models (tests and embedding
    callers); the commands receive it as the click context object and pass it down explicitly.
    """
    try:
        # In non-standalone mode typer turns Ctrl-C into Exit(130) and *returns* that code.
        returned = app(args=argv, standalone_mode=False, obj=injected)
    except MemtraceError as err:
        print(f"memtrace-opt: {err.one_line()}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print(_INTERRUPTED_LINE, file=sys.stderr)
        return INTERRUPTED
    except typer.Exit as ex:
        return ex.exit_code
    except SystemExit as ex:  # click's own usage errors
        return int(ex.code or 0)
    except Exception as ex:  # usage errors: typer 0.29 vendors its own click copy
        usage, abort = _click_error_types()
        if isinstance(ex, usage):
            ex.show()
            return int(getattr(ex, "exit_code", 2))
        if isinstance(ex, abort):
            return 130
        raise
    if returned == INTERRUPTED:
        print(_INTERRUPTED_LINE, file=sys.stderr)
        return INTERRUPTED
    return returned if isinstance(returned, int) and not isinstance(returned, bool) else 0


class _UsageError(Protocol):
    """What :func:`main` uses of a ClickException, click's own or typer's vendored copy (unrelated classes)."""

    def show(self) -> None: ...


def _click_error_types() -> tuple[tuple[type[_UsageError], ...], tuple[type[Exception], ...]]:
    """Click's ClickException/Abort classes, both from click and from typer's vendored copy."""
    import click

    usage: list[type[_UsageError]] = [click.exceptions.ClickException]
    abort: list[type[Exception]] = [click.exceptions.Abort]
    try:
        from typer._click import exceptions as vendored

        usage.append(vendored.ClickException)
        if hasattr(vendored, "Abort"):
            abort.append(vendored.Abort)
    except ImportError:
        pass
    return tuple(usage), tuple(abort)


if __name__ == "__main__":
    sys.exit(main())
