"""numasim.timing.transfer: a calibration carried across an SNC/NPS mode change, and the CLI that writes it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from numasim.cli import main
from numasim.errors import OutputError
from numasim.fileio import atomic_write_texts
from numasim.timing.model import LoadedLatencyCurve, load_calibration, nominal_calibration
from numasim.timing.resolve import resolve_calibration
from numasim.timing.transfer import mean_curve, transfer_calibration
from numasim.topology.builders import multi_die
from numasim.topology.cluster_mode import ClusterMode
from numasim.topology.io import load_machine
from numasim.topology.io.toml_format import load_machine_toml
from numasim.topology.routing import bandwidth_table_gb_s, latency_table_ns

REPO = Path(__file__).resolve().parents[2]
SKYLAKE = REPO / "topologies" / "skylake-8180-2s.toml"


def _skylake() -> tuple:
    return load_machine(SKYLAKE), load_calibration(REPO / "topologies" / "skylake-8180-2s.cal.json")


def test_fitted_snc_off_to_snc2_and_back_is_exact() -> None:
    m, cal = _skylake()
    snc2 = transfer_calibration(m, cal, ClusterMode("snc", 2), die_latency_ns=8.0, die_bandwidth_gb_s=100.0,
                                prior_source="nominal Skylake-SP mesh (numasim.topology.builders.MESH_LATENCY_NS)")
    assert snc2.calibration.machine == "skylake-8180-2s-snc2" and len(snc2.calibration.controllers) == 4
    lat = latency_table_ns(snc2.machine)
    assert lat[0, 1] - lat[0, 0] == pytest.approx(8.0)  # far cluster = near + the on-die prior
    assert (lat[0, 0] + lat[0, 1]) / 2 == pytest.approx(cal.controllers[0].latency_ns)  # interleave mean
    back = transfer_calibration(snc2.machine, snc2.calibration, ClusterMode("snc", 1))
    for a, b in zip(back.calibration.controllers, cal.controllers, strict=True):
        assert a.latency_ns == pytest.approx(b.latency_ns, rel=1e-12)
        assert a.read_bandwidth_gb_s == pytest.approx(b.read_bandwidth_gb_s, rel=1e-12)
        assert a.write_bandwidth_gb_s == pytest.approx(b.write_bandwidth_gb_s, rel=1e-12)
        np.testing.assert_allclose(a.curve.added_latency_ns, b.curve.added_latency_ns, rtol=1e-12, atol=1e-12)
    for a, b in zip(back.calibration.links, cal.links, strict=True):
        assert (a.src, a.dst) == (b.src, b.dst)
        assert a.latency_ns == pytest.approx(b.latency_ns, rel=1e-12)
        assert a.bandwidth_gb_s == pytest.approx(b.bandwidth_gb_s, rel=1e-12)


def test_a_catalog_nps4_machine_carried_to_nps1_meets_the_sources_nps1_figure() -> None:
    """The catalog times Rome's NPS4 quadrants at 113 ns and a sibling quadrant 12 ns further (derived from the
    source's NPS1 122 ns); the interleave rule carrying that to NPS1 gives back the source's own 122 ns, so the
    two rules agree (the machine file's nominal 10 ns a link gave 128)."""
    from numasim.timing.catalog import catalog_calibration

    m = multi_die(1, "NPS4").model_copy(update={"cpu_model": "AMD EPYC 7452 32-Core Processor"})
    nps1 = transfer_calibration(m, catalog_calibration(m), ClusterMode("nps", 1))
    assert [c.latency_ns for c in nps1.calibration.controllers] == [pytest.approx(122.0)]


def test_provenance_names_the_source_and_lists_the_priors() -> None:
    m, cal = _skylake()
    snc2 = transfer_calibration(m, cal, ClusterMode("snc", 2), die_latency_ns=8.0, die_bandwidth_gb_s=100.0,
                                prior_source="vendor slide")
    prov = snc2.calibration.provenance
    assert cal.id in prov.notes and "SNC off" in prov.notes and "SNC2" in prov.notes
    assert prov.method == cal.provenance.method and prov.sources == cal.provenance.sources
    new = {p.parameter: p for p in prov.priors}
    assert new["links[0->socket0-mesh].latency_ns"].value == 4.0
    assert new["links[0->socket0-mesh].bandwidth_gb_s"].source == "vendor slide"
    # Merging needs no prior: every number comes from the split calibration's.
    back = transfer_calibration(snc2.machine, snc2.calibration, ClusterMode("snc", 1))
    assert len(back.calibration.provenance.priors) == len(prov.priors)


def test_split_to_split_lists_the_carried_on_die_latency_as_a_prior() -> None:
    m = multi_die(2, "SNC2")
    snc4 = transfer_calibration(m, nominal_calibration(m), ClusterMode("snc", 4))
    assert [p.parameter for p in snc4.calibration.provenance.priors] == ["on_die.latency_ns"]
    assert snc4.calibration.provenance.priors[0].value == pytest.approx(8.0)


def test_merged_controller_curve_is_the_bandwidth_weighted_mean() -> None:
    m = multi_die(1, "NPS2", socket_bandwidth_gb_s=100.0)
    cal = nominal_calibration(m)
    steep = LoadedLatencyCurve(utilisation=[0.0, 1.0], added_latency_ns=[0.0, 300.0])
    flat = LoadedLatencyCurve(utilisation=[0.0, 1.0], added_latency_ns=[0.0, 100.0])
    cal = cal.model_copy(update={"controllers": [
        cal.controllers[0].model_copy(update={"curve": steep, "read_bandwidth_gb_s": 75.0}),
        cal.controllers[1].model_copy(update={"curve": flat, "read_bandwidth_gb_s": 25.0}),
    ]})
    one = transfer_calibration(m, cal, ClusterMode("nps", 1)).calibration.controllers[0]
    assert one.read_bandwidth_gb_s == pytest.approx(100.0)
    assert float(one.curve.added_ns(1.0)) == pytest.approx(0.75 * 300 + 0.25 * 100)


def test_mean_curve_never_decreases() -> None:
    a = LoadedLatencyCurve(utilisation=[0.0, 0.3, 1.0], added_latency_ns=[0.0, 50.0, 60.0])
    b = LoadedLatencyCurve(utilisation=[0.0, 0.7, 1.0], added_latency_ns=[0.0, 0.0, 90.0])
    added = mean_curve([(a, 1.0), (b, 1.0)]).added_latency_ns
    assert added == sorted(added) and added[-1] == pytest.approx(75.0)


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["topo", "reconfigure", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_writes_machine_and_calibration_that_resolve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "snc2.toml"
    code, text, err = _cli(capsys, "skylake-8180-2s", "--snc", "2", "-o", str(out), "--die-latency-ns", "8",
                           "--die-bandwidth-gb-s", "100", "--prior-source", "nominal")
    assert code == 0, err
    assert "SNC off -> SNC2" in text and "prior: links[0->socket0-mesh].latency_ns = 4 ns (nominal)" in text
    machine = load_machine_toml(out)
    assert machine.calibration == "snc2.cal.json"
    cal = resolve_calibration(machine, machine_path=out)
    assert cal.id == load_calibration(tmp_path / "snc2.cal.json").id
    assert bandwidth_table_gb_s(machine)[0, 0] == pytest.approx(cal.controllers[0].read_bandwidth_gb_s)
    # Refused without --force, and the existing pair is left alone.
    before = out.read_text()
    code, _, err = _cli(capsys, "skylake-8180-2s", "--snc", "2", "-o", str(out), "--die-latency-ns", "8",
                        "--die-bandwidth-gb-s", "100")
    assert code == 2 and "exists" in err and out.read_text() == before


def test_cli_error_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "x.toml"
    code, _, err = _cli(capsys, "skylake-8180-2s", "--snc", "2", "-o", str(out))
    assert code == 2 and "--die-latency-ns" in err
    code, _, err = _cli(capsys, "skylake-8180-2s", "--nps", "4", "-o", str(out))
    assert code == 2 and "Intel machine" in err
    code, _, err = _cli(capsys, "skylake-8180-2s", "--snc", "2", "--nps", "4", "-o", str(out))
    assert code == 2 and "exactly one of" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("machine", "flag", "value", "says"),
    [
        # Skylake-SP's firmware offers SNC2 only (the catalog's numa_modes); the vendor rule alone allowed SNC4.
        ("skylake-8180-2s", "--snc", "4", "offers SNC off, SNC2 (platform catalog intel-skylake-sp)"),
        ("skylake-8180-2s", "--snc", "3", "offers SNC off, SNC2"),
        # Ivy Bridge-EP has no clustering setting at all.
        ("seed-001-e5-2680v2", "--snc", "2", "has no clustering setting: 1 NUMA node(s) per socket"),
    ],
)
def test_modes_the_processor_does_not_offer_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], machine: str, flag: str, value: str, says: str
) -> None:
    out = tmp_path / "x.toml"
    code, _, err = _cli(capsys, machine, flag, value, "-o", str(out), "--die-latency-ns", "8",
                        "--die-bandwidth-gb-s", "100")
    assert code == 2 and says in err, err
    assert list(tmp_path.iterdir()) == []


