"""catalog_calibration: a complete, labelled calibration from the catalog alone, checked against measured runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from numasim.calibrate.parsers.mlc import parse_mlc
from numasim.calibrate.predict import predict_bandwidth_matrix, predict_latency_matrix
from numasim.errors import CalibrationError
from numasim.timing.catalog import catalog_calibration, catalog_figures, get_platform, match_cpu
from numasim.timing.catalog.calibration import WHY
from numasim.timing.model import Calibration, load_calibration, save_calibration
from numasim.topology.builders import glueless, multi_die, with_cxl_expander
from numasim.topology.io import load_machine
from numasim.topology.routing import latency_table_ns

MLC = Path(__file__).resolve().parents[1] / "data" / "measurements" / "mlc"
MEASURED = [
    ("skylake-8180-2s", "fdio-csit-2s-skylake-plat8180.md"),
    ("seed-001-e5-2680v2", "kuleuven-thinking-2s-ivybridge-E5-2680v2.md"),
]


def _mape(pred: np.ndarray, meas: np.ndarray) -> float:
    return float(np.mean(np.abs(pred - meas) / meas) * 100)


def _prior_keys(cal: Calibration) -> set[str]:
    return {p.parameter for p in cal.provenance.priors}


def test_labelled_catalog_calibration_lists_every_parameter() -> None:
    m = multi_die(2, "SNC2", cores_per_socket=8)
    cal = catalog_calibration(m, sku="Intel(R) Xeon(R) Gold 6240 CPU @ 2.60GHz")
    prov = cal.provenance
    assert (prov.method, prov.platform) == ("catalog", "intel-cascade-lake-sp")
    assert all(p.why == WHY and p.source for p in prov.priors)
    keys = _prior_keys(cal)
    for c in cal.controllers:
        assert {f"controllers[{c.node}].{f}" for f in ("read_bandwidth_gb_s", "write_bandwidth_gb_s", "latency_ns")} <= keys
    for link in m.links:
        for a, b in ((link.a, link.b), (link.b, link.a)):
            assert {f"links[{a}->{b}].bandwidth_gb_s", f"links[{a}->{b}].latency_ns"} <= keys
    for c in cal.caches:
        assert {f"caches[{c.name}].size_bytes", f"caches[{c.name}].latency_ns"} <= keys
    # the priors go by the names every calibration's parameters go by, so fits and holdout find their sources
    from numasim.calibrate.priors import prior_source, timing_parameters

    params = timing_parameters(cal)
    # (cache-to-cache figures are carried whole, measured or borrowed, never fitted: listed with their sources, not
    # among the parameters a fit moves)
    assert {k for k in keys if not k.startswith("coherence.")} <= set(params)
    assert {k for k in keys if k.startswith("coherence.")} == {
        "coherence.local_hitm_ns", "coherence.remote_hitm_ns", "coherence.remote_hitm_home_reader_ns"}
    assert "intel-cascade-lake-sp" in prior_source(cal, "links[socket0-mesh->socket1-mesh].bandwidth_gb_s")
    assert {"core.max_outstanding_misses", "core.core_clock_ghz", "core.prefetch_distance_lines",
            "core.write_cost_factor", "core.write_latency_factor"} <= keys
    # every value the calibration holds is the value its prior states
    by_key = {p.parameter: p.value for p in prov.priors}
    assert by_key["core.core_clock_ghz"] == cal.core.core_clock_ghz == 2.6
    assert by_key["controllers[0].read_bandwidth_gb_s"] == cal.controllers[0].read_bandwidth_gb_s


def test_snc_nodes_share_their_sockets_channels() -> None:
    cal = catalog_calibration(multi_die(2, "SNC2", cores_per_socket=8), sku="Gold 6240")
    eff = get_platform("intel-cascade-lake-sp").efficiency
    assert eff is not None
    # 6 channels / 2 clusters x 2933 MT/s x 8 B x the measured efficiency
    expected = 3 * 2933 * 8 / 1000 * eff.read_factor
    assert [c.read_bandwidth_gb_s for c in cal.controllers] == pytest.approx([expected] * 4)


@pytest.mark.parametrize(
    ("sockets", "sku", "per_link_gb_s", "efficiency"),
    [
        (2, "Platinum 8180", 3 * 20.8, 0.816),  # 2 sockets: all 3 UPI links join the pair (measured on an 8180)
        (2, "Silver 4108", 2 * 19.2, 0.816),  # 2 UPI links at 9.6 GT/s
        (2, "Xeon X5570", 12.8, 0.793),  # Nehalem-EP: one QPI to the peer; QPI's efficiency from the E5-2680 v2
        (4, "E7-4870", 12.8, 0.793),  # 4-socket glueless: one of 3 socket links per pair
        (4, "Platinum 8180", 20.8, 0.816),
        (2, "Silver 4410Y", 2 * 32.0, 0.988),  # UPI 2.0 (measured on a Silver 4416+)
        (2, "Platinum 8380", 3 * 22.4, 0.816),  # Ice Lake's 11.2 GT/s UPI: nearest measured is Skylake's 10.4
    ],
)
def test_socket_links_per_pair(sockets: int, sku: str, per_link_gb_s: float, efficiency: float) -> None:
    cal = catalog_calibration(glueless(sockets), sku=sku)
    # the links' data rate x the measured share of it that carries line reads
    assert {round(lt.bandwidth_gb_s, 6) for lt in cal.links} == {round(per_link_gb_s * efficiency, 6)}
    prior = next(p for p in cal.provenance.priors if p.parameter.startswith("links["))
    assert f"x {efficiency:.3f}" in prior.source and "measured" in prior.source or "read bandwidth" in prior.source


def test_a_link_kind_without_measurement_keeps_its_packet_share() -> None:
    """HyperTransport has no measured efficiency in the catalog: a line's data packet behind its 4-byte response
    header is what its data rate carries, and said so."""
    from numasim.timing.catalog.calibration import catalog_figures
    from numasim.timing.catalog.loader import load_catalog

    k10 = next(p for p in load_catalog() if p.name == "amd-opteron-k10")
    fig = catalog_figures(k10, k10.skus[0])
    assert fig.link_read_efficiency == pytest.approx(64 / 68)
    assert "no measured hypertransport link" in fig.link_read_efficiency_source
    assert "4-byte read-response control packet" in fig.link_read_efficiency_source


def test_idle_latency_is_the_local_and_remote_prior() -> None:
    m = glueless(2)
    cal = catalog_calibration(m, sku="Platinum 8180")
    lat = get_platform("intel-skylake-sp").latency
    assert lat is not None and lat.remote_ns is not None
    from numasim.timing.model import apply_calibration

    table = latency_table_ns(apply_calibration(m, cal))
    assert table == pytest.approx(np.array([[lat.local_ns, lat.remote_ns], [lat.remote_ns, lat.local_ns]]))


def test_multi_hop_routes_split_the_remote_latency_over_socket_hops() -> None:
    # The 8180's 81.4 ns was measured in SNC off: a mean over the socket's clusters. In SNC2 each cluster's own
    # is 8 ns (this machine's route to its sibling) / 2 lower, its sibling's that much higher; the remote prior
    # stays what it is, mesh hops included.
    m = multi_die(2, "SNC2", cores_per_socket=8)
    cal = catalog_calibration(m, sku="Platinum 8180")
    from numasim.timing.model import apply_calibration

    table = latency_table_ns(apply_calibration(m, cal))
    lat = get_platform("intel-skylake-sp").latency
    assert lat is not None and lat.remote_ns is not None
    # node 0 (socket 0) -> node 2 (socket 1): the remote prior
    assert table[0, 2] == pytest.approx(lat.remote_ns) and table[1, 3] == pytest.approx(lat.remote_ns)
    hop = table[0, 1] - table[0, 0]
    assert hop == pytest.approx(8.0)
    assert table[0, 0] == pytest.approx(lat.local_ns - hop / 2)
    assert (table[0, 0] + table[0, 1]) / 2 == pytest.approx(lat.local_ns)
    src = next(p.source for p in cal.provenance.priors if p.parameter == "controllers[0].latency_ns")
    assert "mean over its 2 clusters" in src


def test_missing_figures_are_borrowed_and_said_so() -> None:
    cal = catalog_calibration(glueless(2), sku="EPYC 9654")
    sources = {p.parameter: p.source for p in cal.provenance.priors}
    assert "borrowed from amd-epyc-rome" in sources["controllers[0].latency_ns"]
    # Genoa's efficiency is its own (Micron's STREAM figure); Skylake-SP has none and takes the catalog's median
    assert "efficiency 0.820" in sources["controllers[0].read_bandwidth_gb_s"]
    assert "Micron DDR5 Memory Now Available for 4th Gen AMD EPYC" in sources["controllers[0].read_bandwidth_gb_s"]
    skx = catalog_calibration(glueless(2), sku="Xeon Platinum 8180")
    skx_bw = {p.parameter: p.source for p in skx.provenance.priors}["controllers[0].read_bandwidth_gb_s"]
    assert "median of the catalog" in skx_bw
    assert "L1D fill buffers" in sources["core.max_outstanding_misses"] and cal.core.max_outstanding_misses == 24
    milan = catalog_calibration(glueless(2), sku="EPYC 7763")
    assert "numasim default" in {p.parameter: p.source for p in milan.provenance.priors}["core.max_outstanding_misses"]


def test_remote_latency_comes_from_the_platforms_own_coherence_tiers_before_another_vendors() -> None:
    """No AMD platform has a measured remote latency to lend. Genoa took Sapphire Rapids' 54.9 ns, where its own
    cache-to-cache tiers (another socket 197.6 ns, another core complex 103.4) give 94.2 and a public 2x EPYC 9224
    measured 93. Intel platforms keep borrowing from Intel: their tiers and memory agree only within a fifth."""
    from numasim.timing.catalog.calibration import coherence_remote_delta, remote_from_coherence
    from numasim.timing.model import apply_calibration

    genoa = get_platform("amd-epyc-genoa")
    got = remote_from_coherence(genoa, 2)
    assert got is not None and got[0] == pytest.approx(197.6 - 103.4) and got[2].name == "amd-epyc-genoa"
    assert "cache-to-cache tiers" in got[1] and "197.6" in got[1] and "103.4" in got[1]
    cal = catalog_calibration(glueless(2), sku="EPYC 9654")
    table = latency_table_ns(apply_calibration(glueless(2), cal))
    assert table[0, 1] - table[0, 0] == pytest.approx(197.6 - 103.4)
    sources = {p.parameter: p.source for p in cal.provenance.priors}
    link = next(v for k, v in sources.items() if k.startswith("links[") and k.endswith("latency_ns"))
    assert "cache-to-cache tiers" in link and "intel-sapphire-rapids" not in link
    # Broadwell-EP has tiers too, but Skylake-SP lends it an Intel remote latency: still borrowed
    bdw = get_platform("intel-broadwell-ep")
    assert coherence_remote_delta(bdw) is not None and remote_from_coherence(bdw, 2) is None
    bdw_src = {p.parameter: p.source for p in catalog_calibration(glueless(2), sku="E5-2682 v4").provenance.priors}
    assert any("borrowed from intel-skylake-sp" in v for k, v in bdw_src.items() if k.startswith("links["))
    # a platform's own measured remote latency wins over its tiers (Skylake-SP has both)
    assert remote_from_coherence(get_platform("intel-skylake-sp"), 2) is None
    # Turin has no tiers of its own: it takes those of the platform its cache-to-cache latencies come from (Genoa)
    turin = get_platform("amd-epyc-turin")
    assert coherence_remote_delta(turin) is None
    lent = remote_from_coherence(turin, 2)
    assert lent is not None and lent[0] == pytest.approx(197.6 - 103.4) and lent[2].name == "amd-epyc-genoa"
    assert lent[1].startswith("borrowed from amd-epyc-genoa") and "no cache-to-cache tiers of its own" in lent[1]
    # the Opterons' HyperTransport has no measured tiers of its kind: they borrow memory figures as before
    assert remote_from_coherence(get_platform("amd-opteron-k10"), 2) is None


def test_cache_latency_is_cycles_at_the_base_clock() -> None:
    cal = catalog_calibration(glueless(2), sku="EPYC 7452")
    l2 = next(c for c in cal.caches if c.name == "L2")
    assert l2.latency_ns == pytest.approx(13 / 2.35)
    l3 = next(c for c in cal.caches if c.name == "L3")
    # 8 cpus a node here: the catalog's 4 core dies a socket get one core each, which no 4-core complex fits,
    # so the SKU's 128 MiB stay one socket-wide cache, said so (tests/engine/test_core_complex_caches.py: the
    # complexes on a machine of the SKU's size)
    assert l3.size_bytes == 128 * 2**20 and l3.scope == "socket"
    assert "socket-wide" in cal.provenance.notes


def test_a_given_clock_replaces_the_running_clock_and_the_caches_follow_it() -> None:
    # the catalog knows no all-core turbo for a Gold 6240 (its base 2.6 GHz is the prior); a user who measured
    # the box (turbostat's Bzy_MHz under load) gives 3.3: the prior says so and the cycles count at it
    base = catalog_calibration(glueless(2), sku="Gold 6240")
    given = catalog_calibration(glueless(2), sku="Gold 6240", core_clock_ghz=3.3)
    assert base.core.core_clock_ghz == pytest.approx(2.6) and given.core.core_clock_ghz == pytest.approx(3.3)
    src = {p.parameter: p.source for p in given.provenance.priors}["core.core_clock_ghz"]
    assert "given (3.3 GHz, --core-clock-ghz)" in src and "base: 2.6 GHz" in src
    l2 = {c.name: c.latency_ns for c in base.caches}["L2"], {c.name: c.latency_ns for c in given.caches}["L2"]
    assert l2[1] == pytest.approx(l2[0] * 2.6 / 3.3)
    with pytest.raises(CalibrationError, match=r"core_clock_ghz = 3300: .*did you mean 3.3 GHz"):
        catalog_calibration(glueless(2), sku="Gold 6240", core_clock_ghz=3300)
    with pytest.raises(CalibrationError, match=r"core_clock_ghz = 0: a core clock in GHz"):
        catalog_calibration(glueless(2), sku="Gold 6240", core_clock_ghz=0)


def test_cxl_node_on_a_platform_without_cxl_is_an_error_naming_both() -> None:
    m = with_cxl_expander(glueless(2), 0, 64 * 2**30)
    with pytest.raises(CalibrationError, match=r"node 2 of .* is cxl memory, but .*intel-cascade-lake-sp has no CXL"):
        catalog_calibration(m, sku="Gold 6240")


def test_no_cpu_model_and_no_sku_is_an_error() -> None:
    with pytest.raises(CalibrationError, match="names no cpu_model"):
        catalog_calibration(glueless(2))


def test_a_platform_name_without_a_sku_is_an_error_listing_skus() -> None:
    with pytest.raises(CalibrationError, match=r"no SKU of it.*Xeon E5-2699 v4"):
        catalog_calibration(glueless(2), sku="intel-broadwell-ep")


@pytest.mark.parametrize(("cpu", "cpus_per_node", "cores", "pick"), [
    # AWS's Sapphire Rapids part (48 cores a socket on a c7i.metal-48xl), named without a clock
    ("Intel(R) Xeon(R) Platinum 8488C", 96, 48, "Xeon Platinum 8468"),
    # an unlisted Broadwell-EP with its clock in the string
    ("Intel(R) Xeon(R) CPU E5-2699A v4 @ 2.40GHz", 44, 22, "Xeon E5-2699 v4"),
    ("AMD EPYC 9R14 96-Core Processor", 192, 96, "EPYC 9654"),
])
def test_an_unlisted_part_is_timed_as_its_nearest_listed_sku_and_says_so(
    cpu: str, cpus_per_node: int, cores: int, pick: str
) -> None:
    """A cloud provider's own part (or any SKU the catalog does not list) that its platform's pattern recognises
    used to be an error ("no SKU of it"): every AWS, Azure or Google box stopped there. Now the platform's listed
    SKU nearest in cores stands in, with the machine's cores, the string's clock where it gives one, and the
    calibration's notes and every prior's source say so."""
    from numasim.timing.catalog.calibration import stand_in_sku

    m = glueless(2, cpus_per_node=cpus_per_node).model_copy(update={"cpu_model": cpu})
    found = stand_in_sku(match_cpu(cpu), m)
    assert found.sku is not None and found.how == "pattern"
    assert found.sku.cores == cores and found.sku.threads == 2 * cores
    assert f"as {pick}" in found.sku.model and "unlisted" in found.sku.model
    cal = catalog_calibration(m)
    assert "is not listed in the catalog's" in cal.provenance.notes and pick in cal.provenance.notes
    (clock,) = [p for p in cal.provenance.priors if p.parameter == "core.core_clock_ghz"]
    assert "unlisted" in clock.source
    if "@" in cpu:
        assert found.sku.base_ghz == 2.4 and found.sku.all_core_turbo_ghz is None
        assert cal.core.core_clock_ghz == 2.4


def test_an_unlisted_intel_part_s_l3_follows_its_cores() -> None:
    from numasim.timing.catalog.calibration import stand_in_sku

    # 40 cpus a socket of a Sapphire Rapids part: 20 cores, where the nearest listed SKU may have another count
    m = glueless(2, cpus_per_node=40).model_copy(update={"cpu_model": "Intel(R) Xeon(R) Gold 6499X"})
    found = stand_in_sku(match_cpu(m.cpu_model or ""), m)
    assert found.sku is not None and found.sku.cores == 20
    listed = next(s for s in found.platform.skus if s.model in found.sku.model)
    assert listed.l3_mib is not None and found.sku.l3_mib == pytest.approx(listed.l3_mib * 20 / listed.cores)


def test_machine_cpu_model_is_used_and_the_calibration_round_trips(tmp_path: Path) -> None:
    m = load_machine("skylake-8180-2s")
    cal = catalog_calibration(m)
    assert cal.provenance.platform == "intel-skylake-sp" and cal.machine == m.name
    save_calibration(cal, tmp_path / "c.json")
    assert load_calibration(tmp_path / "c.json") == cal
    assert catalog_calibration(m) == cal.model_copy(update={"provenance": catalog_calibration(m).provenance})


@pytest.mark.parametrize(("machine", "page"), MEASURED)
def test_catalog_only_against_the_measured_runs(machine: str, page: str) -> None:
    """Catalog-only prediction vs the two measured mlc runs (generous bounds: a prior, not a fit).

    Bandwidth is out of sample: channels and DDR speed from the vendor, efficiency the median of the kerncraft
    factors of other CPUs, socket links from the link rate. Latency is in sample here (these two runs are the
    platforms' latency priors), so the leave-one-out check below borrows the other platform's instead.
    """
    m = load_machine(machine)
    cal = catalog_calibration(m)
    run = parse_mlc(MLC / page)
    lat = predict_latency_matrix(m, cal, run.latency_matrix)
    bw = predict_bandwidth_matrix(m, cal, run.bandwidth_matrix)
    assert _mape(bw.values, run.bandwidth_matrix.values) < 35.0
    assert _mape(lat.values, run.latency_matrix.values) < 5.0  # in sample


@pytest.mark.parametrize(("machine", "page"), MEASURED)
def test_leave_one_out_latency(machine: str, page: str) -> None:
    m = load_machine(machine)
    found = match_cpu(m.cpu_model or "")
    assert found.sku is not None
    fig = catalog_figures(found.platform.model_copy(update={"latency": None}), found.sku)
    assert "borrowed" in fig.local_source
    local, remote = fig.local_ns, fig.local_ns + fig.remote_minus_local_ns
    meas = parse_mlc(MLC / page).latency_matrix.values
    pred = np.array([[local, remote], [remote, local]])
    assert _mape(pred, meas) < 35.0


def test_local_latency_prior_follows_the_numa_mode_it_was_measured_in() -> None:
    from numasim.topology.builders import multi_die

    def local(mode: str) -> tuple[float, str]:
        m = multi_die(1, mode).model_copy(update={"cpu_model": "AMD EPYC 7452 32-Core Processor"})
        cal = catalog_calibration(m)
        src = next(p.source for p in cal.provenance.priors if p.parameter == "controllers[0].latency_ns")
        return cal.controllers[0].latency_ns, src

    # Rome's source measured 113 ns in NPS4 and 122 ns in NPS1 (interleaving over every channel of the socket).
    assert local("NPS4") == (113.0, local("NPS4")[1]) and "this machine's mode" in local("NPS4")[1]
    assert local("NPS1")[0] == 122.0 and "NPS1 figure" in local("NPS1")[1]
    value, src = local("NPS2")
    assert value == 113.0 and "used as is" in src and "NPS2" in src


@pytest.mark.parametrize(("cpu", "mode"), [("AMD EPYC 7452 32-Core Processor", "NPS4"),
                                           ("AMD EPYC 9354P 32-Core Processor", "NPS4"),
                                           ("AMD EPYC 9224 24-Core Processor", "NPS2")])  # fmt: skip
def test_a_sibling_cluster_adds_what_the_two_modes_local_figures_imply(cpu: str, mode: str) -> None:
    """Rome's source measured 122 ns in NPS1 (a mean over the four quadrants) and 113 ns in NPS4 (one's own):
    the three others add (122 - 113) x 4/3 = 12 ns on average. The I/O die's links on a sibling route carry it,
    half each; the socket links still carry what is left of the remote figure. Genoa borrows both figures."""
    m = multi_die(2, mode).model_copy(update={"cpu_model": cpu})
    cal = catalog_calibration(m)
    from numasim.calibrate.predict import calibrated

    timed = calibrated(m, cal)
    full = latency_table_ns(timed)
    index = {nid: k for k, nid in enumerate(timed.node_ids)}
    socket_of = {n.id: n.socket for n in m.nodes}
    cpus = [n.id for n in m.nodes if n.has_cpus]

    def table(pair: tuple[int, int]) -> float:
        return float(full[index[pair[0]], index[pair[1]]])

    for a in cpus:
        for b in cpus:
            if a != b and socket_of[a] == socket_of[b]:
                assert table((a, b)) - table((a, a)) == pytest.approx(12.0)
    siblings = [p for p in cal.provenance.priors if "sibling cluster's memory adds 12.0 ns" in p.source]
    assert siblings and all(p.value == pytest.approx(6.0) for p in siblings)
    assert all("(NPS1 122 - NPS4 113 ns) x 4/3" in p.source for p in siblings)
    fig = catalog_figures(match_cpu(cpu).platform, match_cpu(cpu).sku, nodes_per_socket=int(mode[-1]))  # type: ignore[arg-type]
    remote = [table((a, b)) for a in cpus for b in cpus if socket_of[a] != socket_of[b]]
    assert np.mean(remote) - table((cpus[0], cpus[0])) == pytest.approx(fig.remote_minus_local_ns)


def test_a_sibling_route_figure_needs_both_modes_of_the_machines_family() -> None:
    from numasim.timing.catalog.calibration import sibling_route

    rome = get_platform("amd-epyc-rome").latency
    assert rome is not None
    assert sibling_route(rome, "NPS4") is not None and sibling_route(rome, "NPS4")[0] == pytest.approx(12.0)  # type: ignore[index]
    assert sibling_route(rome, "die") is None  # Naples' dies borrowing Rome's quadrants: another geometry
    assert sibling_route(rome.model_copy(update={"local_ns_by_mode": {}}), "NPS4") is None  # one mode only
    skx = get_platform("intel-skylake-sp").latency
    assert skx is not None and sibling_route(skx, "SNC2") is None  # measured with one node a socket only


def test_a_sibling_hop_longer_than_the_local_figure_is_a_clear_error() -> None:
    m = multi_die(2, "SNC2", cores_per_socket=8, die_latency_ns=400.0)
    with pytest.raises(CalibrationError, match=r"route to its sibling clusters \(400.0 ns"):
        catalog_calibration(m, sku="Platinum 8180")


def test_cache_to_cache_figures_come_from_a_measurement_of_the_platform_or_of_its_nearest_kin() -> None:
    # Ivy Bridge-EP, Broadwell-EP and Skylake-SP carry their mlc --c2c_latency runs' HITM figures, each with its
    # source; a platform nobody measured borrows those of the nearest measured one of its vendor and socket link
    # (said so: the L3-hit fallback timed Broadwell's 46.3 ns transfer at 17.7, where Skylake's figures give the
    # held-out 8269CY's within 2 %); Turin borrows Genoa's ping-pong tiers (a socket figure between core
    # complexes), Siena's dense cores Bergamo's; with no such platform (the Opterons' HyperTransport) it has none,
    # said so.
    ivy = catalog_calibration(load_machine("seed-001-e5-2680v2"))
    assert ivy.coherence is not None and (ivy.coherence.local_hitm_ns, ivy.coherence.remote_hitm_ns) == (28.3, 70.05)
    assert "kuleuven" in ivy.coherence.source
    assert {p.parameter for p in ivy.provenance.priors} >= {
        "coherence.local_hitm_ns", "coherence.remote_hitm_ns", "coherence.remote_hitm_home_reader_ns"
    }
    skx = catalog_calibration(load_machine("skylake-8180-2s"))
    assert skx.coherence is not None and skx.coherence.remote_hitm_home_reader_ns == 177.75
    for platform in ("intel-cascade-lake-sp", "amd-epyc-turin"):
        assert get_platform(platform).coherence is None
    clx = catalog_calibration(glueless(2), sku="Xeon Gold 6240")
    assert clx.coherence is not None and clx.coherence.local_hitm_ns == skx.coherence.local_hitm_ns
    assert clx.coherence.source.startswith("borrowed from intel-skylake-sp")
    turin = catalog_calibration(glueless(2), sku="EPYC 9555")
    assert turin.coherence is not None and turin.coherence.source.startswith("borrowed from amd-epyc-genoa")
    assert (turin.coherence.local_hitm_ns, turin.coherence.socket_hitm_ns) == (26.5, 103.4)
    assert "coherence.socket_hitm_ns" in {p.parameter for p in turin.provenance.priors}
    siena = catalog_calibration(glueless(1), sku="EPYC 8534P")
    assert siena.coherence is not None and siena.coherence.source.startswith("borrowed from amd-epyc-bergamo")
    opteron = catalog_calibration(glueless(2), sku="Opteron 6380")
    assert opteron.coherence is None and "no cache-to-cache latencies" in opteron.provenance.notes


@pytest.mark.parametrize(
    ("cpu", "l3_cycles"),
    [
        ("Intel(R) Xeon(R) CPU X5570 @ 2.93GHz", 40),  # Nehalem-EP, Intel's own figure
        ("Intel(R) Xeon(R) CPU E5-2697 v4 @ 2.30GHz", 45),  # Broadwell-EP, lmbench
        ("Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz", 55),  # Skylake-SP, lmbench
        ("Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", 46),  # Cascade Lake-SP, AnandTech's tool
        ("AMD EPYC 7451 24-Core Processor", 40),  # Naples
        ("AMD EPYC 9654 96-Core Processor", 50),  # Genoa, derived from Chips and Cheese
    ],
)
def test_the_l3_is_timed_where_a_source_gives_its_latency(cpu: str, l3_cycles: int) -> None:
    """Without an L3 a working set of a few MB would cost a memory access: the level is there, between L2 and
    memory, at the cited cycles of the running clock, and its source is listed."""
    amd = cpu.startswith("AMD")
    m = multi_die(1, "NPS1" if amd else "SNC1", cores_per_socket=8, threads_per_core=2)
    cal = catalog_calibration(m, sku=cpu)
    clock = cal.core.core_clock_ghz
    levels = {c.name: c for c in cal.caches}
    assert list(levels)[-1] == "L3" and levels["L3"].latency_ns == pytest.approx(l3_cycles / clock)
    assert levels["L2"].latency_ns < levels["L3"].latency_ns < min(c.latency_ns for c in cal.controllers)
    prior = next(p for p in cal.provenance.priors if p.parameter == "caches[L3].latency_ns")
    assert f"{l3_cycles:g} cycles / {clock:g} GHz" in prior.source
    assert not any("L3: neither the catalog" in n for n in cal.provenance.notes)


def test_lat_mem_rd_on_a_catalog_machine_steps_through_the_l3() -> None:
    from numasim.tools.context import tool_context
    from numasim.tools.lat_mem_rd import lat_mem_rd

    m = multi_die(2, "SNC1", cores_per_socket=20, threads_per_core=2)
    cal = catalog_calibration(m, sku="Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz")
    # a 256-byte stride: the model prefetches a line when the line before it was just requested, so at this
    # stride the chase times the cache level itself
    r = lat_mem_rd(tool_context(m, cal, cpunodebind=[0], membind=[0]), "256M", [256])
    sizes, lat = np.array(r.size_bytes), np.array(r.latency_ns[256])
    l3 = {c.name: c for c in cal.caches}["L3"]
    # a working set between the L2 (1 MiB) and the L3 (27.5 MiB) is served by the L3, not by memory
    in_l3 = (sizes >= 2 << 20) & (sizes <= 24 << 20)
    assert np.allclose(lat[in_l3], l3.latency_ns, rtol=0.05)
    assert np.all(lat[sizes >= 32 << 20] > 2 * l3.latency_ns)  # memory
    assert np.all(np.diff(lat) >= -1e-6 * lat[1:])  # never faster for a larger working set


@pytest.mark.parametrize(("cpu", "platform", "depth"), [
    ("Intel(R) Xeon(R) Gold 6240 CPU @ 2.60GHz", "intel-cascade-lake-sp", 7),
    ("Intel(R) Xeon(R) Platinum 8180 CPU @ 2.50GHz", "intel-skylake-sp", 11),
    ("AMD EPYC 7452 32-Core Processor", "amd-epyc-rome", 29),
])
def test_a_cores_stream_depth_comes_from_a_one_core_measurement_of_its_platform(cpu: str, platform: str,
                                                                                 depth: int) -> None:
    cal = catalog_calibration(glueless(2, cpus_per_node=8), sku=cpu)
    assert cal.core.prefetch_distance_lines == depth == get_platform(platform).stream.prefetch_lines  # type: ignore[union-attr]
    prior = next(p for p in cal.provenance.priors if p.parameter == "core.prefetch_distance_lines")
    assert "likwid-bench load on one core" in prior.source and "kerncraft" in prior.source


def test_without_a_one_core_measurement_the_default_depth_is_said_so() -> None:
    cal = catalog_calibration(glueless(2, cpus_per_node=8), sku="Intel(R) Xeon(R) CPU E5-2680 v2 @ 2.80GHz")
    assert get_platform("intel-ivy-bridge-ep").stream is None
    prior = next(p for p in cal.provenance.priors if p.parameter == "core.prefetch_distance_lines")
    assert cal.core.prefetch_distance_lines == 16 and "no one-core streaming measurement" in prior.source


def test_a_store_miss_costs_two_lines_and_waits_for_one() -> None:
    """The catalog's store miss: two lines of traffic (read for ownership, write-back), a read's latency."""
    from numasim.engine.memsys import build_memory_system

    m = glueless(2, cpus_per_node=8)
    cal = catalog_calibration(m, sku="Intel(R) Xeon(R) Gold 6240 CPU @ 2.60GHz")
    assert (cal.core.write_cost_factor, cal.core.write_latency_factor, cal.core.write_latency) == (2.0, 1.0, 1.0)
    base = build_memory_system(m, cal).class_base_latency_ns()
    assert np.allclose(base[1::2], base[0::2])
    # a calibration that does not say keeps one factor for both (a hop table's write/read latency ratio)
    coupled = cal.model_copy(update={"core": cal.core.model_copy(update={"write_latency_factor": None})})
    assert coupled.core.write_latency == 2.0
    assert np.allclose(build_memory_system(m, coupled).class_base_latency_ns()[1::2], 2.0 * base[0::2])


def test_k8_opteron_controllers_bear_amds_sustained_figure() -> None:
    """AMD's ccNUMA guide (40555) takes 70 % of DDR-400's 6.4 GB/s as a K8 node's sustained bandwidth; the
    catalog's K8 priors and Drepper's shipped Opteron (seed-002, which has no cpu model to look up) agree on it."""
    cal = catalog_calibration(glueless(4), sku="Opteron 875")
    src = {p.parameter: p.source for p in cal.provenance.priors}["controllers[0].read_bandwidth_gb_s"]
    assert cal.controller(0).read_bandwidth_gb_s == pytest.approx(2 * 400 * 8 / 1000 * 0.70)
    assert "efficiency 0.7" in src and "40555" in src
    seed = load_calibration(Path(__file__).parents[2] / "topologies" / "seed-002-opteron-4s.cal.json")
    for node in range(4):
        assert seed.controller(node).read_bandwidth_gb_s == pytest.approx(cal.controller(0).read_bandwidth_gb_s)


def test_opteron_latency_follows_the_socket_count() -> None:
    """A K8 Opteron's reads wait for every other chip's snoop answer: 60 ns local on 2 sockets, 95 on 4
    (McCalpin), 8.5 % more one hop away on 4 (AMD 40555); that remote figure lends to 4-socket machines only."""
    from numasim.timing.model import apply_calibration

    four = catalog_calibration(glueless(4), sku="Opteron 875")
    assert latency_table_ns(apply_calibration(glueless(4), four))[0] == pytest.approx([95.0, 103.1, 103.1, 103.1])
    two = catalog_calibration(glueless(2), sku="Opteron 875")
    src = {p.parameter: p.source for p in two.provenance.priors}
    assert two.controller(0).latency_ns == pytest.approx(60.0)
    assert "2-socket figure, this machine's socket count" in src["controllers[0].latency_ns"]
    link = next(v for k, v in src.items() if k.startswith("links[") and k.endswith("latency_ns"))
    assert "measured on 4 sockets and this machine has 2" in link and "amd-opteron-k8" not in link.split(":")[0]
    # K10 (2-socket figure) borrows K8's one-hop difference on 4 sockets only; EPYC never does
    k10 = {p.parameter: p.source for p in catalog_calibration(glueless(4), sku="Opteron 8384").provenance.priors}
    assert any("borrowed from amd-opteron-k8" in v for k, v in k10.items() if k.startswith("links["))
    rome = {p.parameter: p.source for p in catalog_calibration(glueless(2), sku="EPYC 7452").provenance.priors}
    assert not any("amd-opteron-k8" in v for v in rome.values())


def test_a_latency_by_socket_count_needs_the_measured_count() -> None:
    from numasim.timing.catalog.model import LatencyPrior

    with pytest.raises(ValueError, match="needs sockets"):
        LatencyPrior(local_ns=95.0, measured_on="x", sources=["s"], local_ns_by_sockets={2: 60.0})
    with pytest.raises(ValueError, match="must be >= 1 and differ"):
        LatencyPrior(local_ns=95.0, measured_on="x", sources=["s"], sockets=4, local_ns_by_sockets={4: 60.0})


@pytest.mark.parametrize("sockets", [1, 2, 4])
def test_every_platform_prices_memory_within_physical_bounds_on_any_socket_count(sockets: int) -> None:
    """Whatever a platform's latency figures were measured on (a mode, a socket count) and whoever lends the
    rest, its catalog calibration of a glueless machine keeps remote memory dearer than local, latencies in
    tens to hundreds of ns, and each controller within its channels' peak."""
    from numasim.timing.catalog import load_catalog
    from numasim.timing.model import apply_calibration

    m = glueless(sockets)
    for platform in load_catalog():
        sku = platform.skus[0]
        if platform.single_socket and sockets > 1:
            with pytest.raises(CalibrationError, match=f"single-socket part, but the machine has {sockets} sockets"):
                catalog_calibration(m, sku=sku.model)
            continue
        cal = catalog_calibration(m, sku=sku.model)
        table = latency_table_ns(apply_calibration(m, cal))
        local = np.diag(table)
        assert np.all((local > 30.0) & (local < 200.0)), (platform.name, local)
        off = table[~np.eye(sockets, dtype=bool)]
        assert np.all(off > local.max()), (platform.name, table)
        fig = catalog_figures(platform, sku, sockets=sockets)
        for c in cal.controllers:
            assert 0.0 < c.read_bandwidth_gb_s <= fig.socket_peak_gb_s + 1e-9, platform.name


