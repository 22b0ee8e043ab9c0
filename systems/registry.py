"""Memory systems by name: what a config's ``system.name`` resolves to.

Systems register themselves with :func:`register_system` when their module is imported; the
registry imports the known system modules lazily, on the first lookup, so importing memtrace-opt
never pulls in mem0 or faiss. A third-party system is found three ways: an entry point in the
group ``memtrace_opt.systems`` (``name = "pkg.module:SystemClass"`` in its ``pyproject.toml``),
``system: {module: pkg.module, name: ...}`` in a config (:func:`import_system_module`), or by
importing its module before the lookup.

>>> from memtrace_opt.systems.registry import get_system
>>> get_system("long_context").name
'long_context'
"""

from __future__ import annotations

import importlib
from typing import TypeVar

from memtrace_opt.errors import ConfigError
from memtrace_opt.systems.base import MemorySystem

__all__ = ["ENTRY_POINT_GROUP", "KNOWN_SYSTEMS", "get_system", "import_system_module", "register_system",
           "system_names"]

#: The entry-point group third-party packages register their systems under.
ENTRY_POINT_GROUP = "memtrace_opt.systems"

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


_ENTRY_POINTS_LOADED = False


def _load_entry_points() -> None:
    """Register the systems installed packages declare in :data:`ENTRY_POINT_GROUP` (once per process)."""
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            cls = ep.load()
        except Exception as err:  # a broken plugin names itself, it does not take the CLI down silently
            raise ConfigError(f"entry point {ep.name} = {ep.value}", None,
                              f"cannot load memory system: {type(err).__name__}: {err}") from None
        if not (isinstance(cls, type) and issubclass(cls, MemorySystem)):
            raise ConfigError(f"entry point {ep.name} = {ep.value}", None, "is not a MemorySystem subclass")
        if getattr(cls, "name", None) not in _REGISTRY:
            register_system(cls)


def import_system_module(module: str) -> None:
    """Import a user system's module (config ``system.module``), which registers its system."""
    try:
        importlib.import_module(module)
    except ImportError as err:
        raise ConfigError("config", "system.module", f"cannot import {module!r}: {err}") from None


def system_names() -> list[str]:
    """Names of every available system: known modules that exist, entry points, and any registered by hand."""
    for name in KNOWN_SYSTEMS:
        if name not in _REGISTRY:
            _import_known(name)
    _load_entry_points()
    return sorted(_REGISTRY)


def get_system(name: str) -> type[MemorySystem]:
    """The system class registered as ``name``; ConfigError listing the available names otherwise."""
    if name not in _REGISTRY and name in KNOWN_SYSTEMS:
        _import_known(name)
    if name not in _REGISTRY:
        _load_entry_points()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError("system", "name", f"unknown memory system {name!r}; available: "
                          f"{', '.join(system_names()) or '(none)'}") from None
