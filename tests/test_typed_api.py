"""The run layer's public signatures say what they take and return: no ``Any`` in run/ and rundir/.

mypy --strict checks the bodies; this checks the promise to callers, which mypy allows to be ``Any``:
every function, method and field a module of these packages lists in ``__all__`` (and defines).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

PACKAGES = ("memtrace_opt.run", "memtrace_opt.rundir")


def _public(package: str) -> list[tuple[str, object]]:
    root = importlib.import_module(package)
    modules = [root] + [importlib.import_module(f"{package}.{m.name}") for m in pkgutil.iter_modules(root.__path__)]
    return [(f"{m.__name__}.{name}", getattr(m, name)) for m in modules for name in getattr(m, "__all__", [])
            if getattr(getattr(m, name), "__module__", None) == m.__name__]


def _annotations(obj: object) -> dict[str, object]:
    """The annotations a caller sees: a function's parameters and return, a class's fields and public methods."""
    if inspect.isfunction(obj):
        return dict(obj.__annotations__)
    out = {f"field {k}": v for k, v in getattr(obj, "__annotations__", {}).items()}
    for name, member in vars(obj).items() if inspect.isclass(obj) else ():
        func = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
        if inspect.isfunction(func) and not name.startswith("_"):
            out |= {f"{name}({k})": v for k, v in func.__annotations__.items()}
    return out


@pytest.mark.parametrize("package", PACKAGES)
def test_no_public_signature_is_any(package: str) -> None:
    found = [f"{name}: {where} is {ann}" for name, obj in _public(package)
             for where, ann in _annotations(obj).items() if "Any" in str(ann)]
    assert found == []
