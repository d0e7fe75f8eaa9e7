"""Small machines for the memory-policy tests (shared helper, not a test module)."""

from __future__ import annotations

from numasim.kernel.config import KernelConfig
from numasim.kernel.kernel import Kernel
from numasim.topology.model import Link, Machine, MemoryController, MemoryKind, Node

MiB = 1 << 20


def machine(specs: list[tuple[list[int], int]], slit: list[list[int]] | None = None,
            kinds: dict[int, MemoryKind] | None = None, bandwidth: dict[int, float] | None = None) -> Machine:
    """Nodes given as ``(cpus, memory_mib)``; fully linked; SLIT 10/20 unless given."""
    n = len(specs)
    nodes = [
        Node(
            id=i,
            cpus=cpus,
            memory_bytes=mib * MiB,
            memory_kind=(kinds or {}).get(i, MemoryKind.DRAM),
            controller=MemoryController(latency_ns=80.0, read_bandwidth_gb_s=(bandwidth or {}).get(i, 40.0))
            if mib
            else None,
        )
        for i, (cpus, mib) in enumerate(specs)
    ]
    links = [Link(a=i, b=j, latency_ns=50.0, bandwidth_gb_s=20.0) for i in range(n) for j in range(i + 1, n)]
    table = slit or [[10 if i == j else 20 for j in range(n)] for i in range(n)]
    return Machine(name="test", nodes=nodes, links=links, firmware_slit=table)


def kernel(specs: list[tuple[list[int], int]], slit: list[list[int]] | None = None, version: str = "6.12",
           **kw: object) -> Kernel:
    return Kernel(machine(specs, slit, **kw), KernelConfig(version=version))  # type: ignore[arg-type]


def two_nodes(mib: int = 256, version: str = "6.12") -> Kernel:
    return kernel([([0, 1], mib), ([2, 3], mib)], version=version)


def four_nodes(mib: int = 64, version: str = "6.12") -> Kernel:
    return kernel([([2 * i, 2 * i + 1], mib) for i in range(4)], version=version)
