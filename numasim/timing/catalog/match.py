"""Finding a catalog platform and SKU from what the OS calls the processor.

``/proc/cpuinfo``, lscpu and hwloc's ``CPUModel`` spell the same part in many ways ("Intel(R) Xeon(R) CPU
E5-2680 v2 @ 2.80GHz", "Dual-Core AMD Opteron(tm) Processor 8218", "AMD EPYC 7452 32-Core Processor",
"Intel(R) Xeon(R) CPU E7- 4870  @ 2.40GHz", padding spaces). :func:`model_key` reduces any of them to the
vendor's model ("E5-2680 V2", "OPTERON 8218", "EPYC 7452", "E7-4870"); :func:`match_cpu` then finds the SKU
whose model tokens appear in it (the longest wins), or else a platform whose ``model_patterns`` recognise an
unlisted SKU, or takes the text as a catalog name.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Literal

from numasim.errors import CalibrationError
from numasim.timing.catalog.loader import load_catalog
from numasim.timing.catalog.model import Platform, Sku

__all__ = ["CatalogMatch", "match_cpu", "model_key"]

_NOISE = re.compile(
    r"\((R|TM|C)\)|\bCPU\b|\bPROCESSOR\b|\bINTEL\b|\bAMD\b|\bXEON\b|\b(SINGLE|DUAL|QUAD|SIX|EIGHT|\d+)[- ]CORE\b"
    r"|@\s*[\d.]+\s*[GM]HZ",
)
_BRANDS = {"GOLD", "PLATINUM", "SILVER", "BRONZE", "EPYC", "OPTERON"}
_VERSION = re.compile(r"^V\d+$")
_CPUID_PAIR = re.compile(r"\s*([0-9A-Fa-f]{2})/([0-9A-Fa-f]{2,3})\s*")
"""hwloc's ``CPUModel`` where the processor gave no brand string: its CPUID family and model in hex ("06/57")."""
_UNCOVERED_CPUID = {
    (0x6, 0x57): "Xeon Phi x200 (Knights Landing)",
    (0x6, 0x85): "Xeon Phi 72x5 (Knights Mill)",
}
"""CPUID family/model pairs of processor lines the catalog does not cover, named in the error (Intel's Software
Developer's Manual, volume 4, table 2-1: DisplayFamily_DisplayModel 06_57H and 06_85H, the Xeon Phi processors
based on the Knights Landing and Knights Mill microarchitectures)."""


def model_key(text: str) -> str:
    """The processor model in a CPU string, upper case, without vendor, brand noise, clock or padding.

    Examples
    --------
    >>> model_key("Intel(R) Xeon(R) CPU E5-2680 v2 @ 2.80GHz")
    'E5-2680 V2'
    >>> model_key("Intel(R) Xeon(R) CPU E7- 4870  @ 2.40GHz"), model_key("Intel(R) Xeon(R) CPU E5-2650 0 @ 2.00GHz")
    ('E7-4870', 'E5-2650')
    >>> model_key("AMD EPYC 7452 32-Core Processor"), model_key("Dual-Core AMD Opteron(tm) Processor 8218")
    ('EPYC 7452', 'OPTERON 8218')
    """
    s = text.upper()
    s = _NOISE.sub(" ", s)
    s = re.sub(r"\b(E\d)-\s+(\d)", r"\1-\2", s)  # "E7- 4870": Intel pads the family of E7 parts
    tokens = [t for t in s.split() if t != "0"]  # "E5-2650 0": Sandy Bridge-EP's empty version field
    return " ".join(tokens)


def _sku_tokens(sku: Sku) -> list[str]:
    return [t for t in model_key(sku.model).split() if t not in _BRANDS]


def _vendor_hint(text: str) -> str | None:
    up = text.upper()
    if "INTEL" in up or "XEON" in up:
        return "intel"
    if "AMD" in up or "EPYC" in up or "OPTERON" in up:
        return "amd"
    return None


@dataclass(frozen=True)
class CatalogMatch:
    """What :func:`match_cpu` found: the platform, the SKU when known, and how it was recognised."""

    platform: Platform
    sku: Sku | None
    query: str
    how: Literal["name", "sku", "pattern"]
    stand_in: str = ""
    """Where ``sku`` is not the catalog's but made for an unlisted part (:func:`~numasim.timing.catalog.calibration.
    stand_in_sku`): how it was made. Empty otherwise."""

    @property
    def label(self) -> str:
        """``"intel-skylake-sp / Xeon Platinum 8180"`` (or just the platform)."""
        return f"{self.platform.name} / {self.sku.model}" if self.sku else self.platform.name


