"""kerncraft machine files (YAML) as machine layouts: sockets, NUMA domains, cores and hardware threads.

A kerncraft machine file (RRZE-HPC/kerncraft ``examples/machine-files``) describes one processor for the
kerncraft performance model and holds likwid-bench measurements of it. Its header is a machine layout:
``model name``, ``clock``, ``sockets``, ``cores per socket``, ``threads per core``, ``NUMA domains per socket``,
``cores per NUMA domain``. This module reads that layout (the measurements are
:mod:`numasim.calibrate.parsers.kerncraft`'s) and builds the machine: each socket split into its NUMA domains
(Intel sub-NUMA clustering or Cluster-on-Die, AMD NPS), the processor named so the platform catalog can time it.

Memory sizes and link numbers are not in the file: the machine carries the builder's nominal timing, and says so.

Examples
--------
>>> layout = parse_kerncraft_layout_text('''model name: AMD EPYC 7452 32-Core Processor
... sockets: 1
... cores per socket: 32
... threads per core: 2
... NUMA domains per socket: 4
... cores per NUMA domain: 8
... ''')
>>> m = machine_from_kerncraft(layout)
>>> m.name, len(m.nodes), len(m.nodes[0].cpus), m.cpu_model
('kerncraft-amd-epyc-7452-32-core', 4, 16, 'AMD EPYC 7452 32-Core Processor')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from numasim.errors import FormatError
from numasim.topology.io._text import read_machine_text
from numasim.topology.model import Machine
from numasim.units import GiB

__all__ = [
    "KerncraftLayout",
    "looks_like_kerncraft",
    "kerncraft_document",
    "kerncraft_quantity",
    "layout_from_document",
    "parse_kerncraft_layout_text",
    "read_kerncraft_layout",
    "machine_from_kerncraft",
    "load_machine_kerncraft",
]

_QUANTITY_RE = re.compile(r"^\s*([-+0-9.eE]+)\s*([kMG]?)(B/s|B|Hz)?\s*$")
_SCALE = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}


@dataclass(frozen=True)
class KerncraftLayout:
    """A kerncraft file's machine layout. ``model_name`` is ``None`` where the file leaves it empty (some files
    name the part in a comment only); ``model_type`` is the file's free-text description of the processor."""

    source: str
    model_name: str | None
    model_type: str | None
    clock_ghz: float | None
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    numa_domains_per_socket: int
    cores_per_numa_domain: int


def looks_like_kerncraft(text: str) -> bool:
    """Whether ``text`` (a file's head) is a kerncraft machine file."""
    return "kerncraft version" in text or ("cores per NUMA domain:" in text and "model name:" in text)


