"""How every command talks to its user: one convention, one place.

- **Result** on stdout: a rich table or tree by default, one JSON document with ``--json`` (so
  ``memtrace-opt X --json | jq`` always works: nothing else is ever printed on stdout then).
- **Progress** on stderr, one style for every long command: rich log lines with a timestamp
  (runs on a CPU model take minutes and must not be silent); ``--quiet`` silences them.
- **Summary**: one line at the end of every long command (stdout with a table, stderr with ``--json``).

Rich wraps to 80 columns when output is not a terminal, which squeezes a ten-column table into
unreadable ``tra…`` cells in a log file; piped output gets a wide console instead.
"""

from __future__ import annotations

import json
import sys
from typing import Any

__all__ = ["Reporter", "injected_lms", "stamped", "table_console"]

PIPED_WIDTH = 200


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else PIPED_WIDTH
    return Console(stderr=stderr, width=width, log_path=False, highlight=False)


def table_console() -> Any:
    """A rich Console on stdout: the terminal's width on a terminal, ``PIPED_WIDTH`` columns when piped."""
    return _console()


class Reporter:
    """A command's three channels (result, progress, summary) under the convention above."""

    def __init__(self, *, quiet: bool = False, as_json: bool = False) -> None:
        self.quiet, self.as_json = quiet, as_json
        self._err = _console(stderr=True)
        self._out = _console()

    def say(self, message: str) -> None:
        """A progress line on stderr, timestamped (nothing with ``--quiet``); never wrapped or padded, so a
        log file gets one line per event."""
        if not self.quiet:
            import time

            from rich.text import Text

            line = Text.assemble((time.strftime("[%H:%M:%S]"), "log.time"), " ", message)
            self._err.print(line, soft_wrap=True, highlight=False)

    @property
    def progress(self) -> Any:
        """``say`` as a callback for library code, or None with ``--quiet`` (library code then stays silent)."""
        return None if self.quiet else self.say

    def result(self, payload: Any, *renderables: Any) -> None:
        """The command's result: ``payload`` as JSON with ``--json``, else the rich ``renderables``."""
        if self.as_json:
            print(json.dumps(payload, indent=2, ensure_ascii=False, default=str))
            return
        for item in renderables:
            self._out.print(item, markup=not isinstance(item, str))

    def note(self, line: str) -> None:
        """A line that belongs with the result (a warning, a path written): stdout with a table, stderr with JSON."""
        (self._err if self.as_json else self._out).print(line, markup=False, soft_wrap=True)

    def summary(self, line: str) -> None:
        """The one-line summary a long command ends with."""
        self.note(line)


def injected_lms(injected: Any) -> dict[str, Any]:
    """The LM clients handed to ``cli.main(injected=...)`` (the click context object) as the ``lms=`` and
    ``resources=`` keywords of a :mod:`memtrace_opt.run` function; ``{}`` (the configured models) without."""
    return {} if injected is None else {"lms": injected.lms, "resources": injected.resources}


def stamped(message: str) -> None:
    """A progress line on stderr for code with no reporter at hand (the ``serve`` command's log)."""
    Reporter().say(message)
