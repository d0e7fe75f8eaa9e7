"""Names a package imports on first use (PEP 562), so that importing one of its submodules stays cheap."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
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