def kerncraft_quantity(value: Any, unit: str, source: str, where: str) -> float:
    """``'15.52 GB/s'`` -> 15.52e9 (in ``unit``'s base: B/s, B or Hz); plain numbers are taken as they are.

    >>> kerncraft_quantity("2.4 GHz", "Hz", "<text>", "clock")
    2400000000.0
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    m = _QUANTITY_RE.match(str(value))
    if not m or (m.group(3) and m.group(3) != unit):
        raise FormatError(source, f"{where}: expected a quantity in {unit}, got {value!r}")
    return float(m.group(1)) * _SCALE[m.group(2)]


def kerncraft_document(text: str, source: str = "<text>") -> dict[str, Any]:
    """The file's YAML as a mapping; a syntax error names its line, and a file without ``model name:`` is not
    a kerncraft machine file."""
    import yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise FormatError(
            source, f"not valid YAML: {getattr(exc, 'problem', exc)}", None if line is None else line + 1
        ) from None
    if not isinstance(doc, dict) or "model name" not in doc:
        raise FormatError(source, "no 'model name:' key: not a kerncraft machine file")
    return doc


def _positive_int(doc: dict[str, Any], key: str, source: str) -> int:
    v = doc.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        raise FormatError(source, f"{key!r}: expected a positive integer, got {v!r}")
    return v


def _text(value: Any) -> str | None:
    words = " ".join(str(value).split()) if value is not None else ""
    return words or None


def layout_from_document(doc: dict[str, Any], source: str) -> KerncraftLayout:
    """The layout keys of a parsed kerncraft file, checked: counts positive, domains x cores = cores per socket."""
    clock = doc.get("clock")
    layout = KerncraftLayout(
        source=source,
        model_name=_text(doc.get("model name")),
        model_type=_text(doc.get("model type")),
        clock_ghz=kerncraft_quantity(clock, "Hz", source, "clock") / 1e9 if clock is not None else None,
        sockets=_positive_int(doc, "sockets", source),
        cores_per_socket=_positive_int(doc, "cores per socket", source),
        threads_per_core=_positive_int(doc, "threads per core", source),
        numa_domains_per_socket=_positive_int(doc, "NUMA domains per socket", source),
        cores_per_numa_domain=_positive_int(doc, "cores per NUMA domain", source),
    )
    if layout.numa_domains_per_socket * layout.cores_per_numa_domain != layout.cores_per_socket:
        raise FormatError(
            source,
            f"'NUMA domains per socket' {layout.numa_domains_per_socket} x 'cores per NUMA domain' "
            f"{layout.cores_per_numa_domain} != 'cores per socket' {layout.cores_per_socket}",
        )
    return layout


def parse_kerncraft_layout_text(text: str, source: str = "<text>") -> KerncraftLayout:
    """The layout of a kerncraft machine file given as text."""
    return layout_from_document(kerncraft_document(text, source), source)


def read_kerncraft_layout(path: str | Path) -> KerncraftLayout:
    """The layout of the kerncraft machine file at ``path``."""
    source, text = read_machine_text(path)
    return parse_kerncraft_layout_text(text, source)


def _machine_name(layout: KerncraftLayout) -> str:
    label = layout.model_name or layout.model_type or Path(layout.source).stem
    words = "".join(c if c.isalnum() else "-" for c in label.lower()).split("-")
    return "kerncraft-" + "-".join(w for w in words if w and w not in ("r", "tm", "cpu", "processor", "intel"))[:40]


def machine_from_kerncraft(layout: KerncraftLayout, *, memory_bytes_per_node: int = 48 * GiB) -> Machine:
    """The machine a kerncraft layout describes: its sockets split into its NUMA domains, its processor named.

    Memory sizes are not in the file: ``memory_bytes_per_node`` only has to hold a benchmark's arrays. Links and
    controllers carry the builder's nominal numbers: time the machine with a calibration (``numasim catalog
    calibrate`` for the platform catalog's priors of the named processor).
    """
    from numasim.topology.builders import multi_die

    domains = layout.numa_domains_per_socket
    amd = "AMD" in (layout.model_name or layout.model_type or "").upper()
    mode = f"NPS{domains}" if amd else f"SNC{domains}"
    try:
        machine = multi_die(
            layout.sockets,
            mode,
            cores_per_socket=layout.cores_per_socket,
            threads_per_core=layout.threads_per_core,
            memory_bytes=memory_bytes_per_node,
            name=_machine_name(layout),
        )
    except ValueError as exc:
        raise FormatError(layout.source, f"cannot build its machine ({mode}): {exc}") from None
    return machine.model_copy(
        update={
            "cpu_model": layout.model_name,
            "description": f"from the kerncraft machine file {Path(layout.source).name} ({mode}, "
                           f"{layout.threads_per_core} threads per core; memory size not in the file)",
            "source": layout.source,
        }
    )


def load_machine_kerncraft(path: str | Path) -> Machine:
    """Read the kerncraft machine file at ``path`` as a machine (:func:`machine_from_kerncraft`)."""
    return machine_from_kerncraft(read_kerncraft_layout(path))
