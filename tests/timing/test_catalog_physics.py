"""Every catalog calibration is physically possible, on every real machine whose processor the catalog knows
(the hwloc topologies of shared/data), on random multi-die machines of random SKUs, and on random CXL-capable
machines with random CXL expanders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.errors import NumasimError
from numasim.timing.catalog import catalog_calibration, catalog_figures, load_catalog, match_cpu
from numasim.timing.catalog.cxl import load_cxl_catalog
from numasim.timing.model import Calibration, apply_calibration
from numasim.topology.builders import multi_die, with_cxl_expander
from numasim.topology.io import load_machine
from numasim.topology.model import LinkKind, Machine, MemoryKind
from numasim.topology.routing import bandwidth_table_gb_s, latency_table_ns

HWLOC = Path(__file__).resolve().parents[3] / "shared" / "data" / "hwloc"


def _check(machine: Machine, cal: Calibration, cxl_devices: dict[int, str] | None = None) -> None:
    found = match_cpu(machine.cpu_model or "")
    assert found.sku is not None
    fig = catalog_figures(found.platform, found.sku)
    cxl_ids = {n.id for n in machine.nodes if n.memory_kind is MemoryKind.CXL}
    sockets = {n.socket for n in machine.nodes if n.has_memory and n.id not in cxl_ids}
    # no controller beyond its share of the socket's channels x MT/s x 8 B; together, never beyond the socket
    # (a CXL expander brings its own DRAM: it takes none of the socket's channels)
    total = sum(c.read_bandwidth_gb_s for c in cal.controllers if c.node not in cxl_ids)
    assert total <= fig.socket_peak_gb_s * max(len(sockets), 1) * (1 + 1e-9)
    for c in cal.controllers:
        assert 0 < c.read_bandwidth_gb_s <= fig.socket_peak_gb_s * (1 + 1e-9)
        assert 20.0 < c.latency_ns < 400.0
    for lt in cal.links:
        assert lt.bandwidth_gb_s > 0 and lt.latency_ns > 0
    timed = apply_calibration(machine, cal)
    lat = latency_table_ns(timed)
    ids = [n.id for n in machine.nodes if n.has_memory]
    initiators = [i for i, n in enumerate(machine.nodes) if n.has_cpus and n.has_memory]
    for i in initiators:
        row = lat[i]
        # memory of another node is never faster than the node's own
        assert np.nanmin(row) == pytest.approx(row[i]) or np.nanmin(row) >= row[i] - 1e-9
    bw = bandwidth_table_gb_s(timed)
    assert np.all(np.asarray(bw)[np.isfinite(np.asarray(bw))] > 0)
    assert len(ids) == len(cal.controllers)
    if cxl_ids:
        _check_cxl(machine, timed, lat, bw, cxl_ids, cxl_devices or {})
    for c in cal.caches:
        assert c.size_bytes > 0 and 0 < c.latency_ns < 60.0
    # a cache level is never slower than the memory behind it
    assert all(c.latency_ns < min(x.latency_ns for x in cal.controllers) for c in cal.caches)


def _check_cxl(machine: Machine, timed: Machine, lat: object, bw: object, cxl_ids: set[int],
               devices: dict[int, str]) -> None:
    """A CXL node is farther than any DRAM its readers could use instead, and no faster than its link and its
    device's DRAM allow."""
    cat = load_cxl_catalog()
    lat_a, bw_a = np.asarray(lat), np.asarray(bw)
    ids = machine.node_ids
    dram = [ids.index(n.id) for n in machine.nodes if n.has_memory and n.id not in cxl_ids]
    for node in sorted(cxl_ids):
        c = ids.index(node)
        dev = cat.device(devices[node]) if node in devices else cat.default()
        (link,) = [lk for lk in machine.links if lk.kind is LinkKind.CXL and node in (lk.a, lk.b)]
        a = ids.index(link.b if link.a == node else link.a)
        for i, n in enumerate(machine.nodes):
            if not n.has_cpus:
                continue
            # slower than any DRAM of the reader's socket, and (below) than the attach node's DRAM seen from the
            # reader. Not always slower than the other socket's DRAM: Granite Rapids' socket hop (139 ns, a public
            # 2x Xeon 6962P) is longer than the default device's 137 ns
            own = [j for j in dram if timed.nodes[j].socket == n.socket] if n.socket is not None else dram
            assert lat_a[i, c] > max((lat_a[i, j] for j in own), default=0.0)
            assert lat_a[i, c] > lat_a[i, a]  # and more than the attach node's DRAM seen from here
            assert 0 < bw_a[i, c] <= min(cat.link(dev.lanes).payload_gb_s, dev.dram_peak_gb_s) * (1 + 1e-9)


