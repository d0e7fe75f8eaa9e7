"""Topology layer: the machine model, its link graph, routes, distance tables, builders and file formats.

The names below are imported on first use (PEP 562): ``import numasim.topology.model`` does not load networkx, the
builders or the file formats, so that a kernel-only command starts quickly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from numasim._lazy import lazy_names

_SOURCES = {
    "ClusterMode": "numasim.topology.cluster_mode",
    "detect_mode": "numasim.topology.cluster_mode",
    "Reconfiguration": "numasim.topology.reconfigure",
    "reconfigure": "numasim.topology.reconfigure",
    "CacheLevel": "numasim.topology.model",
    "CacheScope": "numasim.topology.model",
    "Device": "numasim.topology.model",
    "DeviceKind": "numasim.topology.model",
    "Link": "numasim.topology.model",
    "LinkKind": "numasim.topology.model",
    "Machine": "numasim.topology.model",
    "MemoryController": "numasim.topology.model",
    "MemoryKind": "numasim.topology.model",
    "Node": "numasim.topology.model",
    "Route": "numasim.topology.model",
    "CoreDie": "numasim.topology.model",
    "Switch": "numasim.topology.model",
    "Routing": "numasim.topology.routing",
    "graph": "numasim.topology.routing",
    "routing": "numasim.topology.routing",
    "latency_table_ns": "numasim.topology.routing",
    "bandwidth_table_gb_s": "numasim.topology.routing",
    "hop_table": "numasim.topology.routing",
    "slit": "numasim.topology.distances",
    "slit_from_latency": "numasim.topology.distances",
    "timing_distances": "numasim.topology.distances",
    "hypercube": "numasim.topology.builders",
    "glueless": "numasim.topology.builders",
    "eight_socket": "numasim.topology.builders",
    "multi_die": "numasim.topology.builders",
    "crossbar": "numasim.topology.builders",
    "with_cxl_expander": "numasim.topology.builders",
    "with_device": "numasim.topology.builders",
    "cache_hierarchy": "numasim.topology.builders",
    "from_distance_matrix": "numasim.topology.infer",
    "parse_cpulist": "numasim.topology.cpulist",
    "format_cpulist": "numasim.topology.cpulist",
    "load_machine": "numasim.topology.io",
    "save_machine": "numasim.topology.io",
    "detect_format": "numasim.topology.io",
    "parse_numactl_hardware": "numasim.topology.io",
    "format_numactl_hardware": "numasim.topology.io",
    "machine_from_numactl": "numasim.topology.io",
    "numactl_hardware_for": "numasim.topology.io",
    "read_hwloc_xml": "numasim.topology.io",
    "load_machine_kerncraft": "numasim.topology.io",
    "load_machine_lscpu": "numasim.topology.io",
    "write_hwloc_xml": "numasim.topology.io",
    "read_sysfs_node_tree": "numasim.topology.io",
    "write_sysfs_node_tree": "numasim.topology.io",
    "list_shipped": "numasim.topology.library",
    "find_shipped": "numasim.topology.library",
    "render_tree": "numasim.topology.render",
}

__all__ = [
    "ClusterMode",
    "detect_mode",
    "Reconfiguration",
    "reconfigure",
    "CacheLevel",
    "CacheScope",
    "Device",
    "DeviceKind",
    "Link",
    "LinkKind",
    "Machine",
    "MemoryController",
    "MemoryKind",
    "Node",
    "Route",
    "CoreDie",
    "Switch",
    "Routing",
    "graph",
    "routing",
    "latency_table_ns",
    "bandwidth_table_gb_s",
    "hop_table",
    "slit",
    "slit_from_latency",
    "timing_distances",
    "hypercube",
    "glueless",
    "eight_socket",
    "multi_die",
    "crossbar",
    "with_cxl_expander",
    "with_device",
    "cache_hierarchy",
    "from_distance_matrix",
    "parse_cpulist",
    "format_cpulist",
    "load_machine",
    "save_machine",
    "detect_format",
    "parse_numactl_hardware",
    "format_numactl_hardware",
    "machine_from_numactl",
    "numactl_hardware_for",
    "read_hwloc_xml",
    "load_machine_kerncraft",
    "load_machine_lscpu",
    "write_hwloc_xml",
    "read_sysfs_node_tree",
    "write_sysfs_node_tree",
    "list_shipped",
    "find_shipped",
    "render_tree",
]


__getattr__, __dir__ = lazy_names(__name__, _SOURCES, __all__)

if TYPE_CHECKING:  # the names for type checkers and IDEs
    from numasim.topology.builders import (  # noqa: F401
        cache_hierarchy,
        crossbar,
        eight_socket,
        glueless,
        hypercube,
        multi_die,
        with_cxl_expander,
        with_device,
    )
    from numasim.topology.cluster_mode import ClusterMode, detect_mode  # noqa: F401
    from numasim.topology.cpulist import format_cpulist, parse_cpulist  # noqa: F401
    from numasim.topology.distances import slit, slit_from_latency, timing_distances  # noqa: F401
    from numasim.topology.infer import from_distance_matrix  # noqa: F401
    from numasim.topology.io import (  # noqa: F401
        detect_format,
        format_numactl_hardware,
        load_machine,
        load_machine_kerncraft,
        load_machine_lscpu,
        machine_from_numactl,
        numactl_hardware_for,
        parse_numactl_hardware,
        read_hwloc_xml,
        read_sysfs_node_tree,
        save_machine,
        write_hwloc_xml,
        write_sysfs_node_tree,
    )
    from numasim.topology.library import find_shipped, list_shipped  # noqa: F401
    from numasim.topology.model import (  # noqa: F401
        CacheLevel,
        CacheScope,
        CoreDie,
        Device,
        DeviceKind,
        Link,
        LinkKind,
        Machine,
        MemoryController,
        MemoryKind,
        Node,
        Route,
        Switch,
    )
    from numasim.topology.reconfigure import Reconfiguration, reconfigure  # noqa: F401
    from numasim.topology.render import render_tree  # noqa: F401
    from numasim.topology.routing import (  # noqa: F401
        Routing,
        bandwidth_table_gb_s,
        graph,
        hop_table,
        latency_table_ns,
        routing,
    )
