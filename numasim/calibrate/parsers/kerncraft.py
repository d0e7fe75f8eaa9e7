"""kerncraft machine files: likwid-bench streaming bandwidth versus active cores, with the machine's layout.

A kerncraft machine file (YAML, RRZE-HPC/kerncraft ``examples/machine-files``) describes one processor
(``model name``, ``clock``, ``sockets``, ``cores per socket``, ``NUMA domains per socket``, ``cores per NUMA
domain``, the cache hierarchy) and under ``benchmarks: measurements:`` likwid-bench results: for each
working-set level (L1, L2, L3, MEM) and threads per core (1, 2), the bandwidth of each kernel (copy, daxpy,
load, triad, update) on 1, 2, ... cores of one socket, cores filled in order (the first NUMA domain first),
memory local to each thread. These are local-memory measurements: they show how a domain's and a socket's
controller bandwidth saturates as cores are added, and what one core alone reaches (its outstanding-miss limit).

likwid-bench counts the bytes its kernel names (copy: one read and one write stream, 16 B per element) and not
the write-allocate read a store miss adds, as STREAM does.

Examples
--------
>>> text = '''model name: Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz
... clock: 2.4 GHz
... sockets: 2
... cores per socket: 20
... threads per core: 2
... NUMA domains per socket: 2
... cores per NUMA domain: 10
... benchmarks:
...   measurements:
...     MEM:
...       1:
...         cores: [1, 2]
...         results:
...           copy: [15.52 GB/s, 27.71 GB/s]
... '''
>>> r = parse_kerncraft_text(text)
>>> r.model_name, r.numa_domains_per_socket, r.scaling["MEM"]["copy"].bandwidth_gb_s.tolist()
('Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz', 2, [15.52, 27.71])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from numasim.calibrate.parsers._text import read_source
from numasim.errors import FormatError
from numasim.topology.io.kerncraft import (
    KerncraftLayout,
    kerncraft_document,
    kerncraft_quantity,
    layout_from_document,
    looks_like_kerncraft,
)

__all__ = ["KerncraftResult", "BandwidthScaling", "KernelStreams", "parse_kerncraft", "parse_kerncraft_text", "looks_like_kerncraft"]

@dataclass(frozen=True)
class BandwidthScaling:
    """One kernel at one working-set level: bandwidth (GB/s, 10**9 B/s) on ``cores[k]`` active cores."""

    kernel: str
    level: str
    cores: np.ndarray
    bandwidth_gb_s: np.ndarray


@dataclass(frozen=True)
class KernelStreams:
    """What one likwid-bench kernel streams, as the file's ``benchmarks: kernels:`` says: how many arrays it
    reads, how many of those it also writes back (``a[i] = s * a[i]``) and how many it writes, and the bytes per
    element it counts (the reads' and the writes', not a store miss's read for ownership).

    >>> KernelStreams(read=2, read_write=1, write=1).read_only, KernelStreams(read=2, read_write=1, write=1).counted_bytes
    (1, 24)
    """

    read: int
    read_write: int
    write: int

    @property
    def read_only(self) -> int:
        return self.read - self.read_write

    @property
    def write_only(self) -> int:
        return self.write - self.read_write

    @property
    def counted_bytes(self) -> int:
        """Bytes per (8-byte) element likwid-bench counts."""
        return 8 * (self.read + self.write)


@dataclass(frozen=True)
class KerncraftResult:
    """A kerncraft machine file: the layout and the 1-thread-per-core bandwidth scaling per level and kernel."""

    layout: KerncraftLayout
    """The machine the file describes (:mod:`numasim.topology.io.kerncraft`: ``numasim topo import`` reads it)."""
    scaling: dict[str, dict[str, BandwidthScaling]] = field(default_factory=dict)
    """``scaling[level][kernel]`` with one thread per core (levels ``L1``, ``L2``, ``L3``, ``MEM``)."""
    kernels: dict[str, KernelStreams] = field(default_factory=dict)
    """Each kernel's streams (``benchmarks: kernels:``; empty where the file does not describe them)."""

    @property
    def source(self) -> str:
        return self.layout.source

    @property
    def model_name(self) -> str | None:
        """The processor as the OS names it; ``None`` where the file leaves ``model name:`` empty."""
        return self.layout.model_name

    @property
    def clock_ghz(self) -> float | None:
        return self.layout.clock_ghz

    @property
    def sockets(self) -> int:
        return self.layout.sockets

    @property
    def cores_per_socket(self) -> int:
        return self.layout.cores_per_socket

    @property
    def threads_per_core(self) -> int:
        return self.layout.threads_per_core

    @property
    def numa_domains_per_socket(self) -> int:
        return self.layout.numa_domains_per_socket

    @property
    def cores_per_numa_domain(self) -> int:
        return self.layout.cores_per_numa_domain


def _core_counts(values: list[Any], source: str, where: str) -> np.ndarray:
    """The ``cores:`` list. One file in the wild lost a comma at a YAML line break (``38\n 39`` reads as the
    string ``'38 39'``): whitespace-separated integers are split back, anything else is an error."""
    out: list[int] = []
    for v in values:
        parts = str(v).split()
        if not parts or not all(p.isdigit() for p in parts):
            raise FormatError(source, f"{where}: expected core counts, got {v!r}")
        out += [int(p) for p in parts]
    return np.asarray(out, dtype=np.int64)


def _streams(entry: Any, source: str, where: str) -> int:
    """``{bytes: 8.00 B, streams: 1}`` -> 1; the bytes must be 8 a stream (likwid-bench's doubles)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("streams"), int) or entry["streams"] < 0:
        raise FormatError(source, f"{where}: expected {{bytes: ..., streams: N}}, got {entry!r}")
    n = int(entry["streams"])
    if kerncraft_quantity(entry.get("bytes", 0), "B", source, where) != 8.0 * n:
        raise FormatError(source, f"{where}: {entry.get('bytes')!r} for {n} streams: expected 8 B a stream")
    return n


def _kernels(doc: Any, source: str) -> dict[str, KernelStreams]:
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise FormatError(source, "benchmarks.kernels: expected a mapping of kernels")
    out: dict[str, KernelStreams] = {}
    for name, spec in doc.items():
        where = f"benchmarks.kernels.{name}"
        if not isinstance(spec, dict):
            raise FormatError(source, f"{where}: expected a mapping (read streams:, write streams:, ...)")
        k = KernelStreams(*(_streams(spec.get(key), source, f"{where}.{key}")
                            for key in ("read streams", "read+write streams", "write streams")))  # fmt: skip
        if k.read_only < 0 or k.write_only < 0 or k.read + k.write == 0:
            raise FormatError(source, f"{where}: {k.read} read, {k.read_write} read+write, {k.write} write streams")
        out[str(name)] = k
    return out


def parse_kerncraft_text(text: str, source: str = "<text>") -> KerncraftResult:
    """Parse a kerncraft machine file (YAML)."""
    doc = kerncraft_document(text, source)
    layout = layout_from_document(doc, source)
    scaling: dict[str, dict[str, BandwidthScaling]] = {}
    benchmarks = doc.get("benchmarks") or {}
    if not isinstance(benchmarks, dict):
        raise FormatError(source, "benchmarks: expected a mapping (with measurements:)")
    measurements = benchmarks.get("measurements") or {}
    if not isinstance(measurements, dict):
        raise FormatError(source, "benchmarks.measurements: expected a mapping of levels")
    for level, by_threads in measurements.items():
        one = (by_threads or {}).get(1) if isinstance(by_threads, dict) else None
        if not one:
            continue
        if not isinstance(one, dict):
            raise FormatError(source, f"benchmarks.measurements.{level}.1: expected a mapping (cores:, results:)")
        results = one.get("results") or {}
        if not isinstance(results, dict):
            raise FormatError(source, f"benchmarks.measurements.{level}.1.results: expected a mapping of kernels")
        cores = _core_counts(one.get("cores") or [], source, f"benchmarks.measurements.{level}.1.cores")
        for kernel, values in results.items():
            where = f"benchmarks.measurements.{level}.1.results.{kernel}"
            if not isinstance(values, list) or len(values) != len(cores):
                raise FormatError(source, f"{where}: expected {len(cores)} values (one per cores entry)")
            bw = np.array([kerncraft_quantity(v, "B/s", source, where) / 1e9 for v in values])
            if (bw <= 0).any():
                raise FormatError(source, f"{where}: bandwidth must be positive")
            scaling.setdefault(str(level), {})[str(kernel)] = BandwidthScaling(str(kernel), str(level), cores, bw)
    return KerncraftResult(layout=layout, scaling=scaling, kernels=_kernels(benchmarks.get("kernels"), source))


def parse_kerncraft(path: str | Path) -> KerncraftResult:
    source, text = read_source(path)
    return parse_kerncraft_text(text, source)
