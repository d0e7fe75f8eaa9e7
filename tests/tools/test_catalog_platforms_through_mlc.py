"""Every catalog platform through the virtual mlc: its smallest SKU (of at least two cores) on a machine of its
kind (two sockets unless single-socket; a multi-node mode where the platform has one), timed from the catalog
alone, must give physically possible tables.

This is how the per-core-complex L3 of Naples and the AM5 EPYCs, the SNC cluster's L3 share, and the cross-socket
cost the Atoms' cores were charged for each other's modified lines were found (2026-12-07).
"""

from __future__ import annotations

import numpy as np
import pytest

from numasim.engine.caches import cache_levels, instance_keys
from numasim.timing.catalog import catalog_calibration, catalog_figures, load_catalog, match_cpu
from numasim.timing.catalog.model import Platform
from numasim.timing.model import apply_calibration
from numasim.tools.context import tool_context
from numasim.tools.mlc import mlc
from numasim.topology.builders import multi_die

PLATFORMS = sorted(load_catalog(), key=lambda p: p.name)


@pytest.mark.parametrize("platform", PLATFORMS, ids=[p.name for p in PLATFORMS])
def test_the_virtual_mlc_on_a_catalog_machine_of_every_platform_is_physical(platform: Platform) -> None:
    sku = min((s for s in platform.skus if s.cores >= 2), key=lambda s: (s.cores, s.model))
    k = next((m.nodes_per_socket for m in platform.numa_modes if m.nodes_per_socket > 1
              and sku.cores % m.nodes_per_socket == 0 and sku.cores >= (m.min_cores or 0)), 1)
    sockets = 1 if platform.single_socket else 2
    mode = f"{'NPS' if platform.vendor == 'amd' else 'SNC'}{k}"
    m = multi_die(sockets, mode, cores_per_socket=sku.cores, threads_per_core=max(1, sku.threads // sku.cores),
                  memory_bytes=4 << 30).model_copy(update={"cpu_model": sku.model})
    cal = catalog_calibration(m)
    fig = catalog_figures(platform, match_cpu(sku.model).sku)
    r = mlc(tool_context(m, cal), ["--latency_matrix", "--bandwidth_matrix", "--loaded_latency", "--c2c_latency"],
            delays=(0, 200, 5000))
    assert r.latency_ns is not None and r.bandwidth_mb_s is not None
    lat, bw = r.latency_ns, r.bandwidth_mb_s / 1000.0
    socket = [n.socket for n in m.nodes]
    for i in range(len(m.nodes)):
        assert lat[i, i] == pytest.approx(lat[i].min())  # its own node's memory is the nearest
        for j in range(len(m.nodes)):
            if socket[j] == socket[i]:
                assert all(lat[i, x] >= lat[i, j] for x in range(len(m.nodes)) if socket[x] != socket[i])
    assert np.all(bw > 0) and bw.max() <= fig.socket_peak_gb_s * (1 + 1e-9)
    # more load never lowers latency nor raises a lighter load's bandwidth; none below the idle latency
    latency = np.array([row[1] for row in r.loaded])
    bandwidth = np.array([row[2] for row in r.loaded])
    assert np.all(np.diff(latency) <= 0.02 * latency[:-1]) and np.all(np.diff(bandwidth) <= 0.02 * bandwidth[:-1])
    assert latency.min() >= 0.97 * lat[0, 0]
    # a modified line moves within a last-level instance at its local cost, between two of a socket at the
    # socket's (mlc's local pair is the socket's first two cpus: on the smallest EPYCs, one core a complex, two
    # complexes), across sockets at more (without measured transfer costs, the Opterons, a transfer is timed as
    # the access that would serve it)
    assert r.c2c_hitm_ns is not None
    if cal.coherence is not None:
        first_two = sorted(c for n in m.nodes if n.socket == m.nodes[0].socket for c in n.cpus)[:2]
        a, b = instance_keys(apply_calibration(m, cal), cache_levels(m, cal)[-1], first_two)
        one_instance = a == b or cal.coherence.socket_hitm_ns is None
        assert r.c2c_hitm_ns == pytest.approx(
            cal.coherence.local_hitm_ns if one_instance else cal.coherence.socket_hitm_ns, rel=0.05)
    if sockets == 2:
        writer = r.c2c_remote_ns["writer"]
        far = writer[0, [j for j in range(len(m.nodes)) if socket[j] != socket[0]]]
        assert np.all(far > r.c2c_hitm_ns)
        if k > 1 and cal.coherence is not None and platform.vendor == "intel":  # an SNC cluster of the same die
            assert writer[0, 1] == pytest.approx(r.c2c_hitm_ns, rel=0.05)
