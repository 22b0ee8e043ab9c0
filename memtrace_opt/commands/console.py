"""The console the commands print their tables on.

Rich wraps to 80 columns when output is not a terminal, which squeezes a ten-column table into
unreadable ``tra…`` cells in a log file; piped output gets a wide console instead.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["stamped", "table_console"]

PIPED_WIDTH = 200


def table_console() -> Any:
    """A rich Console: the terminal's width on a terminal, ``PIPED_WIDTH`` columns when piped."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=PIPED_WIDTH)


def stamped(message: str) -> None:
    """A progress line on stderr, timestamped: runs with a CPU model take minutes and must not be silent."""
    import time

    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
