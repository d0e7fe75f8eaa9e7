"""Reading the shipped catalog: one TOML file per platform under ``numasim/timing/catalog/data/``.

The files are package data (they ship in the wheel), read through :mod:`importlib.resources` so an installed
numasim finds them wherever it lives. A malformed entry is an error naming the file and the field, never a
silently shorter catalog.
"""

from __future__ import annotations

import functools
import tomllib
from importlib import resources
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from numasim.errors import FormatError
from numasim.timing.catalog.model import Platform

M = TypeVar("M", bound=BaseModel)

__all__ = ["load_catalog", "platform_names", "get_platform", "parse_platform_toml", "parse_toml_model"]


def parse_platform_toml(text: str, source: str = "<text>") -> Platform:
    """One platform from the text of its TOML file (``source`` names it in errors).

    Examples
    --------
    >>> p = parse_platform_toml(_EXAMPLE)
    >>> p.name, p.memory.channels_per_socket, p.skus[0].model
    ('example-one', 2, 'Example 1')
    """
    return parse_toml_model(Platform, text, source)


def parse_toml_model(model: type[M], text: str, source: str) -> M:
    """``model`` validated from TOML ``text``; a syntax or field error is a FormatError naming ``source``."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FormatError(source, f"not valid TOML: {exc}") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        from numasim.topology.io.toml_format import format_validation_error

        raise FormatError(source, format_validation_error(exc)) from None


@functools.cache
def load_catalog() -> tuple[Platform, ...]:
    """Every shipped platform, sorted by vendor, then first year, then name (read once per process)."""
    root = resources.files("numasim.timing.catalog") / "data"
    out = []
    for entry in root.iterdir():
        if entry.name.endswith(".toml"):
            platform = parse_platform_toml(entry.read_text(encoding="utf-8"), f"catalog/data/{entry.name}")
            if f"{platform.name}.toml" != entry.name:
                raise FormatError(f"catalog/data/{entry.name}", f"name = {platform.name!r}: must match the file name")
            out.append(platform)
    return tuple(sorted(out, key=lambda p: (p.vendor, p.years[0], p.name)))


def platform_names() -> list[str]:
    """The catalog keys, in catalog order."""
    return [p.name for p in load_catalog()]


def get_platform(name: str) -> Platform:
    """The platform called ``name`` (a :class:`KeyError` lists the names that exist)."""
    for p in load_catalog():
        if p.name == name:
            return p
    raise KeyError(f"no catalog platform {name!r}; known: {', '.join(platform_names())}")


_EXAMPLE = """
name = "example-one"
vendor = "intel"
title = "Example"
microarchitecture = "Example"
years = [2020, 2020]
max_cores_per_socket = 4
threads_per_core = 1
caches = []
skus = [{ model = "Example 1", cores = 4, threads = 4, base_ghz = 2.0, sources = ["s"] }]
[[source]]
id = "s"
title = "A datasheet"
gave = "everything"
[memory]
ddr = "DDR4"
max_mt_s = 2400
channels_per_socket = 2
sources = ["s"]
[interconnect]
kind = "upi"
links_per_socket = 2
gt_s = 10.4
bandwidth_gb_s = 20.8
derivation = "10.4 GT/s x 2 B"
sources = ["s"]
"""
