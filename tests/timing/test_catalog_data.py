"""The shipped platform catalog: every entry loads, is internally consistent and cites a source for its numbers."""

from __future__ import annotations

import pytest

from numasim.errors import FormatError
from numasim.timing.catalog import get_platform, load_catalog, match_cpu, parse_platform_toml, platform_names
from numasim.timing.catalog.loader import _EXAMPLE

REQUIRED_PLATFORMS = {
    "intel-nehalem-ep", "intel-westmere-ep", "intel-westmere-ex", "intel-sandy-bridge-ep", "intel-ivy-bridge-ep",
    "intel-ivy-bridge-ex", "intel-haswell-ep", "intel-broadwell-ep", "intel-skylake-sp", "intel-cascade-lake-sp",
    "intel-ice-lake-sp", "intel-sapphire-rapids", "intel-emerald-rapids", "intel-granite-rapids",
    "amd-opteron-k8", "amd-opteron-k8-socket-f", "amd-opteron-k10", "amd-opteron-magny-cours",
    "amd-opteron-bulldozer", "amd-epyc-naples", "amd-epyc-rome", "amd-epyc-milan", "amd-epyc-genoa",
    "amd-epyc-turin", "intel-nehalem-ex", "intel-haswell-ex", "intel-broadwell-ex", "intel-cooper-lake",
    "intel-broadwell-de", "intel-skylake-d", "intel-ice-lake-d", "intel-denverton", "intel-snow-ridge",
    "intel-sierra-forest", "intel-granite-rapids-sp", "amd-epyc-siena", "amd-epyc-4004", "amd-epyc-4005",
    "intel-sandy-bridge-en", "intel-ivy-bridge-en", "amd-opteron-lisbon", "amd-opteron-valencia", "amd-epyc-3000",
    "intel-sapphire-rapids-hbm", "intel-skylake-w", "intel-cascade-lake-w", "intel-ice-lake-w",
    "intel-sapphire-rapids-w", "intel-sandy-bridge-e3", "intel-ivy-bridge-e3", "intel-haswell-e3",
    "intel-broadwell-e3", "intel-skylake-e3", "intel-coffee-lake-e", "intel-rocket-lake-e", "intel-raptor-lake-e",
    "intel-nehalem-1s", "intel-westmere-1s", "amd-epyc-bergamo",
}

# Every x86 SKU the shared data names (hwloc CPUModel, kerncraft, mlc, seed articles) -> its platform.
REQUIRED_SKUS = {
    "E5-2680 v2": "intel-ivy-bridge-ep", "E5-2620 v3": "intel-haswell-ep", "Platinum 8180": "intel-skylake-sp",
    "Gold 6240": "intel-cascade-lake-sp", "Gold 6248": "intel-cascade-lake-sp", "Gold 6148": "intel-skylake-sp",
    "Gold 6230": "intel-cascade-lake-sp", "Platinum 8174": "intel-skylake-sp", "Platinum 8360Y": "intel-ice-lake-sp",
    "Platinum 8470": "intel-sapphire-rapids", "Silver 4108": "intel-skylake-sp", "E5-2650": "intel-sandy-bridge-ep",
    "E5-2680": "intel-sandy-bridge-ep", "E5-2683 v3": "intel-haswell-ep", "E5-4640": "intel-sandy-bridge-ep",
    "E7-4870": "intel-westmere-ex", "E5-2695 v3": "intel-haswell-ep", "E5-2697 v4": "intel-broadwell-ep",
    "EPYC 7451": "amd-epyc-naples", "EPYC 7452": "amd-epyc-rome", "Opteron 865": "amd-opteron-k8",
    "Opteron 8218": "amd-opteron-k8-socket-f", "Opteron 8347 HE": "amd-opteron-k10",
    "Opteron 6134": "amd-opteron-magny-cours", "Opteron 6272": "amd-opteron-bulldozer",
    "Opteron 6276": "amd-opteron-bulldozer",
}


def test_every_required_platform_is_shipped() -> None:
    assert REQUIRED_PLATFORMS <= set(platform_names())


@pytest.mark.parametrize(("model", "platform"), sorted(REQUIRED_SKUS.items()))
def test_every_sku_of_the_shared_data_is_listed(model: str, platform: str) -> None:
    found = match_cpu(model)
    assert found.how == "sku" and found.platform.name == platform


@pytest.mark.parametrize("name", sorted(REQUIRED_PLATFORMS))
def test_entry_is_physically_consistent(name: str) -> None:
    p = get_platform(name)
    assert p.skus and p.source_list
    for s in p.skus:
        assert s.cores <= p.max_cores_per_socket, s.model
        assert s.threads in (s.cores, s.cores * p.threads_per_core), s.model
        assert 1.0 <= s.base_ghz <= 4.5, s.model
        assert (s.channels or p.memory.channels_per_socket) <= p.memory.channels_per_socket
        assert (s.max_mt_s or p.memory.max_mt_s) <= p.memory.max_mt_s
    ic = p.interconnect
    if ic is not None:
        # QPI/UPI and 16-bit HyperTransport carry 2 data bytes per transfer, an x16 xGMI link 16 bits too; the
        # catalog's per-direction figure may only be lower than that (framing), never higher.
        raw = ic.gt_s * 2.0
        assert ic.bandwidth_gb_s <= raw + 1e-9
    else:  # a single-socket platform: no remote figure to have
        assert p.latency is None or p.latency.remote_ns is None
    for mode in p.numa_modes:
        assert mode.nodes_per_socket * mode.channels_per_node == p.memory.channels_per_socket
    if p.latency is not None and p.latency.remote_ns is not None:
        assert 40 <= p.latency.local_ns < p.latency.remote_ns <= 400
    if p.efficiency is not None:
        assert 0.5 <= p.efficiency.read_factor <= 1.0


