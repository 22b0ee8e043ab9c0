"""Memory systems by name: what a config's ``system.name`` resolves to.

Systems register themselves with :func:`register_system` when their module is imported; the
registry imports the known system modules lazily, on the first lookup, so importing memtrace-opt
never pulls in mem0 or faiss. A third-party system registers by importing its module before the
lookup.

>>> from memtrace_opt.systems.registry import get_system
>>> get_system("long_context").name
'long_context'
"""

from __future__ import annotations

import importlib
from typing import TypeVar

from memtrace_opt.errors import ConfigError
from memtrace_opt.systems.base import MemorySystem

__all__ = ["KNOWN_SYSTEMS", "get_system", "register_system", "system_names"]

#: System name -> the module that registers it (imported on first lookup).
KNOWN_SYSTEMS: dict[str, str] = {
    "long_context": "memtrace_opt.systems.long_context",
    "rag": "memtrace_opt.systems.rag",
    "mem0": "memtrace_opt.systems.mem0_system",
    "evermemos": "memtrace_opt.systems.evermemos",
}

_REGISTRY: dict[str, type[MemorySystem]] = {}

S = TypeVar("S", bound=type[MemorySystem])


def register_system(cls: S) -> S:
    """Class decorator: make ``cls`` available as ``get_system(cls.name)``."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"{cls.__qualname__} must set a class attribute `name` to register as a memory system")
    existing = _REGISTRY.get(name)
    if existing is not None and existing.__qualname__ != cls.__qualname__:
        raise TypeError(f"memory system {name!r} registered twice ({existing.__qualname__}, {cls.__qualname__})")
    _REGISTRY[name] = cls
    return cls


def _import_known(name: str) -> None:
    """Import the module of known system ``name``; a module not written yet is simply absent."""
    module = KNOWN_SYSTEMS[name]
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name != module:  # the module exists but one of its own imports is missing: a real error
            raise


def system_names() -> list[str]:
    """Names of every available system (known modules that exist, plus any registered by hand)."""
    for name in KNOWN_SYSTEMS:
        if name not in _REGISTRY:
            _import_known(name)
    return sorted(_REGISTRY)


def get_system(name: str) -> type[MemorySystem]:
    """The system class registered as ``name``; ConfigError listing the available names otherwise."""
    if name not in _REGISTRY and name in KNOWN_SYSTEMS:
        _import_known(name)
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError("system", "name", f"unknown memory system {name!r}; available: "
                          f"{', '.join(system_names()) or '(none)'}") from None
