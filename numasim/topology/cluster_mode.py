"""Which sub-NUMA clustering mode a machine is in, and which modes its hardware can be switched to.

Intel calls splitting a socket into several NUMA nodes sub-NUMA clustering (``SNC2/3/4``; Cluster-on-Die,
``CoD``, on Haswell-EP and Broadwell-EP), AMD nodes per socket (``NPS1/2/4``). The mode is a firmware setting:
the same cores, channels and links are presented to Linux as 1, 2, 3 or 4 nodes per socket. This module reads
the current mode off a :class:`Machine` (nodes per socket) and checks a requested one against the vendor;
:mod:`numasim.topology.reconfigure` builds the machine in the other mode.

The SLIT values firmware writes in each mode are taken from machines in ``shared/data`` (cited at
:data:`FIRMWARE_SLIT`); modes without a cited table get their distances from the timing instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from numasim.errors import TopologyError
from numasim.topology.model import LinkKind, Machine

__all__ = [
    "ClusterMode", "ModeOffer", "FIRMWARE_SLIT", "detect_mode", "parse_mode", "vendor_of", "is_cod_platform", "check_request",
]

Family = Literal["snc", "nps", "cod"]
_ALLOWED: dict[str, tuple[int, ...]] = {"snc": (1, 2, 3, 4), "nps": (1, 2, 4), "cod": (1, 2)}


@dataclass(frozen=True)
class ClusterMode:
    """A clustering mode: the vendor's family of settings and the NUMA nodes per socket it gives.

    Examples
    --------
    >>> ClusterMode("snc", 1).label, ClusterMode("nps", 4).label, ClusterMode("cod", 2).label
    ('SNC off', 'NPS4', 'CoD on')
    """

    family: Family
    per_socket: int

    @property
    def label(self) -> str:
        if self.family == "nps":
            return f"NPS{self.per_socket}"
        if self.family == "cod":
            return "CoD on" if self.per_socket == 2 else "CoD off"
        return "SNC off" if self.per_socket == 1 else f"SNC{self.per_socket}"

    @property
    def suffix(self) -> str:
        """How machine names spell the mode (``snc2``, ``snc-off``, ``nps1``, ``cod``, ``cod-off``)."""
        return {"SNC off": "snc-off", "CoD on": "cod", "CoD off": "cod-off"}.get(self.label, self.label.lower())


@dataclass(frozen=True)
class ModeOffer:
    """The clustering modes a processor's firmware offers, and who says so.

    ``per_socket`` lists the nodes per socket each setting gives (1 = clustering off); ``fixed`` is True when
    no firmware setting changes the nodes per socket (one per socket on Ivy Bridge-EP; the package's dies on
    Magny-Cours and Naples). The topology
    layer knows no processors: the platform catalog builds this (:func:`numasim.timing.catalog.mode_offer`).

    Examples
    --------
    >>> ModeOffer("snc", (1, 2), False, "catalog intel-skylake-sp").labels
    'SNC off, SNC2'
    """

    family: Family
    per_socket: tuple[int, ...]
    fixed: bool
    source: str

    @property
    def labels(self) -> str:
        return ", ".join(ClusterMode(self.family, k).label for k in self.per_socket)


FIRMWARE_SLIT: dict[tuple[str, int], tuple[int, int]] = {
    ("snc", 1): (0, 21),
    ("snc", 2): (11, 21),
    ("cod", 1): (0, 21),
    ("cod", 2): (21, 31),
    ("nps", 2): (12, 0),
    ("nps", 4): (12, 0),
}
"""``(same socket, other socket)`` distances firmware writes per mode; 0 = keep the source's value.