def test_every_number_group_cites_a_known_source() -> None:
    for p in load_catalog():
        ids = {s.id for s in p.source_list}
        for group in [p.memory, *([p.interconnect] if p.interconnect else []), *p.caches, *p.numa_modes, *p.skus]:
            assert group.sources, f"{p.name}: {group!r} has no source"
            assert set(group.sources) <= ids
        for s in p.source_list:
            assert s.gave and s.title


def test_kerncraft_efficiencies_are_the_measured_ratios() -> None:
    # load bandwidth of one socket (kerncraft, 1 thread per core) / (channels x MT/s x 8 B)
    measured = {"intel-haswell-ep": 63.96 / 68.256, "intel-broadwell-ep": 69.98 / 76.8,
                "intel-cascade-lake-sp": 125.17 / 140.784, "intel-ice-lake-sp": 194.88 / 204.8,
                "intel-sapphire-rapids": 304.60 / 307.2, "amd-epyc-naples": 148.50 / 170.624,
                "amd-epyc-rome": 143.46 / 204.8}
    for name, ratio in measured.items():
        eff = get_platform(name).efficiency
        assert eff is not None and eff.read_factor == pytest.approx(ratio, abs=0.001), name
    # The Gold 6148 file exceeds its platform's peak, so Skylake-SP takes no factor from it.
    assert get_platform("intel-skylake-sp").efficiency is None


def test_an_entry_with_an_unsourced_number_is_refused() -> None:
    bad = _EXAMPLE.replace('sources = ["s"]\n[interconnect]', "[interconnect]")
    with pytest.raises(FormatError, match="memory: numbers without sources"):
        parse_platform_toml(bad, "bad.toml")


def test_an_entry_citing_an_unknown_source_is_refused() -> None:
    bad = _EXAMPLE.replace('base_ghz = 2.0, sources = ["s"]', 'base_ghz = 2.0, sources = ["nowhere"]')
    with pytest.raises(FormatError, match=r"bad.toml.*nowhere"):
        parse_platform_toml(bad, "bad.toml")


def test_invalid_toml_names_the_file() -> None:
    with pytest.raises(FormatError, match="x.toml: not valid TOML"):
        parse_platform_toml("name = ", "x.toml")


def test_write_allocate_evasion_where_intel_has_specitom() -> None:
    # mlc's source lists SpecItoM on Ice Lake server and later Xeons; no other platform evades its writes' reads
    from numasim.timing.catalog import catalog_calibration
    from numasim.topology.builders import glueless

    evading = {p.name for p in load_catalog() if p.write_allocate is not None}
    assert evading == {"intel-ice-lake-sp", "intel-sapphire-rapids", "intel-emerald-rapids", "intel-granite-rapids",
                       "intel-granite-rapids-sp"}
    for name in evading:
        p = get_platform(name)
        assert p.write_allocate is not None and p.write_allocate.evasion == 1.0
        assert "mlc-src" in p.write_allocate.sources
    icx = catalog_calibration(glueless(2), sku="Xeon Platinum 8360Y")
    assert icx.core.write_allocate_evasion == 1.0
    (prior,) = [q for q in icx.provenance.priors if q.parameter == "core.write_allocate_evasion"]
    assert "8360Y" in prior.source and "EVASION_ONSET_QUEUE_LINES" in prior.source
    clx = catalog_calibration(glueless(2), sku="Xeon Gold 6240")
    assert clx.core.write_allocate_evasion == 0.0
    assert not [q for q in clx.provenance.priors if q.parameter == "core.write_allocate_evasion"]


@pytest.mark.parametrize("name", sorted(REQUIRED_PLATFORMS))
def test_cache_levels_are_ordered_below_memory(name: str) -> None:
    """Each level the catalog times is larger and slower than the one above it, and faster than the platform's
    local memory: a working set never gets cheaper by outgrowing a cache (issue 9's invariant)."""
    from numasim.timing.catalog import catalog_calibration
    from numasim.topology.builders import multi_die

    p = get_platform(name)
    sku = p.skus[0]
    amd = p.vendor == "amd"
    m = multi_die(1, "NPS1" if amd else "SNC1", cores_per_socket=sku.cores,
                  threads_per_core=max(1, sku.threads // sku.cores))
    cal = catalog_calibration(m, sku=sku.model)
    levels = cal.caches
    assert levels, name
    assert [c.name for c in levels] == sorted((c.name for c in levels), key=["L1d", "L2", "L3"].index)
    for upper, lower in zip(levels, levels[1:], strict=False):
        assert upper.latency_ns < lower.latency_ns, (name, upper.name, lower.name)
        assert upper.size_bytes < lower.size_bytes, (name, upper.name, lower.name)
    local_ns = min(c.latency_ns for c in cal.controllers)
    assert levels[-1].latency_ns < local_ns / 2, (name, levels[-1].name, levels[-1].latency_ns, local_ns)
