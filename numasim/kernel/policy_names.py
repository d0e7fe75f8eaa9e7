"""One vocabulary for memory policies: the names of the kernel's ``MPOL_*`` modes and mode flags, and the one
grammar ``MODE[:NODES[:FLAGS]]`` every policy argument of numasim is written in.

numactl keeps a single ``policies[]`` table (``util.c``) for its option names; numasim likewise keeps one table
here, read by the workload files (:mod:`numasim.workload.policy_text`), the placement layer, the kernel's
built-in policy plug-ins (:mod:`numasim.kernel.modes`) and the virtual programs (``alloc --policy``,
``memhog``). What a caller does with the ``NODES`` part differs on purpose (a workload file writes a kernel
list or ``all``; a program passes a libnuma node string or a raw ``mask=``), so :func:`split_policy` hands it
back as text.

Examples
--------
>>> mode_name("membind"), mode_name("Preferred-Many"), mode_name("nosuch")
('bind', 'preferred_many', None)
>>> split_policy("interleave:0-3:static+balancing")
('interleave', '0-3', ['static', 'balancing'])
"""

from __future__ import annotations

from numasim.kernel.mempolicy import (
    MPOL_BIND,
    MPOL_DEFAULT,
    MPOL_F_NUMA_BALANCING,
    MPOL_F_RELATIVE_NODES,
    MPOL_F_STATIC_NODES,
    MPOL_INTERLEAVE,
    MPOL_LOCAL,
    MPOL_PREFERRED,
    MPOL_PREFERRED_MANY,
    MPOL_WEIGHTED_INTERLEAVE,
)

__all__ = ["MODES", "MODE_ALIASES", "FLAGS", "FLAG_ALIASES", "mode_name", "flag_name", "split_policy"]

MODES: dict[str, int] = {
    "default": MPOL_DEFAULT,
    "local": MPOL_LOCAL,
    "preferred": MPOL_PREFERRED,
    "bind": MPOL_BIND,
    "interleave": MPOL_INTERLEAVE,
    "preferred_many": MPOL_PREFERRED_MANY,
    "weighted_interleave": MPOL_WEIGHTED_INTERLEAVE,
}
"""Canonical mode name -> ``MPOL_*`` (``include/uapi/linux/mempolicy.h``), in the kernel's order."""

MODE_ALIASES: dict[str, str] = {
    "membind": "bind",  # numactl --membind, memhog --membind
    "interleaved": "interleave",
    "weighted": "weighted_interleave",  # numactl --weighted-interleave
    "localalloc": "local",  # numactl --localalloc
    "prefer": "preferred",  # the tmpfs mpol= spelling
}
"""Other spellings users write for a mode (numactl's option names among them)."""

FLAGS: dict[str, int] = {
    "static": MPOL_F_STATIC_NODES,
    "relative": MPOL_F_RELATIVE_NODES,
    "balancing": MPOL_F_NUMA_BALANCING,
}
"""Canonical mode-flag name -> ``MPOL_F_*`` (the names ``mpol_to_str`` prints in numa_maps)."""

FLAG_ALIASES: dict[str, str] = {
    "static_nodes": "static",
    "relative_nodes": "relative",
    "numa_balancing": "balancing",
}


def mode_name(text: str) -> str | None:
    """The canonical name of a mode as a user writes it (any case, ``-`` or ``_``, an alias); None if unknown."""
    key = text.strip().lower().replace("-", "_")
    key = MODE_ALIASES.get(key, key)
    return key if key in MODES else None


def flag_name(text: str) -> str | None:
    """The canonical name of a mode flag (``static``, ``relative``, ``balancing``); None if unknown."""
    key = text.strip().lower().replace("-", "_")
    key = FLAG_ALIASES.get(key, key)
    return key if key in FLAGS else None


def split_policy(text: str) -> tuple[str, str | None, list[str]]:
    """Split ``MODE[:NODES[:FLAGS]]`` into the canonical mode, the nodes text (None when absent) and the
    canonical flag names (joined by ``+`` or ``,``; each once, in order).

    Raises :class:`~numasim.errors.PolicyError` naming the part that is wrong.
    """
    from numasim.errors import PolicyError

    parts = text.strip().split(":")
    if len(parts) > 3:
        raise PolicyError(f"policy {text!r}: expected MODE[:NODES[:FLAGS]]")
    mode = mode_name(parts[0])
    if mode is None:
        raise PolicyError(f"policy {text!r}: unknown mode {parts[0]!r} (expected one of {', '.join(MODES)})")
    flags: list[str] = []
    if len(parts) == 3 and parts[2].strip():
        for raw in parts[2].replace("+", ",").split(","):
            name = flag_name(raw)
            if name is None:
                raise PolicyError(f"policy {text!r}: unknown flag {raw!r} (expected {', '.join(FLAGS)})")
            if name not in flags:
                flags.append(name)
    return mode, (parts[1] if len(parts) > 1 else None), flags
