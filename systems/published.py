"""Published seed prompts: each system's prompts as its authors ship them, as a second starting point.

An optimizer's gain depends on where it starts. The project's own seed prompts were written for the
embedded 1.5B model; a user who starts from a library's defaults starts elsewhere, and the reference
optimizes exactly those. ``system: {seed: published}`` in a run config starts from the texts below
instead of the project's, component by component; ``system.prompts`` still overrides either.

Only text a user can install is used, read from the installed package at run time (never copied
into this project), so the seed is exactly what that release ships:

- **mem0** (mem0ai 1.0.x): its fact-extraction and update-decision prompts (the project's defaults
  already are these, see :mod:`.mem0_prompts`) and ``MEMORY_ANSWER_PROMPT``, the answer prompt
  mem0ai ships (``mem0.configs.prompts``). mem0's LoCoMo *evaluation* answer prompt lives only in
  mem0's repository, not in any package; paste it into ``system.prompts.question_answering`` to
  start from it.
- **long_context**, **rag**: the shared answer op with mem0ai's ``MEMORY_ANSWER_PROMPT`` (neither
  system has a library of its own; mem0's is the published memory-answering prompt on PyPI).
- **evermemos**: none — the ``evermemos`` package on PyPI is an API client that ships no prompts, so
  asking for its published seed is a config error rather than a silent fallback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from memtrace_opt.errors import ConfigError

__all__ = ["PublishedPrompt", "published_prompts", "published_sources"]


@dataclass(frozen=True)
class PublishedPrompt:
    """Where one published component comes from, and how to read it from the installed package."""

    component: str
    source: str
    read: Callable[[], str]


def _mem0_answer() -> str:
    from memtrace_opt.systems.mem0_prompts import load_mem0

    return str(load_mem0().prompts.MEMORY_ANSWER_PROMPT).strip()


def _mem0_ingestion(component: str) -> Callable[[], str]:
    """mem0's own ingestion prompt: the Mem0 system's defaults already are the published text."""
    def read() -> str:
        from memtrace_opt.systems.registry import get_system

        return get_system("mem0").default_prompts[component]
    return read


_ANSWER = PublishedPrompt("question_answering", "mem0ai 1.0.x mem0.configs.prompts.MEMORY_ANSWER_PROMPT", _mem0_answer)

#: System name -> its published components (a system absent here has none).
_PUBLISHED: Mapping[str, tuple[PublishedPrompt, ...]] = {
    "mem0": (
        PublishedPrompt("fact_extraction", "mem0ai 1.0.x USER_MEMORY_EXTRACTION_PROMPT (date as a slot)",
                        _mem0_ingestion("fact_extraction")),
        PublishedPrompt("memory_update", "mem0ai 1.0.x DEFAULT_UPDATE_MEMORY_PROMPT", _mem0_ingestion("memory_update")),
        _ANSWER,
    ),
    "long_context": (_ANSWER,),
    "rag": (_ANSWER,),
}


def published_sources(system: str) -> dict[str, str]:
    """``{component: where its published text comes from}``; empty when the system ships none."""
    return {p.component: p.source for p in _PUBLISHED.get(system, ())}


def published_prompts(system: str, *, source: str = "config") -> dict[str, str]:
    """``{component: published text}`` read from the installed packages.

    A system with no published prompts is a :class:`ConfigError` on ``system.seed`` (``source`` names
    the config file), so a run never silently starts from the project's seed when it asked for another.
    """
    entries = _PUBLISHED.get(system)
    if not entries:
        raise ConfigError(source, "system.seed", f"system {system!r} has no published prompts on PyPI to start "
                          f"from (published seeds exist for {sorted(_PUBLISHED)}); use seed: project")
    return {p.component: p.read() for p in entries}
