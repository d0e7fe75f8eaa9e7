"""The workload file: threads, allocations and access phases, as pydantic models read from TOML.

A workload says *who* runs where (threads pinned to a cpu, a node, or a set of allowed cpus), *what memory*
exists (named allocations with a size, a memory policy and a first-touch thread) and *how* each thread walks it
(a list of phases, each one access pattern). Phase boundaries are global: a phase may ``malloc`` allocations
(they come into existence when the phase starts) and ``free`` them (they are released when it starts).

Example
-------
>>> w = loads_workload('''
... name = "triad"
... [[threads]]
... id = 0
... node = 0
... [[allocations]]
... name = "a"
... size_bytes = "1M"
... policy = "interleave:0-1"
... [[phases]]
... pattern = "sequential"
... allocation = "a"
... passes = 1
... ''')
>>> w.allocations[0].size_bytes, w.allocations[0].policy_spec.nodes
(1048576, (0, 1))

Units are in the field names (``size_bytes``, ``stride_bytes``, ``compute_ns``, ``duration_ns``). Every
validation error names the field path and the value (``phases.1.strided.stride_bytes = 0: ...``).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from numasim.errors import PolicyError, WorkloadError
from numasim.topology.cpulist import parse_cpulist
from numasim.units import parse_size
from numasim.workload.access import MAX_COMPUTE_NS
from numasim.workload.policy_text import PolicySpec, parse_policy

__all__ = [
    "Workload",
    "WorkloadThread",
    "Allocation",
    "Phase",
    "SequentialPhase",
    "StridedPhase",
    "RandomPhase",
    "PointerChasePhase",
    "StreamPhase",
    "ZipfPhase",
    "STREAM_ARRAYS",
    "loads_workload",
    "load_workload",
    "workload_error",
]

#: STREAM's kernels and the array names they use (sources first, the written array last), after McCalpin's
#: stream.c: copy ``c = a``, scale ``b = s*c``, add ``c = a + b``, triad ``a = b + s*c``.
STREAM_ARRAYS: dict[str, tuple[str, ...]] = {
    "stream_copy": ("a", "c"),
    "stream_scale": ("c", "b"),
    "stream_add": ("a", "b", "c"),
    "stream_triad": ("b", "c", "a"),
}


class _Model(BaseModel):
    # inf/nan are valid TOML but no field means them (compute_ns = inf would never end a run).
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class WorkloadThread(_Model):
    """A thread and where it may run: one ``cpu``, any cpu of a ``node``, or a set of allowed ``cpus``.

    In a workload file ``id`` may be left out (it is the position in the list), and ``{count = 8, node = 0}``
    stands for eight threads on node 0.
    """

    id: Annotated[int, Field(ge=0)]
    cpu: Annotated[int, Field(ge=0)] | None = None
    node: Annotated[int, Field(ge=0)] | None = None
    cpus: list[Annotated[int, Field(ge=0)]] | None = None
    """Allowed cpus (``sched_setaffinity``); the thread starts on the first one."""

    @field_validator("cpus", mode="before")
    @classmethod
    def _cpulist(cls, value: object) -> object:
        if isinstance(value, str):
            return parse_cpulist(value)
        return value

    @model_validator(mode="after")
    def _one_placement(self) -> Self:
        given = [k for k in ("cpu", "node", "cpus") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"thread {self.id}: give one of cpu, node, cpus, not {' and '.join(given)}")
        if self.cpus is not None and not self.cpus:
            raise ValueError(f"thread {self.id}: cpus is empty")
        return self


class Allocation(_Model):
    """A named region of memory: its size, the policy it is placed under and the thread that first touches it."""

    name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_.\-]*$")]
    size_bytes: Annotated[int, Field(gt=0)]
    """Bytes; TOML may write ``"64G"`` (binary units, like numactl and stress)."""
    policy: str = "default"
    """``MODE[:NODES[:FLAGS]]`` applied with ``mbind`` before the first touch (``"default"``: the task policy)."""
    first_touch: Annotated[int, Field(ge=0)] | None = None
    """Thread whose touch faults the pages in; default: the first thread that accesses the allocation."""
    prefault: bool = True
    """Touch every page when the allocation is created (like ``memset``); False: pages fault on first access."""
    hugetlb: bool = False
    """``MAP_HUGETLB``: 2 MiB pages from the hugetlb pool (size it with ``[sysctl] "vm.nr_hugepages"``)."""
    madvise: Literal["hugepage", "nohugepage"] | None = None
    """``madvise(MADV_HUGEPAGE)`` (transparent huge pages under ``thp = madvise``) or ``MADV_NOHUGEPAGE``."""

    @field_validator("size_bytes", mode="before")
    @classmethod
    def _size(cls, value: object) -> object:
        if isinstance(value, str):
            return parse_size(value)
        return value

    @field_validator("policy")
    @classmethod
    def _policy(cls, value: str) -> str:
        try:
            parse_policy(value)
        except PolicyError as exc:
            raise ValueError(str(exc)) from None
        return value

    @property
    def policy_spec(self) -> PolicySpec:
        return parse_policy(self.policy)


class _PhaseBase(_Model):
    name: str = ""
    threads: list[Annotated[int, Field(ge=0)]] | Literal["all"] = "all"
    """Thread ids that run this phase; the others skip it."""
    accesses: Annotated[int, Field(ge=0)] | None = None
    """Accesses per thread in this phase."""
    passes: Annotated[float, Field(gt=0)] | None = None
    """Sweeps over the (per-thread) region; the default when neither accesses nor duration_ns is given is 1."""
    duration_ns: Annotated[float, Field(gt=0)] | None = None
    """Approximate length in time, turned into a count as duration_ns / (compute_ns + assumed_access_ns)."""
    assumed_access_ns: Annotated[float, Field(gt=0)] = 100.0
    compute_ns: Annotated[float, Field(ge=0, le=MAX_COMPUTE_NS)] = 0.0
    """Compute time before each access (at most :data:`~numasim.workload.access.MAX_COMPUTE_NS`, 1000 s)."""
    size_bytes: Annotated[int, Field(ge=1, le=4096)] = 64
    """Bytes per access (64: one cache line)."""
    write_fraction: Annotated[float, Field(ge=0, le=1)] = 0.0
    malloc: list[str] = Field(default_factory=list)
    """Allocations that come into existence when this phase starts."""
    free: list[str] = Field(default_factory=list)
    """Allocations released when this phase starts."""

    @model_validator(mode="after")
    def _one_length(self) -> Self:
        given = [k for k in ("accesses", "passes", "duration_ns") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"give one of accesses, passes, duration_ns, not {' and '.join(given)}")
        return self

    def allocations_used(self) -> tuple[str, ...]:
        return ()


class _OneRegion(_PhaseBase):
    allocation: str
    split: bool = False
    """Each of the phase's k threads walks its own 1/k slice of the allocation (OpenMP static schedule)."""

    def allocations_used(self) -> tuple[str, ...]:
        return (self.allocation,)