@pytest.mark.parametrize(("sku", "donor"), [("Xeon Platinum 8480+", "intel-cascade-lake-sp"),
                                             ("E5-2680 v2", "intel-sandy-bridge-ep"), ("Opteron 875", "amd-opteron-k10")])
def test_a_level_without_a_public_latency_borrows_a_neighbours_cycles(sku: str, donor: str) -> None:
    """The catalog has the size of Sapphire Rapids' and Ivy Bridge-EP's L3 (and K8's L2) but no latency: the
    level used to be left out on a machine file without one, so every working set between the level above and
    memory ran at memory latency. Now it borrows the nearest same-vendor platform's cycles, at this clock, and
    says so."""
    cal = catalog_calibration(glueless(2), sku=sku)
    level = "L2" if "Opteron" in sku else "L3"
    names = [c.name for c in cal.caches]
    assert level in names
    src = {p.parameter: p.source for p in cal.provenance.priors}[f"caches[{level}].latency_ns"]
    assert f"borrowed from {donor}" in src
    lat = {c.name: c.latency_ns for c in cal.caches}
    assert lat["L1d"] < lat["L2"] and (level == "L2" or lat["L2"] < lat["L3"])


def test_an_ex_platform_borrows_its_latency_from_buffered_memory_only() -> None:
    """The EX lines' DIMMs sit behind memory buffers: Westmere-EX measured 135 ns local where the direct-attached
    EP parts of its time measured 60-65. A Haswell-EX without a figure of its own borrows the buffered one; an EP
    platform never does (Nehalem-EX's 160 ns lent to Ivy Bridge-EP's leave-one-out made it 118 % off)."""
    hsx = get_platform("intel-haswell-ex")
    fig = catalog_figures(hsx, hsx.skus[0], sockets=4)
    assert fig.local_ns == 135.25 and "borrowed from intel-westmere-ex" in fig.local_source
    assert fig.remote_minus_local_ns == pytest.approx(197.4 - 135.25)
    ivb = get_platform("intel-ivy-bridge-ep")
    loo = catalog_figures(ivb.model_copy(update={"latency": None}), ivb.skus[0])
    assert "intel-nehalem-ex" not in loo.local_source and "intel-westmere-ex" not in loo.local_source
    snb = get_platform("intel-sandy-bridge-ep")
    assert "borrowed from intel-ivy-bridge-ep" in catalog_figures(snb, snb.skus[0]).local_source


def test_a_module_shared_l2_is_an_even_share_a_core() -> None:
    """Sierra Forest's 4 MiB L2 serves a module of four cores; numasim has no module scope, so each core gets a
    quarter (not the whole 4 MiB each, which made a busy module's L2 hold four times its size), said in the notes."""
    from numasim.topology.builders import multi_die

    cal = catalog_calibration(multi_die(1, "SNC1", cores_per_socket=144, threads_per_core=1), sku="Xeon 6780E")
    l2 = next(c for c in cal.caches if c.name == "L2")
    assert l2.size_bytes == 1024 * 1024
    assert "L2 is shared by a module of 4 cores" in cal.provenance.notes
