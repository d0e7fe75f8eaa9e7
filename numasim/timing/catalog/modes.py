"""Which SNC/NPS/CoD settings a platform's firmware offers: the catalog's answer to the topology layer.

:mod:`numasim.topology.cluster_mode` knows the vendor families but no processors; a mode change of a machine
that names its processor is checked against the catalog's ``numa_modes`` (each entry sourced), so a Skylake-SP
cannot be put into SNC4 nor a Naples into NPS1.
"""

from __future__ import annotations

from numasim.errors import NumasimError
from numasim.timing.catalog.match import match_cpu
from numasim.timing.catalog.model import Platform, Sku
from numasim.topology.cluster_mode import Family, ModeOffer

__all__ = ["mode_offer", "mode_offer_for_cpu"]


def mode_offer(platform: Platform, sku: Sku | None = None) -> ModeOffer:
    """The clustering modes ``platform`` offers.

    A mode named ``"die"`` in the catalog is the package's own die structure (no setting); a platform with no
    modes has one node per socket and nothing to switch. Intel's one-node setting ("SNC off", "CoD off") is
    implied by any SNC/CoD entry; AMD lists NPS1 itself.

    Examples
    --------
    >>> from numasim.timing.catalog import get_platform
    >>> mode_offer(get_platform("intel-skylake-sp")).labels
    'SNC off, SNC2'
    >>> mode_offer(get_platform("amd-epyc-rome")).labels
    'NPS1, NPS2, NPS4'
    >>> o = mode_offer(get_platform("amd-epyc-naples")); o.fixed, o.per_socket
    (True, (4,))
    """
    source = f"platform catalog {platform.name}"
    names = [m.name.lower() for m in platform.numa_modes]
    family: Family = "nps" if platform.vendor == "amd" else ("cod" if "cod" in names else "snc")
    if not platform.numa_modes or all(n == "die" for n in names):
        per_socket = sorted({m.nodes_per_socket for m in platform.numa_modes} or {1})
        return ModeOffer(family, tuple(per_socket), True, source)
    # a mode only the larger SKUs offer (Cluster-on-Die needs two rings): not offered by a smaller one, said why
    short = [m for m in platform.numa_modes if sku is not None and m.min_cores is not None and sku.cores < m.min_cores]
    for m in short:
        source += f"; {m.name} needs {m.min_cores} cores or more, {sku.model} has {sku.cores}"  # type: ignore[union-attr]
    counts = {m.nodes_per_socket for m in platform.numa_modes if m.name.lower() != "die" and m not in short}
    if platform.vendor == "intel":
        counts.add(1)
    return ModeOffer(family, tuple(sorted(counts)), False, source)


def mode_offer_for_cpu(cpu_model: str | None) -> ModeOffer | None:
    """:func:`mode_offer` of the platform the OS's processor name matches; ``None`` when there is no name or the
    catalog does not know it (the vendor rules of :mod:`numasim.topology.cluster_mode` still apply)."""
    if not cpu_model:
        return None
    try:
        found = match_cpu(cpu_model)
        return mode_offer(found.platform, found.sku)
    except NumasimError:
        return None
