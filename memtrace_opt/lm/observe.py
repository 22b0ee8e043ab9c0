"""Let another component see every LM call made inside a block, without touching the call sites.

The graph tracer wraps each operation in :func:`observe_calls` and attaches the LM calls made
inside it to that operation. The set of active observers lives in a context variable, so it
follows the current thread (and asyncio task), and costs one ``ContextVar.get`` per call when
nothing observes. Worker threads do not inherit it: submit work with
``contextvars.copy_context().run`` when their calls must be seen.

Nested blocks all receive a call (like nested log handlers) unless the inner one is
``exclusive``, in which case calls inside it reach only it — what a tracer wants when each call
belongs to the innermost operation.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

from memtrace_opt.lm.base import LMResult

__all__ = ["observe_calls", "notify", "CallObserver"]

logger = logging.getLogger(__name__)


@dataclass
class CallObserver:
    """What :func:`observe_calls` yields: the calls seen so far, in order."""

    calls: list[LMResult] = field(default_factory=list)
    callback: Callable[[LMResult], None] | None = None


_active: ContextVar[tuple[CallObserver, ...]] = ContextVar("memtrace_lm_observers", default=())


@contextlib.contextmanager
def observe_calls(
    callback: Callable[[LMResult], None] | None = None, *, exclusive: bool = False
) -> Iterator[list[LMResult]]:
    """Collect every :class:`LMResult` made in this context while the block runs.

    Yields the list the results are appended to. ``callback``, if given, is also called with each
    result; a callback that raises is logged and does not fail the LM call it observes.
    """
    observer = CallObserver(callback=callback)
    outer = () if exclusive else _active.get()
    token = _active.set((*outer, observer))
    try:
        yield observer.calls
    finally:
        _active.reset(token)


def notify(result: LMResult) -> None:
    """Deliver ``result`` to the active observers; called once per LM call by ``AccountedLM``."""
    observers = _active.get()
    if not observers:
        return
    for observer in observers:
        observer.calls.append(result)
        if observer.callback is not None:
            try:
                observer.callback(result)
            except Exception:
                logger.exception("an LM call observer raised; the call itself succeeded")
