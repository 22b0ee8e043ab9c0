"""A config's system settings and prompts checked against the system they are for.

Apart from the driver because they run before anything is driven: the run layer checks a config
up front (so a typo fails before a run directory exists), the driver checks again whatever a caller
passes, and ``bench-lm`` checks its ``--variant`` settings, all with the same message naming the
file (or option) and the dotted field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from memtrace_opt.errors import ConfigError
from memtrace_opt.systems.base import MemorySystem, SystemSettings

__all__ = ["resolve_prompts", "resolve_settings"]


def resolve_settings(
    system: type[MemorySystem], settings: Mapping[str, Any] | SystemSettings | None, *, source: str = "settings"
) -> SystemSettings:
    """Validate settings against the system's model; a bad key or value is a ConfigError naming ``source``
    (the config file, when there is one) and the dotted field."""
    if isinstance(settings, SystemSettings):
        return settings
    try:
        return system.settings_model(**dict(settings or {}))
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        where = ".".join(["system", "settings", *map(str, first["loc"])])
        raise ConfigError(source, where, f"{first['msg']} (system {system.name!r})") from None


def resolve_prompts(
    system: type[MemorySystem], prompts: Mapping[str, str] | None, *, source: str = "prompts"
) -> dict[str, str]:
    """The system's full prompt set with ``prompts`` overriding; an unknown component is a ConfigError."""
    full = system.prompts()
    unknown = sorted(set(prompts or {}) - set(full))
    if unknown:
        raise ConfigError(source, f"system.prompts.{unknown[0]}",
                          f"system {system.name!r} has no prompt component {unknown[0]!r}; known: {sorted(full)}")
    return {**full, **dict(prompts or {})}
