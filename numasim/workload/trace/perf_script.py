"""``perf script`` output of ``perf mem record``: sampled loads and stores with their data address.

The common layout (perf 5.x-6.x, default fields of a ``perf mem record`` session) is::

    comm  [pid/]tid  [cpu]  time:  [period]  event:  data_addr  data_src |OP LOAD|LVL L1 hit|SNP None|...  weight ... ip sym (dso)

for example::

    stream  4711/4712 [003] 11286.409870:  3247 cpu/mem-loads,ldlat=30/P:  7f3a2c0010c0  6a100142 |OP LOAD|LVL Local RAM hit|SNP None|TLB L1 or L2 hit|LCK No|BLK  N/A  312  0  401136 triad+0x26 (/tmp/stream)

(``comm`` may contain spaces; ``[cpu]`` and ``period`` are optional.) Each sample becomes one access of
``size_bytes`` (64: a cache line); it is a store when the data source says ``OP STORE`` or the event name has
``store`` in it. Thread ids are numbered 0, 1, ... in order of first appearance of each tid. The data source
level (``L1 hit``, ``LFB hit``, ``Local RAM hit``, ``Remote RAM (1 hop) hit`` ...) is classified by
:func:`data_source_level`; ``levels=`` keeps only samples from the given levels (e.g. the RAM ones).
Comment lines (``#``) and blank lines are skipped; anything else that does not parse is an error with its line
number.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from numasim.errors import TraceError
from numasim.workload.access import AccessChunk
from numasim.workload.trace._text import TEXT_CHUNK_ACCESSES, ChunkBuilder, numbered_lines

__all__ = ["read_perf_script", "data_source_level", "PERF_LEVELS", "looks_like_perf_script", "USER_ADDRESS_LIMIT"]

#: x86_64 ``TASK_SIZE`` with 4-level paging: data addresses at or above it are kernel memory.
USER_ADDRESS_LIMIT = 0x0000_7FFF_FFFF_F000

PERF_LEVELS = ("l1", "lfb", "l2", "l3", "local_ram", "remote_ram", "remote_cache", "io", "uncached", "na")

_SAMPLE = re.compile(
    r"^\s*(?P<comm>\S.*?)\s+(?:(?P<pid>-?\d+)/)?(?P<tid>-?\d+)\s+(?:\[(?P<cpu>\d+)\]\s+)?"
    r"(?P<time>\d+\.\d+):\s+(?:(?P<period>\d+)\s+)?(?P<event>\S+):\s+(?P<addr>(?:0x)?[0-9a-fA-F]+)\b(?P<rest>.*)$"
)
_LVL = re.compile(r"\|LVL\s+([^|]*)")
_OP = re.compile(r"\|OP\s+([^|]*)")


def data_source_level(text: str) -> str:
    """Classify a ``perf mem`` data-source level string into one of :data:`PERF_LEVELS`.

    Examples
    --------
    >>> data_source_level("Remote RAM (1 hop) hit"), data_source_level("LFB/MAB hit"), data_source_level("L3 miss")
    ('remote_ram', 'lfb', 'l3')
    """
    t = text.lower()
    if "remote ram" in t or "remote dram" in t:
        return "remote_ram"
    if "remote cache" in t:
        return "remote_cache"
    if "ram" in t:  # "Local RAM hit", "RAM hit", "Local DRAM"
        return "local_ram"
    for key, level in (("lfb", "lfb"), ("l1", "l1"), ("l2", "l2"), ("l3", "l3"), ("i/o", "io"), ("uncached", "uncached")):
        if key in t:
            return level
    return "na"


def looks_like_perf_script(line: str) -> bool:
    """True when ``line`` parses as a perf script memory sample (used to sniff ``.txt`` traces)."""
    return bool(_SAMPLE.match(line))


def read_perf_script(
    path: str | Path,
    *,
    levels: set[str] | None = None,
    size_bytes: int = 64,
    kernel_addresses: bool = False,
    chunk_accesses: int = TEXT_CHUNK_ACCESSES,
    recorded_cpus: dict[int, int] | None = None,
) -> Iterator[AccessChunk]:
    """Stream the samples of a ``perf script`` text file as chunks (see the module docstring for the layout).

    Samples whose data address is kernel memory (at or above :data:`USER_ADDRESS_LIMIT`, e.g. ``ffff9f9e...``
    from ``perf mem record -a``) are skipped unless ``kernel_addresses=True``: the simulated process cannot
    place them. ``recorded_cpus``, when given, receives the cpu of each thread's first sample (thread number ->
    cpu; threads whose sample has no ``[cpu]`` field are left out).
    """
    p = Path(path)
    src = str(p)
    if levels is not None and not set(levels) <= set(PERF_LEVELS):
        raise TraceError(src, f"unknown data-source level(s) {sorted(set(levels) - set(PERF_LEVELS))} "
                         f"(expected some of {', '.join(PERF_LEVELS)})")
    threads: dict[int, int] = {}
    builder = ChunkBuilder(chunk_accesses)
    for number, line in numbered_lines(p):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            raise TraceError(src, f"not a perf script memory sample (comm tid [cpu] time: event: addr ...): {text[:80]!r}", number)
        rest = m["rest"]
        if levels is not None:
            lvl = _LVL.search(rest)
            if data_source_level(lvl.group(1) if lvl else "") not in levels:
                continue
        op = _OP.search(rest)
        if op is not None:
            is_write = "store" in op.group(1).lower()
        else:
            is_write = "store" in m["event"].lower()
        address = int(m["addr"], 16)
        if address >= 1 << 64:
            raise TraceError(src, f"data address {m['addr'][:40]} is beyond 64 bits", number)
        if address >= USER_ADDRESS_LIMIT and not kernel_addresses:
            continue
        tid = int(m["tid"])
        thread = threads.setdefault(tid, len(threads))
        if recorded_cpus is not None and thread not in recorded_cpus and m["cpu"] is not None:
            recorded_cpus[thread] = int(m["cpu"])
        builder.add(thread, address, is_write, size_bytes)
        if builder.full():
            yield builder.take()
    if len(builder):
        yield builder.take()
