"""numasim: simulate where a Linux program's memory lands on a NUMA machine, and what every access costs.

The public API is listed explicitly in ``__all__``; importing numasim has no side effects.
"""

from numasim.errors import (
    CalibrationError,
    FormatError,
    NumasimError,
    PolicyError,
    TopologyError,
    TraceError,
    WorkloadError,
)
from numasim.topology import (
    CacheLevel,
    Device,
    Link,
    LinkKind,
    Machine,
    MemoryController,
    Node,
    Switch,
    bandwidth_table_gb_s,
    glueless,
    hop_table,
    hypercube,
    latency_table_ns,
    routing,
    slit,
)

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "NumasimError",
    "TopologyError",
    "FormatError",
    "PolicyError",
    "CalibrationError",
    "TraceError",
    "WorkloadError",
    "Machine",
    "Node",
    "Link",
    "LinkKind",
    "Switch",
    "Device",
    "CacheLevel",
    "MemoryController",
    "routing",
    "latency_table_ns",
    "bandwidth_table_gb_s",
    "hop_table",
    "slit",
    "hypercube",
    "glueless",
]
