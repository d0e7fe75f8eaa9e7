"""Names a package imports on first use (PEP 562), so that importing one of its submodules stays cheap."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, sources: Mapping[str, str], names: Iterable[str]) -> tuple[
        Callable[[str], Any], Callable[[], list[str]]]:  # fmt: skip
    """``__getattr__`` and ``__dir__`` for ``package``: ``name`` is imported from ``sources[name]`` when first
    asked for, then kept in the package's namespace (later look-ups skip the function).

    Examples
    --------
    >>> getattr_, _ = lazy_names("numasim.units", {"sqrt": "math"}, ["sqrt"])
    >>> getattr_("sqrt")(16.0)
    4.0
    """
    exported = list(names)
    module = sys.modules[package]
    # A name that is also a submodule's (numasim.topology.routing, the function, in numasim/topology/routing.py):
    # importing the submodule makes the import system set the package attribute to the submodule. The eager
    # ``from .routing import routing`` of a package __init__ rebinds it to the function afterwards; this class
    # does the same when the import system sets it.
    module.__class__ = _LazyModule
    module.__dict__["_lazy_sources"] = dict(sources)

    def __getattr__(name: str) -> Any:
        module = sources.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exported))

    return __getattr__, __dir__


class _LazyModule(ModuleType):
    """A package whose exported names win over its submodules of the same name (module docstring)."""

    def __setattr__(self, name: str, value: Any) -> None:
        sources = self.__dict__.get("_lazy_sources", {})
        if isinstance(value, ModuleType) and sources.get(name) == value.__name__ == f"{self.__name__}.{name}":
            value = getattr(value, name, value)
        super().__setattr__(name, value)