class SequentialPhase(_OneRegion):
    """Consecutive accesses of ``size_bytes``, wrapping at the end of the region."""

    pattern: Literal["sequential"]


class StridedPhase(_OneRegion):
    """Accesses ``stride_bytes`` apart, wrapping at the end of the region."""

    pattern: Literal["strided"]
    stride_bytes: Annotated[int, Field(gt=0)]


class RandomPhase(_OneRegion):
    """Uniformly random ``size_bytes``-aligned accesses over the region."""

    pattern: Literal["random"]


class PointerChasePhase(_OneRegion):
    """Dependent loads following one random cycle through every ``size_bytes`` slot of the region."""

    pattern: Literal["pointer_chase"]


class ZipfPhase(_OneRegion):
    """Page popularity by rank ``r`` proportional to ``r**-exponent``; ranks are shuffled over the pages.

    With ``hot_fraction`` and ``hot_access_fraction`` the pages split into a hot set (that fraction of the
    pages, Zipf within it) receiving ``hot_access_fraction`` of the accesses, and a cold rest accessed uniformly.
    """

    pattern: Literal["zipf"]
    exponent: Annotated[float, Field(ge=0)] = 1.0
    hot_fraction: Annotated[float, Field(gt=0, lt=1)] | None = None
    hot_access_fraction: Annotated[float, Field(ge=0, le=1)] | None = None

    @model_validator(mode="after")
    def _pair(self) -> Self:
        if (self.hot_fraction is None) != (self.hot_access_fraction is None):
            raise ValueError("hot_fraction and hot_access_fraction go together: give both or neither")
        return self


