"""The processor's name, as the OS prints it, from the files a user has of a box.

The name (``"Intel(R) Xeon(R) Gold 6240 CPU @ 2.60GHz"``) is the key into the platform catalog
(:mod:`numasim.timing.catalog`) that gives a machine's timing priors, so every importer picks it up where its
source carries it:

* ``lscpu`` text: ``Model name:  Intel(R) Xeon(R) ...``;
* ``/proc/cpuinfo``: ``model name\t: Intel(R) Xeon(R) ...`` (the first one; a box has one model);
* hwloc XML: ``<info name="CPUModel" value="..."/>`` on the Package objects;
* a sysfs node tree (``/sys/devices/system/node``) carries no name: :func:`cpu_model_near` looks beside it
  for the ``lscpu.txt`` or ``cpuinfo`` that ``numasim probe`` saves;
* ``numactl --hardware`` text carries none either: its reader takes an ``lscpu`` block in the same file, or an
  ``lscpu.txt`` (``cpuinfo``) in the same folder.

Placeholder names some firmware or hypervisors report (``"AMD Engineering Sample"``, ``"QEMU Virtual CPU"``)
are kept as they are: they name no catalog entry, and the catalog lookup says so.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

__all__ = ["cpu_model_from_text", "cpu_model_from_hwloc", "cpu_model_near", "CPU_MODEL_FILES"]

_LSCPU_RE = re.compile(r"^\s*model name\s*:\s*(\S.*?)\s*$", re.IGNORECASE | re.MULTILINE)

CPU_MODEL_FILES = ("lscpu.txt", "lscpu", "cpuinfo", "cpuinfo.txt")
"""File names :func:`cpu_model_near` looks for beside a sysfs tree (``numasim probe`` writes ``lscpu.txt``)."""


def _clean(name: str) -> str | None:
    # The kernel pads some brand strings with spaces ("AMD Opteron(TM) Processor 6272                 ").
    name = " ".join(name.split())
    return name or None


def cpu_model_from_text(text: str) -> str | None:
    """The first ``Model name:`` (lscpu) or ``model name :`` (/proc/cpuinfo) value in ``text``, else None.

    Examples
    --------
    >>> cpu_model_from_text("Architecture: x86_64\\nModel name:   Intel(R) Xeon(R) Gold 6240 CPU @ 2.60GHz\\n")
    'Intel(R) Xeon(R) Gold 6240 CPU @ 2.60GHz'
    >>> cpu_model_from_text("processor\\t: 0\\nmodel name\\t: AMD EPYC 7452 32-Core Processor\\n")
    'AMD EPYC 7452 32-Core Processor'
    >>> cpu_model_from_text("available: 2 nodes (0-1)") is None
    True
    """
    m = _LSCPU_RE.search(text)
    return _clean(m.group(1)) if m else None


def cpu_model_from_hwloc(root: ET.Element) -> str | None:
    """The ``CPUModel`` info of the first Package (or any object) that has one in an hwloc XML tree."""
    fallback = None
    for obj in root.iter("object"):
        for info in obj.findall("info"):
            if info.get("name") == "CPUModel" and info.get("value"):
                name = _clean(info.get("value", ""))
                if obj.get("type") == "Package" and name:
                    return name
                fallback = fallback or name
    return fallback


def cpu_model_near(path: str | Path, levels_up: int = 4) -> str | None:
    """The model named by an lscpu/cpuinfo file in ``path`` or up to ``levels_up`` folders above it.

    ``numasim probe`` saves ``lscpu.txt`` at the top of its output, four levels above the copied
    ``sys/devices/system/node`` tree; a ``numactl --hardware`` text looks in its own folder only (``levels_up=0``).
    """
    here = Path(path).resolve()
    for folder in [here, *list(here.parents)[:levels_up]]:
        for name in CPU_MODEL_FILES:
            f = folder / name
            if f.is_file():
                try:
                    found = cpu_model_from_text(f.read_text(encoding="utf-8", errors="replace"))
                except OSError:
                    continue
                if found:
                    return found
    return None
