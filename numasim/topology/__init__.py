"""Topology layer: the machine model, its link graph, routes, distance tables, builders and file formats."""

from numasim.topology.builders import glueless, hypercube
from numasim.topology.distances import slit, slit_from_latency, timing_distances
from numasim.topology.model import (
    CacheLevel,
    CacheScope,
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
from numasim.topology.routing import (
    Routing,
    bandwidth_table_gb_s,
    graph,
    hop_table,
    latency_table_ns,
    routing,
)

__all__ = [
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
]