def test_a_package_of_dies_cannot_change_mode() -> None:
    from numasim.errors import TopologyError
    from numasim.timing.catalog import get_platform, mode_offer
    from numasim.topology.builders import multi_die
    from numasim.topology.cluster_mode import ClusterMode, check_request

    naples = multi_die(1, "NPS4").model_copy(update={"cpu_model": "AMD EPYC 7601 32-Core Processor"})
    offer = mode_offer(get_platform("amd-epyc-naples"))
    with pytest.raises(TopologyError, match="no clustering setting: 4 NUMA node"):
        check_request(naples, ClusterMode("nps", 1), offer)
    rome = naples.model_copy(update={"cpu_model": "AMD EPYC 7452 32-Core Processor"})
    assert check_request(rome, ClusterMode("nps", 1), mode_offer(get_platform("amd-epyc-rome"))).label == "NPS4"


def test_cli_uncalibrated_machine_writes_the_machine_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "nps1.toml"
    code, text, err = _cli(capsys, str(REPO / "topologies" / "epyc-7452-nps4.toml"), "--nps", "1", "-o", str(out))
    assert code == 0, err
    assert "NPS4 -> NPS1" in text and "uncalibrated" in text
    assert [p.name for p in tmp_path.iterdir()] == ["nps1.toml"]
    assert load_machine_toml(out).calibration is None