class StreamPhase(_PhaseBase):
    """One of STREAM's kernels over named arrays, a cache line at a time: read the sources, write the last."""

    pattern: Literal["stream_copy", "stream_scale", "stream_add", "stream_triad"]
    arrays: list[str] | None = None
    """Allocation names, sources first and the written array last; default STREAM's names (see STREAM_ARRAYS)."""
    split: bool = True
    """Each thread does its 1/k share of the arrays (STREAM's OpenMP loop); False: every thread does all."""

    @model_validator(mode="after")
    def _arrays(self) -> Self:
        want = len(STREAM_ARRAYS[self.pattern])
        if self.arrays is not None and len(self.arrays) != want:
            raise ValueError(f"{self.pattern} takes {want} arrays (sources, then destination), got {self.arrays}")
        if self.write_fraction:
            raise ValueError(f"write_fraction = {self.write_fraction}: {self.pattern} writes its last array")
        return self

    @property
    def array_names(self) -> tuple[str, ...]:
        return tuple(self.arrays) if self.arrays is not None else STREAM_ARRAYS[self.pattern]

    def allocations_used(self) -> tuple[str, ...]:
        return self.array_names


Phase = Annotated[
    SequentialPhase | StridedPhase | RandomPhase | PointerChasePhase | ZipfPhase | StreamPhase,
    Field(discriminator="pattern"),
]


class Workload(_Model):
    """A whole workload: threads, allocations, phases (see the module docstring for an example)."""

    name: Annotated[str, Field(min_length=1)] = "workload"
    description: str = ""
    threads: Annotated[list[WorkloadThread], Field(min_length=1)]
    allocations: list[Allocation] = Field(default_factory=list)
    phases: list[Phase] = Field(default_factory=list)
    block_accesses: Annotated[int, Field(ge=1, le=1 << 20)] = 4096
    """Accesses per round-robin block: threads take turns in blocks of this many accesses."""
    request_accesses: Annotated[int, Field(ge=1)] | None = None
    """A request is this many consecutive accesses of a thread (a server handling one request after another):
    the result then reports each request's latency, from the issue of its first access to that of the next
    request's (percentiles: tail latency). None: no requests."""
    sysctl: dict[str, int | str] = Field(default_factory=dict)
    """``[sysctl]``: knob writes the kernel gets before placement, in file order (``"kernel.numa_balancing" = 1``;
    names as :mod:`numasim.kernel.sysctl` lists them, quoted because they contain dots)."""
    _source: str | None = PrivateAttr(default=None)

    @property
    def source(self) -> str | None:
        """The file (or ``source`` name) the workload was read from, for error messages; None if built in code."""
        return self._source

    @model_validator(mode="before")
    @classmethod
    def _expand_thread_groups(cls, data: Any) -> Any:
        # Shorthand: {count = 8, node = 0} stands for 8 threads on node 0; ids default to the position.
        if not isinstance(data, dict) or not isinstance(data.get("threads"), list):
            return data
        expanded: list[Any] = []
        for i, entry in enumerate(data["threads"]):
            if isinstance(entry, dict) and "count" in entry:
                count = entry["count"]
                if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                    raise ValueError(f"threads[{i}].count = {count!r}: must be a positive integer")
                if "id" in entry:
                    raise ValueError(f"threads[{i}]: a thread group (count) takes no id; ids follow the list order")
                rest = {k: v for k, v in entry.items() if k != "count"}
                expanded.extend(dict(rest) for _ in range(count))
            else:
                expanded.append(entry)
        for i, entry in enumerate(expanded):
            if isinstance(entry, dict) and "id" not in entry:
                entry = dict(entry)
                entry["id"] = i
                expanded[i] = entry
        return {**data, "threads": expanded}

    @field_validator("sysctl", mode="before")
    @classmethod
    def _flatten_sysctl(cls, value: object) -> object:
        # Unquoted TOML keys with dots (kernel.numa_balancing = 1) arrive as nested tables: join them back.
        if not isinstance(value, dict):
            return value
        flat: dict[str, object] = {}

        def walk(prefix: str, table: dict[str, object]) -> None:
            for key, item in table.items():
                name = f"{prefix}.{key}" if prefix else key
                if isinstance(item, dict):
                    walk(name, item)
                else:
                    flat[name] = item

        walk("", value)
        return flat

    @field_validator("sysctl")
    @classmethod
    def _sysctl(cls, value: dict[str, int | str]) -> dict[str, int | str]:
        from numasim.kernel.config import KernelConfig
        from numasim.kernel.sysctl import apply_sysctls

        apply_sysctls(KernelConfig(), value)  # SysctlError (a ValueError) names the knob and its valid values
        return value

    @model_validator(mode="after")
    def _cross_check(self) -> Self:
        for i, t in enumerate(self.threads):
            if t.id != i:
                raise ValueError(f"threads[{i}].id = {t.id}: thread ids must be 0..n-1 in order")
        names = [a.name for a in self.allocations]
        for a in self.allocations:
            if names.count(a.name) > 1:
                raise ValueError(f"allocations: name {a.name!r} is used twice")
            if a.first_touch is not None and a.first_touch >= len(self.threads):
                raise ValueError(f"allocations[{a.name}].first_touch = {a.first_touch}: no such thread")
        known = set(names)
        late = {n for p in self.phases for n in p.malloc}
        alive = known - late
        created: set[str] = set()
        for i, p in enumerate(self.phases):
            if p.threads != "all":
                for tid in p.threads:
                    if tid >= len(self.threads):
                        raise ValueError(f"phases[{i}].threads: no thread {tid}")
            for n in p.malloc:
                if n not in known:
                    raise ValueError(f"phases[{i}].malloc: no allocation named {n!r}")
                if n in created:
                    raise ValueError(f"phases[{i}].malloc: {n!r} is already allocated by an earlier phase")
                created.add(n)
                alive.add(n)
            for n in p.free:
                if n not in known:
                    raise ValueError(f"phases[{i}].free: no allocation named {n!r}")
                if n not in alive:
                    raise ValueError(f"phases[{i}].free: {n!r} is not allocated at this point")
                alive.discard(n)
            for n in p.allocations_used():
                if n not in known:
                    raise ValueError(f"phases[{i}]: no allocation named {n!r} (known: {sorted(known)})")
                if n not in alive:
                    raise ValueError(f"phases[{i}]: allocation {n!r} is used while not allocated (malloc/free)")
        return self

    # --- small helpers used by the generator and the run glue ---------------------------------------------
    def allocation(self, name: str) -> Allocation:
        for a in self.allocations:
            if a.name == name:
                return a
        raise WorkloadError(f"workload {self.name}: no allocation named {name!r}")

    def phase_threads(self, index: int) -> list[int]:
        """Thread ids running phase ``index``, in increasing order."""
        p = self.phases[index]
        return list(range(len(self.threads))) if p.threads == "all" else sorted(set(p.threads))

    def malloc_phase(self, name: str) -> int:
        """Index of the phase whose start creates allocation ``name`` (0 when it exists from the start)."""
        for i, p in enumerate(self.phases):
            if name in p.malloc:
                return i
        return 0

    def free_phase(self, name: str) -> int | None:
        """Index of the phase whose start frees ``name``; None if it lives to the end."""
        for i, p in enumerate(self.phases):
            if name in p.free:
                return i
        return None

    def first_touch_thread(self, name: str) -> int:
        """The thread whose fault places ``name``'s pages: the declared one, else the first user, else 0."""
        a = self.allocation(name)
        if a.first_touch is not None:
            return a.first_touch
        for i, p in enumerate(self.phases):
            if name in p.allocations_used():
                return self.phase_threads(i)[0] if self.phase_threads(i) else 0
        return 0


