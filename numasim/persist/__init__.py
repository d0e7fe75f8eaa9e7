"""Persistent simulated machines: a kernel whose state outlives the command that changed it.

``numasim machine start M --name NAME`` boots a kernel and saves it in a directory of its own; later
``numasim numactl`` / ``numastat`` commands run with ``NUMASIM_MACHINE=NAME`` act on that kernel (its live
processes, shared memory segments, counters) and save it again. :mod:`.state` writes and reads the kernel's
state in a versioned format, :mod:`.store` keeps the named machines and serialises commands on one machine,
:mod:`.views` writes each machine's /sys and /proc as a file tree after every change, and :mod:`.namespace`
runs a command that sees that tree in place of the host's (``numasim machine exec``).
"""

from __future__ import annotations

from numasim.persist.state import STATE_FORMAT, dump_kernel, load_kernel
from numasim.persist.store import BootOptions, MachineStore, StoredMachine, default_root
from numasim.persist.views import write_views

__all__ = ["STATE_FORMAT", "dump_kernel", "load_kernel", "BootOptions", "MachineStore", "StoredMachine",
           "default_root", "write_views"]
