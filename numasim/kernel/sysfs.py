"""The simulated kernel's ``/sys/devices/system/{node,cpu}`` and ``/sys/bus/cpu/devices``: files and symlinks.

:func:`sysfs_entries` returns what a real kernel shows there, as paths relative to the root of a file tree
(``sys/devices/system/node/node0/cpulist``) mapped to their text, and symlinks mapped to their relative targets
(``sys/devices/system/node/node0/cpu3`` -> ``../../cpu/cpu3``), so that the tree can be written anywhere and its
links still resolve inside it. The text is formatted as the kernel formats it:

* ``drivers/base/node.c``: ``possible online has_normal_memory has_memory has_cpu has_generic_initiator``
  (``print_nodes_state``: ``"%*pbl\\n"``); ``nodeN/cpumap`` (``"%*pb\\n"`` over ``nr_cpu_ids`` bits),
  ``cpulist``, ``distance`` (``"%d"`` joined by spaces), ``meminfo``, ``numastat``, ``vmstat``;
  ``nodeN/cpuK`` symlinks to ``../../cpu/cpuK`` (``register_cpu_under_node``), and
  ``nodeN/hugepages/hugepages-SIZEkB/{nr,free,surplus}_hugepages`` on nodes with memory (mm/hugetlb.c).
* ``drivers/base/cpu.c``: ``online possible present`` (``"%*pbl\\n"``), ``offline`` and ``isolated`` (an empty
  list: ``"\\n"``), ``kernel_max`` (``NR_CPUS - 1``, 8191 on distribution kernels); ``cpuN/online`` (``"1\\n"``;
  not for the boot cpu, which x86 cannot unplug); ``cpuN/nodeM`` symlinks to ``../../node/nodeM``.
* ``drivers/base/topology.c``: ``cpuN/topology/`` ids (``"%d\\n"``) and masks (``"%*pb\\n"``, lists
  ``"%*pbl\\n"``).
* ``/sys/bus/cpu/devices/cpuN`` -> ``../../../devices/system/cpu/cpuN`` (the bus's device links).

What the machine model does not know is filled in the way a machine without it looks: every cpu is a core of
its own (no SMT siblings, its own L2 cluster), a node without a ``socket`` is a package of its own, a node
without a ``die`` is die 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from numasim.kernel.procfs import (
    bitmap_string,
    format_node_numastat,
    node_meminfo_of,
    node_numastat,
    node_vmstat_of,
)
from numasim.topology.cpulist import format_cpulist

if TYPE_CHECKING:
    from numasim.kernel.kernel import Kernel

__all__ = ["SysfsEntries", "sysfs_entries", "cpu_topology", "NR_CPUS", "NODE_DIR", "CPU_DIR", "BUS_CPU_DIR"]

NR_CPUS = 8192
"""``CONFIG_NR_CPUS`` of distribution x86_64 kernels (Debian, Ubuntu, Fedora): ``kernel_max`` is one less."""
NODE_DIR = "sys/devices/system/node"
CPU_DIR = "sys/devices/system/cpu"
BUS_CPU_DIR = "sys/bus/cpu/devices"
_HUGEPAGE_SIZES_KB = (2048, 1048576)
"""x86_64's hstates: the default 2 MiB pool (the model's) and 1 GiB (always empty here)."""


@dataclass
class SysfsEntries:
    """Files (relative path -> text) and symlinks (relative path -> relative target) of a file tree."""

    files: dict[str, str] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CpuTopology:
    """``cpuN/topology`` of one cpu: its ids and the cpus sharing its core, cluster, die and package."""

    package_id: int
    die_id: int
    cluster_id: int
    core_id: int
    core_cpus: tuple[int, ...]
    cluster_cpus: tuple[int, ...]
    die_cpus: tuple[int, ...]
    package_cpus: tuple[int, ...]


def cpu_topology(kernel: Kernel) -> dict[int, CpuTopology]:
    """Every cpu's topology (module docstring: one core per cpu; a node without ``socket`` is its own
    package, numbered after the known sockets)."""
    machine = kernel.machine
    known = [n.socket for n in machine.nodes if n.socket is not None]
    next_package = max(known) + 1 if known else 0
    package_of_node: dict[int, int] = {}
    for n in machine.nodes:
        if n.socket is not None:
            package_of_node[n.id] = n.socket
        else:
            package_of_node[n.id] = next_package
            next_package += 1
    place = {c: (package_of_node[n.id], n.die or 0) for n in machine.nodes for c in n.cpus}
    packages: dict[int, list[int]] = {}
    dies: dict[tuple[int, int], list[int]] = {}
    for cpu in sorted(place):
        packages.setdefault(place[cpu][0], []).append(cpu)
        dies.setdefault(place[cpu], []).append(cpu)
    out = {}
    for cpu, (package, die) in place.items():
        core = packages[package].index(cpu)
        out[cpu] = CpuTopology(
            package_id=package, die_id=die, cluster_id=core, core_id=core, core_cpus=(cpu,), cluster_cpus=(cpu,),
            die_cpus=tuple(dies[(package, die)]), package_cpus=tuple(packages[package]),
        )  # fmt: skip
    return out


def _list(values: list[int] | tuple[int, ...]) -> str:
    return format_cpulist(sorted(values)) + "\n"


def _node_states(kernel: Kernel) -> dict[str, list[int]]:
    """``node_states[]`` as ``print_nodes_state`` names its files."""
    machine = kernel.machine
    normal = sorted({z.node for z in kernel.pm.zones if z.populated and int(z.type) <= 2})  # N_NORMAL_MEMORY
    return {
        "possible": sorted(kernel.possible_nodes),
        "online": machine.node_ids,
        "has_normal_memory": normal,
        "has_memory": sorted(kernel.memory_nodes),
        "has_cpu": [n.id for n in machine.nodes if n.cpus],
        "has_generic_initiator": [],
    }


def _node_entries(kernel: Kernel, out: SysfsEntries, nr_cpu_ids: int) -> None:
    machine = kernel.machine
    for fname, nodes in _node_states(kernel).items():
        out.files[f"{NODE_DIR}/{fname}"] = _list(nodes)
    slit = machine.slit()
    memory_nodes = kernel.memory_nodes
    for k, node in enumerate(machine.nodes):
        d = f"{NODE_DIR}/node{node.id}"
        out.files[f"{d}/cpumap"] = bitmap_string(node.cpus, nr_cpu_ids) + "\n"
        out.files[f"{d}/cpulist"] = _list(node.cpus)
        out.files[f"{d}/distance"] = " ".join(str(v) for v in slit[k]) + "\n"
        out.files[f"{d}/meminfo"] = node_meminfo_of(kernel, node.id)
        out.files[f"{d}/numastat"] = format_node_numastat(node_numastat(kernel, node.id))
        out.files[f"{d}/vmstat"] = node_vmstat_of(kernel, node.id)
        for cpu in node.cpus:
            out.links[f"{d}/cpu{cpu}"] = f"../../cpu/cpu{cpu}"
        if node.id in memory_nodes:
            for size_kb in _HUGEPAGE_SIZES_KB:
                h = f"{d}/hugepages/hugepages-{size_kb}kB"
                default = size_kb == _HUGEPAGE_SIZES_KB[0]
                out.files[f"{h}/nr_hugepages"] = f"{kernel.hugetlb.total(node.id) if default else 0}\n"
                out.files[f"{h}/free_hugepages"] = f"{kernel.hugetlb.free(node.id) if default else 0}\n"
                out.files[f"{h}/surplus_hugepages"] = "0\n"


def _cpu_entries(kernel: Kernel, out: SysfsEntries, nr_cpu_ids: int) -> None:
    cpus = kernel.machine.cpus
    for fname in ("online", "possible", "present"):
        out.files[f"{CPU_DIR}/{fname}"] = _list(cpus)
    out.files[f"{CPU_DIR}/offline"] = "\n"
    out.files[f"{CPU_DIR}/isolated"] = "\n"
    out.files[f"{CPU_DIR}/kernel_max"] = f"{NR_CPUS - 1}\n"
    node_of = kernel.machine.cpu_to_node
    for cpu, topo in cpu_topology(kernel).items():
        d = f"{CPU_DIR}/cpu{cpu}"
        if cpu != cpus[0]:
            out.files[f"{d}/online"] = "1\n"
        out.links[f"{d}/node{node_of[cpu]}"] = f"../../node/node{node_of[cpu]}"
        t = f"{d}/topology"
        for name, value in (("physical_package_id", topo.package_id), ("die_id", topo.die_id),
                            ("cluster_id", topo.cluster_id), ("core_id", topo.core_id)):  # fmt: skip
            out.files[f"{t}/{name}"] = f"{value}\n"
        for name, mask in (("core_cpus", topo.core_cpus), ("thread_siblings", topo.core_cpus),
                           ("cluster_cpus", topo.cluster_cpus), ("die_cpus", topo.die_cpus),
                           ("core_siblings", topo.package_cpus), ("package_cpus", topo.package_cpus)):  # fmt: skip
            out.files[f"{t}/{name}"] = bitmap_string(mask, nr_cpu_ids) + "\n"
            out.files[f"{t}/{name}_list"] = _list(mask)
        out.links[f"{BUS_CPU_DIR}/cpu{cpu}"] = f"../../../devices/system/cpu/cpu{cpu}"


def sysfs_entries(kernel: Kernel) -> SysfsEntries:
    """The files and symlinks of ``/sys/devices/system/node``, ``/sys/devices/system/cpu`` and
    ``/sys/bus/cpu/devices`` of the simulated kernel now (paths relative to a tree's root).

    Examples
    --------
    >>> from numasim.kernel.kernel import Kernel
    >>> from numasim.topology.builders import glueless
    >>> e = sysfs_entries(Kernel(glueless(2)))
    >>> e.files["sys/devices/system/node/node1/cpulist"], e.links["sys/devices/system/node/node1/cpu8"]
    ('8-15\\n', '../../cpu/cpu8')
    >>> e.files["sys/devices/system/node/node0/cpumap"], e.links["sys/bus/cpu/devices/cpu8"]
    ('00ff\\n', '../../../devices/system/cpu/cpu8')
    """
    cpus = kernel.machine.cpus
    nr_cpu_ids = cpus[-1] + 1 if cpus else 1  # the highest possible cpu + 1: what %*pb prints bits for
    out = SysfsEntries()
    _node_entries(kernel, out, nr_cpu_ids)
    _cpu_entries(kernel, out, nr_cpu_ids)
    return out