def workload_error(err: ValidationError, source: str) -> WorkloadError:
    """A :class:`WorkloadError` naming the first bad field path and value of a pydantic error."""
    first = err.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "workload"
    msg = first["msg"].removeprefix("Value error, ")
    value = first.get("input")
    if isinstance(value, dict | list) and len(repr(value)) > 120:
        return WorkloadError(f"{source}: {field}: {msg}")
    return WorkloadError(f"{source}: {field} = {value!r}: {msg}")


def _from_data(data: dict[str, Any], source: str) -> Workload:
    data.pop("format", None)
    try:
        workload = Workload.model_validate(data)
        workload._source = source  # errors found later (placement on a machine) name the file too
        return workload
    except ValidationError as exc:
        raise workload_error(exc, source) from None
    except ValueError as exc:  # parse_size and friends outside pydantic's wrapping
        raise WorkloadError(f"{source}: {exc}") from None


def loads_workload(text: str, source: str = "<toml>") -> Workload:
    """Parse a workload from TOML text; errors name the source, the field path and the value."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise WorkloadError(f"{source}: not valid TOML: {exc}") from None
    return _from_data(data, source)


def load_workload(path: str | Path) -> Workload:
    """Read a workload TOML file."""
    p = Path(path)
    return loads_workload(p.read_text(encoding="utf-8"), str(p))
