"""An SNC or Cluster-on-Die cluster's share of the socket's L3, from the catalog, in the engine and across a mode
change.

Intel's sub-NUMA clustering maps the addresses of a cluster's memory controllers to the L3 slices of that cluster,
so a core working in its own node's memory has the socket's L3 over the clusters, not all of it. A catalog machine
in SNC2 used to time the whole 38.5 MiB of a Platinum 8180 for each of its cores.
"""

from __future__ import annotations

import numpy as np
import pytest
from _transfers import transfer_ns

from numasim.timing.catalog import catalog_calibration
from numasim.timing.transfer import transfer_calibration
from numasim.tools.context import tool_context
from numasim.tools.lat_mem_rd import lat_mem_rd
from numasim.topology.builders import multi_die
from numasim.topology.cluster_mode import ClusterMode
from numasim.topology.model import CacheScope, Machine
from numasim.units import MiB

PLATINUM_8180 = "Intel(R) Xeon(R) Platinum 8180 CPU @ 2.50GHz"


def _machine(mode: str) -> Machine:
    return multi_die(2, mode, cores_per_socket=28, threads_per_core=2).model_copy(update={"cpu_model": PLATINUM_8180})


def test_the_catalog_gives_each_snc_cluster_its_share_of_the_l3() -> None:
    snc2, off = catalog_calibration(_machine("SNC2")), catalog_calibration(_machine("SNC1"))
    l3_snc2 = next(c for c in snc2.caches if c.name == "L3")
    l3_off = next(c for c in off.caches if c.name == "L3")
    assert (l3_off.scope, l3_off.size_bytes) == (CacheScope.SOCKET, round(38.5 * MiB))
    assert (l3_snc2.scope, l3_snc2.size_bytes) == (CacheScope.CLUSTER, round(38.5 * MiB / 2))
    assert "own 19.25 MiB share" in snc2.provenance.notes
    prior = next(p for p in snc2.provenance.priors if p.parameter == "caches[L3].size_bytes")
    assert "over the socket's 2 clusters" in prior.source


def test_lat_mem_rd_steps_at_the_clusters_share() -> None:
    """One thread reads L3 latency while its node's memory fits its cluster's 19.25 MiB, memory beyond it."""
    m = _machine("SNC2")
    cal = catalog_calibration(m)
    l3 = next(c for c in cal.caches if c.name == "L3")
    r = lat_mem_rd(tool_context(m, cal, cpunodebind=[0], membind=[0]), "64M", [128])
    size_mb = np.array(r.size_bytes) / 2**20
    ns = np.array(r.latency_ns[128])
    assert np.all(ns[(size_mb > 2) & (size_mb < 16)] == pytest.approx(l3.latency_ns))
    assert np.all(ns[size_mb > 28] > 3 * l3.latency_ns)


def test_a_mode_change_moves_the_l3_with_the_clusters() -> None:
    m = _machine("SNC2")
    cal = catalog_calibration(m)
    off = transfer_calibration(m, cal, ClusterMode("snc", 1), threads_per_core=2)
    l3 = next(c for c in off.calibration.caches if c.name == "L3")
    assert (l3.scope, l3.size_bytes) == (CacheScope.SOCKET, round(38.5 * MiB))
    assert [c for c in off.calibration.caches if c.name != "L3"] == [c for c in cal.caches if c.name != "L3"]
    # ... and what the catalog gives the SNC-off machine directly
    direct = next(c for c in catalog_calibration(_machine("SNC1")).caches if c.name == "L3")
    assert (direct.scope, direct.size_bytes) == (l3.scope, l3.size_bytes)


def test_a_modified_line_in_the_other_cluster_of_the_socket_costs_the_local_transfer() -> None:
    """The clusters' L3 shares are separate instances, but a HITM between them crosses the socket's own mesh:
    mlc's local figure (the 2x 8269CY in SNC2 measured 45.1 ns between its clusters), not the cross-socket one."""
    from numasim.tools.mlc import mlc

    m = _machine("SNC2")
    cal = catalog_calibration(m)
    assert cal.coherence is not None and cal.coherence.remote_hitm_ns is not None
    r = mlc(tool_context(m, cal), ["--c2c_latency"])
    table = r.c2c_remote_ns["writer"] if "writer" in r.c2c_remote_ns else next(iter(r.c2c_remote_ns.values()))
    # nodes 0, 1: socket 0's clusters; 2, 3: socket 1's
    assert table[0, 1] == pytest.approx(table[1, 0]) and table[0, 1] < 0.5 * table[0, 2]
    assert table[0, 1] == pytest.approx(cal.coherence.local_hitm_ns, rel=0.1)
    assert table[0, 2] == pytest.approx(cal.coherence.remote_hitm_ns, rel=0.1)


def test_cores_that_share_no_cache_transfer_at_the_sockets_local_cost() -> None:
    """An Atom C3758R's last level is each core's share of its module's L2: no two cores share an instance, yet
    a modified line moves between them over the socket's own fabric (mlc's local HITM), not at the cross-socket
    figure (177.8 ns before)."""
    from numasim.tools.mlc import mlc

    m = multi_die(1, "SNC1", cores_per_socket=8, threads_per_core=1).model_copy(update={"cpu_model": "Atom C3758R"})
    cal = catalog_calibration(m)
    assert [c.scope for c in cal.caches] == [CacheScope.CORE, CacheScope.CORE] and cal.coherence is not None
    r = mlc(tool_context(m, cal), ["--c2c_latency"])
    assert r.c2c_hitm_ns == pytest.approx(cal.coherence.local_hitm_ns, rel=0.05)


@pytest.mark.parametrize("mode", ["epoch", "exact"])
def test_both_modes_time_a_transfer_between_clusters_at_the_sockets_local_cost(mode: str) -> None:
    """Exact mode took the clusters' L3 shares for separate domains and timed the transfer at the cross-socket
    figure (113.9 ns against epoch mode's 53.7 on a catalog 8180 in SNC2)."""
    m = _machine("SNC2")
    cal = catalog_calibration(m)
    assert cal.coherence is not None and cal.coherence.remote_hitm_ns is not None
    other_cluster = transfer_ns(m, cal, m.node(0).cpus[0], m.node(1).cpus[0], 0, mode)
    other_socket = transfer_ns(m, cal, m.node(0).cpus[0], m.node(2).cpus[0], 0, mode)
    assert other_cluster == pytest.approx(cal.coherence.local_hitm_ns, rel=0.02)
    assert other_socket == pytest.approx(cal.coherence.remote_hitm_ns, rel=0.02)