def test_the_shipped_cxl_machine_gets_a_physical_catalog_calibration() -> None:
    m = load_machine("xeon-2s-cxl")
    for device in [d.name for d in load_cxl_catalog().devices]:
        _check(m, catalog_calibration(m, cxl_device=device), {2: device})


_CXL_SKUS = sorted({(p.name, s.model) for p in load_catalog() if p.cxl is not None for s in p.skus
                    if s.cores % 4 == 0})
_DEVICES = [d.name for d in load_cxl_catalog().devices]


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(_CXL_SKUS), st.integers(1, 2), st.sampled_from(["one", "two"]),
       st.lists(st.sampled_from(_DEVICES), min_size=1, max_size=3))
def test_random_cxl_expanders_on_a_random_cxl_host(pick: tuple[str, str], sockets: int, split: str,
                                                    devices: list[str]) -> None:
    platform, model = pick
    amd = platform.startswith("amd")
    mode = {"one": "NPS1" if amd else "SNC1", "two": "NPS2" if amd else "SNC2"}[split]
    found = match_cpu(model)
    assert found.sku is not None
    m = multi_die(sockets, mode, cores_per_socket=found.sku.cores, threads_per_core=1)
    attach = [n.id for n in m.nodes if n.has_cpus]
    for k in range(len(devices)):
        m = with_cxl_expander(m, attach[k % len(attach)], 64 * 2**30)
    m = m.model_copy(update={"cpu_model": model})
    named = dict(zip([n.id for n in m.nodes if n.memory_kind is MemoryKind.CXL], devices, strict=True))
    _check(m, catalog_calibration(m, cxl_device=named), named)


@pytest.mark.skipif(not HWLOC.is_dir(), reason="shared/data is not beside this checkout")
def test_every_known_hwloc_machine_gets_a_physical_catalog_calibration() -> None:
    timed = 0
    for xml in sorted(HWLOC.glob("*.xml")):
        m = load_machine(xml)
        if not m.cpu_model:
            continue
        try:
            cal = catalog_calibration(m)
        except NumasimError:
            continue  # an unknown processor (Itanium, POWER, engineering samples) or a CXL node: said by name
        _check(m, cal)
        timed += 1
    assert timed >= 12


_SKUS = sorted({(p.name, s.model) for p in load_catalog() for s in p.skus if s.cores % 4 == 0})


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(_SKUS), st.integers(1, 2), st.sampled_from(["one", "two", "four"]))
def test_random_sku_on_a_multi_die_machine(pick: tuple[str, str], sockets: int, split: str) -> None:
    platform, model = pick
    vendor_amd = platform.startswith("amd")
    mode = {"one": "NPS1" if vendor_amd else "SNC1", "two": "NPS2" if vendor_amd else "SNC2",
            "four": "NPS4" if vendor_amd else "SNC4"}[split]
    found = match_cpu(model)
    assert found.sku is not None
    m = multi_die(sockets, mode, cores_per_socket=found.sku.cores, threads_per_core=1)
    m = m.model_copy(update={"cpu_model": model})
    try:
        cal = catalog_calibration(m)
    except NumasimError:
        return  # a SKU the catalog cannot time (said by name): nothing to check
    _check(m, cal)


def test_unnamed_sockets_are_packed_by_the_skus_cpus() -> None:
    """A numactl import names no sockets: an SNC2 node must not get a whole socket's channels."""
    m = multi_die(2, "SNC2", cores_per_socket=18, threads_per_core=2)  # Gold 6240: 18 cores, 36 threads
    bare = m.model_copy(update={"nodes": [n.model_copy(update={"socket": None, "die": None}) for n in m.nodes],
                                "cpu_model": "Intel(R) Xeon(R) Gold 6240 CPU @ 2.60GHz"})
    cal = catalog_calibration(bare)
    named = catalog_calibration(m.model_copy(update={"cpu_model": bare.cpu_model}))
    assert [c.read_bandwidth_gb_s for c in cal.controllers] == [c.read_bandwidth_gb_s for c in named.controllers]
    assert any("packed into 2 socket(s)" in line for line in cal.provenance.notes.splitlines())


def test_more_neighbours_than_links_share_the_links() -> None:
    from numasim.topology.builders import eight_socket

    m = eight_socket().model_copy(update={"cpu_model": "Intel(R) Xeon(R) Platinum 8180 CPU @ 2.50GHz"})
    cal = catalog_calibration(m)
    socket_links = 3 * 20.8 * 8 / 9  # the part's 3 UPI links, line packets 8/9
    for s in {n.socket for n in m.nodes}:
        ids = {n.id for n in m.nodes if n.socket == s}
        out = sum(lt.bandwidth_gb_s for lt in cal.links if lt.src in ids and lt.dst not in ids)
        assert out <= socket_links * (1 + 1e-9)