def _contains(tokens: list[str], part: list[str]) -> bool:
    n = len(part)
    for i in range(len(tokens) - n + 1):
        if tokens[i : i + n] == part:
            after = tokens[i + n] if i + n < len(tokens) else ""
            # "E5-2680" must not claim "E5-2680 V2": a version after the match belongs to another part.
            if not _VERSION.match(after):
                return True
    return False


def match_cpu(text: str) -> CatalogMatch:
    """The catalog platform (and SKU) of a CPU string, a bare model ("Gold 6240", "8180") or a catalog name.

    Raises :class:`~numasim.errors.CalibrationError` naming the string and the closest known models when
    nothing matches, or the candidates when a bare number fits several.

    Examples
    --------
    >>> match_cpu("Intel(R) Xeon(R) Gold 6240 CPU @ 2.60GHz").label
    'intel-cascade-lake-sp / Xeon Gold 6240'
    >>> match_cpu("EPYC 9654").label, match_cpu("intel-skylake-sp").how
    ('amd-epyc-genoa / EPYC 9654', 'name')
    """
    query = text
    catalog = load_catalog()
    by_name = {p.name: p for p in catalog}
    if text.strip().lower() in by_name:
        return CatalogMatch(by_name[text.strip().lower()], None, query, "name")
    key = model_key(text)
    tokens = [t for t in key.split() if t not in _BRANDS]
    vendor = _vendor_hint(text)
    best: list[tuple[int, Platform, Sku]] = []
    for p in catalog:
        if vendor is not None and p.vendor != vendor:
            continue
        for s in p.skus:
            part = _sku_tokens(s)
            if part and _contains(tokens, part):
                best.append((len(part), p, s))
    if best:
        top = max(n for n, _, _ in best)
        hits = [(p, s) for n, p, s in best if n == top]
        if len(hits) > 1:
            names = ", ".join(f"{s.model} ({p.name})" for p, s in hits)
            raise CalibrationError(f"cpu {text!r} is ambiguous in the platform catalog: {names}; give the full model")
        return CatalogMatch(hits[0][0], hits[0][1], query, "sku")
    found = [p for p in catalog if (vendor is None or p.vendor == vendor)
             and any(re.search(pat, key) for pat in p.model_patterns)]
    if len(found) == 1:
        return CatalogMatch(found[0], None, query, "pattern")
    # a part of a platform's name ("intel-sky", "rome"): the platforms it names
    wanted = text.strip().lower()
    named = [n for n in by_name if wanted and wanted in n]
    if named:
        raise CalibrationError(f"{text!r} is part of the platform name(s) {', '.join(named)}; give a whole platform "
                               "name or a processor model (`numasim catalog list`)")
    if not tokens:
        raise CalibrationError(f"cpu {text!r} names no model (a brand alone); give the model, e.g. 'Xeon Gold 6240' or "
                               "'EPYC 7452', or a platform name (`numasim catalog list`)")
    if pair := _CPUID_PAIR.fullmatch(text):
        # no model name to match, and digits that look like one to the suggestions below ('06/57' -> '6527P')
        family, model = int(pair[1], 16), int(pair[2], 16)
        line = _UNCOVERED_CPUID.get((family, model))
        if line:
            raise CalibrationError(
                f"cpu {text!r} is a CPUID family/model pair (family {family}, model {model:#x}): {line}, which the "
                "platform catalog does not cover"
            )
        raise CalibrationError(
            f"cpu {text!r} is a CPUID family/model pair (family {family}, model {model:#x}), not a processor model "
            "(the OS gave no brand string); give the model with --cpu (`numasim catalog list`)"
        )
    known = [model_key(s.model) for p in catalog for s in p.skus] + list(by_name)
    close = difflib.get_close_matches(key or text.upper(), known, n=5, cutoff=0.6)
    hint = f"; closest: {', '.join(close)}" if close else ""
    raise CalibrationError(
        f"cpu {text!r} (model {key!r}) is not in the platform catalog{hint}; see `numasim catalog list`"
    )
