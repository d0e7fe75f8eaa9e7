"""numasim: simulate where a Linux program's memory lands on a NUMA machine, and what every access costs.

The public API is listed explicitly in ``__all__``; importing numasim has no side effects and is cheap: each
name is imported from its module when first used (PEP 562), so ``numasim numactl --hardware`` does not load the
engine, numba or scipy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, for type checkers and IDEs
    from numasim.engine import (
        DeviceTransfer,
        EngineMode,
        KernelRuntime,
        PageMap,
        SimulationResult,
        ThreadSpec,
        TlbSpec,
        simulate,
    )
    from numasim.errors import (
        CalibrationError,
        FormatError,
        NumasimError,
        OutputError,
        PolicyError,
        TopologyError,
        TraceError,
        WorkloadError,
    )
    from numasim.kernel import (
        Kernel,
        KernelConfig,
        PhysicalMemory,
        PlacementPolicy,
        SyscallResult,
        available_policies,
        load_policy,
        register_policy,
    )
    from numasim.kernel.balancing import BalancingCosts, NumaBalancing
    from numasim.kernel.khugepaged import Khugepaged
    from numasim.timing.catalog import catalog_calibration, catalog_machine, match_cpu
    from numasim.timing.model import (
        Calibration,
        apply_calibration,
        load_calibration,
        nominal_calibration,
        save_calibration,
    )
    from numasim.timing.resolve import resolve_calibration
    from numasim.timing.transfer import transfer_calibration
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
        crossbar,
        eight_socket,
        from_distance_matrix,
        glueless,
        hop_table,
        hypercube,
        latency_table_ns,
        list_shipped,
        load_machine,
        multi_die,
        reconfigure,
        render_tree,
        routing,
        save_machine,
        slit,
        timing_distances,
        with_cxl_expander,
        with_device,
    )
    from numasim.workload import (
        AccessChunk,
        Workload,
        generate,
        load_workload,
        loads_workload,
        read_trace,
        trace_info,
        write_trace,
    )
    from numasim.workload.run import compare_policies, run_trace, run_workload

_LAZY = {
    "DeviceTransfer": "numasim.engine",
    "EngineMode": "numasim.engine",
    "KernelRuntime": "numasim.engine",
    "PageMap": "numasim.engine",
    "SimulationResult": "numasim.engine",
    "ThreadSpec": "numasim.engine",
    "TlbSpec": "numasim.engine",
    "simulate": "numasim.engine",
    "CalibrationError": "numasim.errors",
    "FormatError": "numasim.errors",
    "NumasimError": "numasim.errors",
    "OutputError": "numasim.errors",
    "PolicyError": "numasim.errors",
    "TopologyError": "numasim.errors",
    "TraceError": "numasim.errors",
    "WorkloadError": "numasim.errors",
    "Kernel": "numasim.kernel",
    "KernelConfig": "numasim.kernel",
    "PhysicalMemory": "numasim.kernel",
    "PlacementPolicy": "numasim.kernel",
    "SyscallResult": "numasim.kernel",
    "available_policies": "numasim.kernel",
    "load_policy": "numasim.kernel",
    "register_policy": "numasim.kernel",
    "BalancingCosts": "numasim.kernel.balancing",
    "NumaBalancing": "numasim.kernel.balancing",
    "Khugepaged": "numasim.kernel.khugepaged",
    "catalog_calibration": "numasim.timing.catalog",
    "catalog_machine": "numasim.timing.catalog",
    "match_cpu": "numasim.timing.catalog",
    "Calibration": "numasim.timing.model",
    "apply_calibration": "numasim.timing.model",
    "load_calibration": "numasim.timing.model",
    "nominal_calibration": "numasim.timing.model",
    "save_calibration": "numasim.timing.model",
    "resolve_calibration": "numasim.timing.resolve",
    "transfer_calibration": "numasim.timing.transfer",
    "CacheLevel": "numasim.topology",
    "Device": "numasim.topology",
    "Link": "numasim.topology",
    "LinkKind": "numasim.topology",
    "Machine": "numasim.topology",
    "MemoryController": "numasim.topology",
    "Node": "numasim.topology",
    "Switch": "numasim.topology",
    "bandwidth_table_gb_s": "numasim.topology",
    "crossbar": "numasim.topology",
    "eight_socket": "numasim.topology",
    "from_distance_matrix": "numasim.topology",
    "glueless": "numasim.topology",
    "hop_table": "numasim.topology",
    "hypercube": "numasim.topology",
    "latency_table_ns": "numasim.topology",
    "list_shipped": "numasim.topology",
    "load_machine": "numasim.topology",
    "multi_die": "numasim.topology",
    "reconfigure": "numasim.topology",
    "render_tree": "numasim.topology",
    "routing": "numasim.topology",
    "save_machine": "numasim.topology",
    "slit": "numasim.topology",
    "timing_distances": "numasim.topology",
    "with_cxl_expander": "numasim.topology",
    "with_device": "numasim.topology",
    "AccessChunk": "numasim.workload",
    "Workload": "numasim.workload",
    "generate": "numasim.workload",
    "load_workload": "numasim.workload",
    "loads_workload": "numasim.workload",
    "read_trace": "numasim.workload",
    "trace_info": "numasim.workload",
    "write_trace": "numasim.workload",
    "compare_policies": "numasim.workload.run",
    "run_trace": "numasim.workload.run",
    "run_workload": "numasim.workload.run",
}
"""Public name -> the module that defines it."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'numasim' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__version__ = "0.1.0"

__all__ = [
    "catalog_calibration",
    "catalog_machine",
    "match_cpu",
    "reconfigure",
    "transfer_calibration",
    "__version__",
    "NumasimError",
    "OutputError",
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
    "eight_socket",
    "multi_die",
    "crossbar",
    "with_cxl_expander",
    "with_device",
    "from_distance_matrix",
    "timing_distances",
    "load_machine",
    "save_machine",
    "list_shipped",
    "render_tree",
    "Kernel",
    "KernelConfig",
    "PhysicalMemory",
    "SyscallResult",
    "PlacementPolicy",
    "load_policy",
    "available_policies",
    "register_policy",
    "simulate",
    "SimulationResult",
    "ThreadSpec",
    "PageMap",
    "DeviceTransfer",
    "EngineMode",
    "KernelRuntime",
    "TlbSpec",
    "NumaBalancing",
    "BalancingCosts",
    "Khugepaged",
    "AccessChunk",
    "Workload",
    "load_workload",
    "loads_workload",
    "generate",
    "read_trace",
    "write_trace",
    "trace_info",
    "run_workload",
    "run_trace",
    "compare_policies",
    "Calibration",
    "nominal_calibration",
    "apply_calibration",
    "load_calibration",
    "save_calibration",
    "resolve_calibration",
]