Sources (all in ``shared/data/hwloc`` and ``shared/data/kerncraft``): SNC2 10/11/21 on a 2x Gold 6230 Dell
R740 (dell-r740-2s-gold6230-snc2-optane2lm.xml); SNC off 10/21 on a 2x Silver 4108
(supermicro-4029gp-2s-silver4108.from-sysfs.xml) and the 2x Platinum 8180 of the mlc data; CoD 10/21/31 on a
2x E5-2683 v3 Cisco B200 M4 (cisco-b200m4-2s-E5-2683v3-CoD.v1.xml): with CoD the firmware raises the other
socket from 21 to 31; NPS4 12 between quadrants on the EPYC 7452 (Zen2_EPYC-7452.yml, likwid's SLIT), the
other socket's value being kept. SNC3 and SNC4 have no table here: their same-socket distance is derived from
the timing (``round(10 * far / near)``).
"""

_COD_MODEL = re.compile(r"\bE[57]-\d{4}[A-Z]*\s*v[34]\b", re.IGNORECASE)


def is_cod_platform(machine: Machine) -> bool | None:
    """Whether the processor is a Haswell-EP/Broadwell-EP Xeon (Cluster-on-Die); ``None`` when unknown."""
    if not machine.cpu_model:
        return None
    return bool(_COD_MODEL.search(machine.cpu_model))


def vendor_of(machine: Machine) -> Literal["intel", "amd"] | None:
    """``"intel"`` or ``"amd"`` from the processor name, else from the link kinds; ``None`` if neither says."""
    model = (machine.cpu_model or "").lower()
    if any(word in model for word in ("amd", "epyc", "opteron", "ryzen")):
        return "amd"
    if any(word in model for word in ("intel", "xeon")):
        return "intel"
    kinds = {link.kind for link in machine.links}
    if kinds & {LinkKind.INFINITY_FABRIC, LinkKind.HYPERTRANSPORT}:
        return "amd"
    if kinds & {LinkKind.UPI, LinkKind.QPI, LinkKind.ON_DIE}:
        return "intel"
    return None


def detect_mode(machine: Machine) -> ClusterMode:
    """The machine's current mode: nodes per socket, the family from the vendor.

    Every node must name its socket, have cpus, and every socket must have the same number of nodes.

    Examples
    --------
    >>> from numasim.topology.builders import multi_die
    >>> detect_mode(multi_die(2, "SNC2")).label, detect_mode(multi_die(1, "NPS4")).label
    ('SNC2', 'NPS4')
    """
    missing = [n.id for n in machine.nodes if n.socket is None]
    if missing:
        raise TopologyError(
            f"nodes[{missing[0]}].socket", None, "the machine does not say which socket its nodes are on; "
            "a clustering mode is per socket (import from hwloc or sysfs, or add socket = N to each node)"
        )
    cpuless = [n.id for n in machine.nodes if not n.has_cpus]
    if cpuless:
        raise TopologyError(
            f"nodes[{cpuless[0]}].cpus", [], "memory-only nodes (CXL, MCDRAM, PMEM) have no clustering mode "
            "(reconfigure carries a CXL expander across and refuses the others)"
        )
    counts = {s: sum(1 for n in machine.nodes if n.socket == s) for s in machine.sockets}
    if len(set(counts.values())) != 1:
        raise TopologyError("nodes[].socket", counts, "sockets have different numbers of nodes: no single mode")
    per_socket = next(iter(counts.values()))
    vendor = vendor_of(machine)
    if vendor == "amd":
        family: Family = "nps"
    elif is_cod_platform(machine) or (per_socket == 2 and _has_ring(machine)):
        family = "cod"
    else:
        family = "snc"
    if per_socket not in _ALLOWED[family]:
        raise TopologyError("nodes[].socket", per_socket, f"{per_socket} nodes per socket is no {family.upper()} mode")
    return ClusterMode(family, per_socket)


def _has_ring(machine: Machine) -> bool:
    return any(s.name.endswith("-ring") for s in machine.switches)


def parse_mode(family: str, value: str) -> ClusterMode:
    """The mode a command line asks for: ``("snc", "off"|"2"|"3"|"4")``, ``("nps", "1"|"2"|"4")``,
    ``("cod", "on"|"off")``.

    Examples
    --------
    >>> parse_mode("snc", "off"), parse_mode("cod", "on").per_socket
    (ClusterMode(family='snc', per_socket=1), 2)
    """
    word = value.strip().lower()
    if family == "cod":
        table = {"on": 2, "off": 1}
    elif family == "snc":
        table = {"off": 1, "2": 2, "3": 3, "4": 4}
    elif family == "nps":
        table = {"1": 1, "2": 2, "4": 4}
    else:
        raise TopologyError("mode", family, "expected snc, nps or cod")
    if word not in table:
        raise TopologyError(f"--{family}", value, f"expected one of {', '.join(table)}")
    return ClusterMode(family, table[word])  # type: ignore[arg-type]


def check_request(machine: Machine, target: ClusterMode, offered: ModeOffer | None = None) -> ClusterMode:
    """The machine's current mode, after checking that ``target`` is a mode of the same hardware.

    Refused: another vendor's setting (``--nps`` on Intel, ``--snc``/``--cod`` on AMD), ``--snc`` on a
    Haswell/Broadwell Xeon (it has CoD) and ``--cod`` on a later one, and the mode the machine is already in.
    With ``offered`` (the processor's own list, from the platform catalog), also every mode that processor's
    firmware does not offer, e.g. SNC4 on a Skylake-SP, and any change on a package whose nodes are its dies.
    """
    current = detect_mode(machine)
    vendor = vendor_of(machine)
    flag = f"--{target.family}"
    if target.family == "nps" and vendor == "intel":
        raise TopologyError(flag, target.label, f"{machine.name} is an Intel machine: use --snc (or --cod)")
    if target.family in ("snc", "cod") and vendor == "amd":
        raise TopologyError(flag, target.label, f"{machine.name} is an AMD machine: use --nps")
    cod = is_cod_platform(machine)
    if target.family == "snc" and (cod or current.family == "cod"):
        raise TopologyError(flag, target.label, "Haswell-EP/Broadwell-EP Xeons split a socket by Cluster-on-Die: use --cod")
    if target.family == "cod" and (cod is False or current.family == "snc" and current.per_socket > 2):
        raise TopologyError(flag, target.label, f"Cluster-on-Die exists on Haswell-EP/Broadwell-EP only ({machine.cpu_model})")
    if vendor is None and cod is None and current.per_socket in _ALLOWED[target.family]:
        # Nothing says whose processor it is (no cpu_model, no telling link kinds): read the current mode in
        # the family asked for, so an NPS1 file without links goes to NPS4 as NPS, not as "SNC off".
        current = ClusterMode(target.family, current.per_socket)
    if offered is not None:
        _check_offer(machine, current, target, offered)
    if target.per_socket == current.per_socket:
        raise TopologyError(flag, target.label, f"{machine.name} is already in {current.label}")
    return current


def _check_offer(machine: Machine, current: ClusterMode, target: ClusterMode, offered: ModeOffer) -> None:
    flag = f"--{target.family}"
    if offered.fixed:
        raise TopologyError(
            flag, target.label, f"{machine.cpu_model} has no clustering setting: {offered.per_socket[0]} NUMA "
            f"node(s) per socket, fixed by the package ({offered.source})"
        )
    if current.per_socket not in offered.per_socket:
        raise TopologyError(
            "nodes[].socket", current.per_socket, f"{machine.name} has {current.per_socket} nodes per socket, which "
            f"{machine.cpu_model} does not offer ({offered.labels}; {offered.source})"
        )
    if target.family != offered.family or target.per_socket not in offered.per_socket:
        raise TopologyError(
            flag, target.label, f"{machine.cpu_model} offers {offered.labels} ({offered.source})"
        )