def test_atomic_write_texts_restores_the_first_file_when_the_second_fails(tmp_path: Path) -> None:
    first = tmp_path / "m.toml"
    first.write_text("old\n")
    blocker = tmp_path / "m.cal.json"
    blocker.mkdir()
    (blocker / "keep").write_text("")  # a non-empty directory cannot be replaced by a file
    with pytest.raises(OutputError):
        atomic_write_texts({first: "new\n", blocker: "{}\n"})
    assert first.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.cal.json", "m.toml"]


def test_device_dma_limits_follow_the_renumbered_nodes() -> None:
    """seed-000's NIC reads node 1 through a 16.7 GB/s path; SNC off merges nodes 0 and 1 (half the lines each),
    so the merged node's stream is capped at 16.7 / 0.5, and no limit names a node that is gone."""
    from numasim.timing.resolve import resolve_calibration
    from numasim.topology.cluster_mode import parse_mode
    from numasim.topology.io import load_machine

    m = load_machine("seed-000-4node")
    cal = resolve_calibration(m)
    moved = transfer_calibration(m, cal, parse_mode("snc", "off"))
    limits = moved.calibration.devices[0].dma_read_bandwidth_gb_s
    assert set(limits) <= {n.id for n in moved.machine.nodes}
    assert limits == {0: pytest.approx(cal.devices[0].dma_read_bandwidth_gb_s[1] / 0.5)}


def test_cache_to_cache_figures_carry_across_modes() -> None:
    # the cores, their caches and the sockets are the same in every mode: the HITM figures go with the calibration
    from numasim.timing.model import CoherenceTiming

    m, cal = _skylake()
    cal = cal.model_copy(update={"coherence": CoherenceTiming(local_hitm_ns=53.7, remote_hitm_ns=113.9, source="x")})
    snc2 = transfer_calibration(m, cal, ClusterMode("snc", 2), die_latency_ns=8.0, die_bandwidth_gb_s=100.0,
                                prior_source="nominal Skylake-SP mesh (numasim.topology.builders.MESH_LATENCY_NS)")
    assert snc2.calibration.coherence == cal.coherence


def test_cluster_on_die_needs_a_sku_with_two_rings() -> None:
    """Haswell-EP's Cluster-on-Die needs the dies with two rings (10 cores and more): a 6-core E5-2620 v3 was put
    into CoD without a word; the catalog now says no, and why."""
    from numasim.timing.catalog import mode_offer_for_cpu

    small = mode_offer_for_cpu("Intel(R) Xeon(R) CPU E5-2620 v3 @ 2.40GHz")
    big = mode_offer_for_cpu("Intel(R) Xeon(R) CPU E5-2695 v3 @ 2.30GHz")
    assert small is not None and big is not None
    assert small.per_socket == (1,) and "CoD needs 10 cores or more, Xeon E5-2620 v3 has 6" in small.source
    assert big.per_socket == (1, 2) and "needs" not in big.source
