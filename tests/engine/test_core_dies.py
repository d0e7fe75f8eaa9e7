"""Core dies (AMD CCDs) behind ports of their own: the topology's checks, the engine's port resources, the
catalog's derivation and the fit.

Golden numbers are worked by hand from the port model: a die's reads cross its port toward the die at
``read_bandwidth_gb_s``, its writes the other direction, so all-reads is bounded by the dies' read ports and a
read/write mix, which loads both directions, can exceed it (what mlc shows on EPYC: the 9224's 3:1 mix is 1.35x
its all-reads).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from numasim.calibrate.fit import fit_bandwidth
from numasim.calibrate.public_mlc import PUBLIC_MLC_CASES, public_machine
from numasim.engine.memsys import build_memory_system
from numasim.errors import CalibrationError
from numasim.timing.catalog import catalog_calibration
from numasim.timing.model import apply_calibration, nominal_calibration
from numasim.tools.context import tool_context
from numasim.tools.mlc import mlc
from numasim.topology.builders import glueless
from numasim.topology.model import CoreDie, Machine


def _two_dies(read_gb_s: float, write_gb_s: float | None = None) -> Machine:
    """One node of 8 cpus as two dies of 4, the controller far faster than the ports."""
    m = glueless(1, cpus_per_node=8, controller_bandwidth_gb_s=400.0)
    w = write_gb_s if write_gb_s is not None else read_gb_s / 2
    dies = [CoreDie(cpus=[0, 1, 2, 3], read_bandwidth_gb_s=read_gb_s, write_bandwidth_gb_s=w),
            CoreDie(cpus=[4, 5, 6, 7], read_bandwidth_gb_s=read_gb_s, write_bandwidth_gb_s=w)]
    return m.model_copy(update={"core_dies": dies})


def test_a_die_must_sit_on_one_node_and_own_its_cpus() -> None:
    m = glueless(2, cpus_per_node=4)
    base = m.model_dump()
    with pytest.raises(ValidationError, match=r"core_dies\[0\].cpus: a die's cpus must be on one node"):
        Machine.model_validate({**base, "core_dies": [{"cpus": [3, 4], "read_bandwidth_gb_s": 50, "write_bandwidth_gb_s": 25}]})
    with pytest.raises(ValidationError, match=r"core_dies\[1\].cpus: cpu 1 is already on core die 0"):
        Machine.model_validate({**base, "core_dies": [
            {"cpus": [0, 1], "read_bandwidth_gb_s": 50, "write_bandwidth_gb_s": 25},
            {"cpus": [1, 2], "read_bandwidth_gb_s": 50, "write_bandwidth_gb_s": 25}]})
    with pytest.raises(ValidationError, match=r"core_dies\[0\].cpus: cpus \[99\] are on no node"):
        Machine.model_validate({**base, "core_dies": [{"cpus": [99], "read_bandwidth_gb_s": 50, "write_bandwidth_gb_s": 25}]})


def test_a_calibration_whose_dies_do_not_fit_the_machine_is_refused() -> None:
    m = glueless(2, cpus_per_node=4)
    cal = nominal_calibration(m).model_copy(update={"core_dies": [
        CoreDie(cpus=[3, 4], read_bandwidth_gb_s=50, write_bandwidth_gb_s=25)]})
    with pytest.raises(CalibrationError, match="does not fit"):
        apply_calibration(m, cal)


def test_threads_issue_through_their_die_and_the_port_is_on_every_route() -> None:
    m = _two_dies(50.0)
    ms = build_memory_system(m, nominal_calibration(m))
    assert ms.initiator_names == ["node0", "node0.die0", "node0.die1"]
    assert [ms.initiator_of_cpu(c) for c in (0, 3, 4, 7)] == [1, 1, 2, 2]
    ports = [k for k, r in enumerate(ms.resources) if r.kind == "die"]
    assert [ms.resources[k].capacity_bytes_per_ns for k in ports] == [50.0, 25.0, 50.0, 25.0]
    paths = ms.class_resources
    die0_read, die0_write = paths[(1 * ms.n_nodes + 0) * 2], paths[(1 * ms.n_nodes + 0) * 2 + 1]
    assert die0_read[-1] == ports[0] and die0_write[0] == ports[1]
    # The port adds no idle latency: the measured route already includes it.
    assert ms.base_latency_ns[1, 0] == ms.base_latency_ns[0, 0]


def test_all_reads_is_the_dies_ports_and_a_mix_exceeds_it() -> None:
    m = _two_dies(50.0)
    r = mlc(tool_context(m, nominal_calibration(m)), ["--peak_injection_bandwidth"])
    all_reads = r.peak_mb_s["ALL Reads"] / 1000.0
    assert all_reads == pytest.approx(100.0, rel=0.03)  # two dies x 50 GB/s, the controller at 400
    assert all_reads <= 100.0 * 1.0001  # never above the ports' physical peak
    assert r.peak_mb_s["3:1 Reads-Writes"] / 1000.0 > 1.1 * all_reads


@settings(max_examples=8, deadline=None)
@given(read=st.floats(min_value=5.0, max_value=120.0), ratio=st.floats(min_value=0.25, max_value=1.0))
def test_no_mix_moves_more_than_the_ports_carry(read: float, ratio: float) -> None:
    m = _two_dies(read, read * ratio)
    r = mlc(tool_context(m, nominal_calibration(m)), ["--peak_injection_bandwidth"])
    # mlc counts reads plus writes; each direction of each port carries at most its bandwidth.
    for name, mb_s in r.peak_mb_s.items():
        assert mb_s / 1000.0 <= 2 * (read + read * ratio) * 1.0001, name
    assert r.peak_mb_s["ALL Reads"] / 1000.0 <= 2 * read * 1.0001


def test_the_catalog_lays_genoa_dies_over_the_nodes() -> None:
    case = next(c for c in PUBLIC_MLC_CASES if "9224" in c.file)
    m = public_machine(replace(case, cxl_socket=None))  # 2 sockets x 24 cores x 2 threads, NPS2 (its CXL node aside)
    cal = catalog_calibration(m)
    assert len(cal.core_dies) == 8  # the 9224's 4 dies per socket, 2 per NPS2 node
    node_of = m.cpu_to_node
    for die in cal.core_dies:
        assert len(die.cpus) == 12 and len({node_of[c] for c in die.cpus}) == 1  # 6 cores with their siblings
        cores = sorted(c % 48 for c in die.cpus)
        assert cores[0::2] == cores[1::2]  # each core with its SMT sibling (48 cpus later)
    assert cal.core_dies[0].read_bandwidth_gb_s == pytest.approx(32 * 1.8)
    assert cal.core_dies[0].write_bandwidth_gb_s == pytest.approx(16 * 1.8)
    priors = {p.parameter: p for p in cal.provenance.priors}
    assert "ESTIMATE" in priors["core_dies[*].read_bandwidth_gb_s"].source
    # Inside the I/O die, links carry the socket's DRAM peak: the ports and controllers are the limits.
    iod = [p for k, p in priors.items() if k.count("iod") == 1 and k.endswith("bandwidth_gb_s")]
    assert iod and all("assumption: the I/O die's fabric" in p.source for p in iod)


def test_an_intel_machine_has_no_dies() -> None:
    cal = catalog_calibration(glueless(2), sku="Xeon Gold 6240")
    assert cal.core_dies == []


def test_the_peak_fits_the_ports_when_the_priors_say_they_bind() -> None:
    m = _two_dies(80.0)
    fit = fit_bandwidth(m, [], {"all_reads": 96_000.0, "3:1": 130_000.0})
    assert fit.core_die_read_gb_s == pytest.approx(48.0)
    assert fit.core_die_write_gb_s == pytest.approx(24.0)  # the priors' write/read ratio
    assert fit.controller_read_gb_s[0] == pytest.approx(400.0)  # kept: the peak did not measure it
    assert not any(p.name.startswith("controllers[") for p in fit.result.parameters)
    assert any("core-die ports" in a for a in fit.result.assumptions)


def test_without_dies_the_peak_still_fits_the_controllers() -> None:
    m = glueless(1, cpus_per_node=8, controller_bandwidth_gb_s=400.0)
    fit = fit_bandwidth(m, [], {"all_reads": 96_000.0})
    assert fit.core_die_read_gb_s is None
    assert fit.controller_read_gb_s[0] == pytest.approx(96.0)
    assert np.isfinite(fit.controller_read_gb_s[0])


def test_a_mode_change_keeps_the_dies_and_their_calibration() -> None:
    from numasim.timing.catalog import catalog_machine
    from numasim.timing.transfer import transfer_calibration
    from numasim.topology.cluster_mode import ClusterMode
    from numasim.topology.reconfigure import reconfigure

    case = next(c for c in PUBLIC_MLC_CASES if "9224" in c.file)
    m = catalog_machine(public_machine(replace(case, cxl_socket=None)))  # (the dies: its CXL node aside)
    nps4 = reconfigure(m, ClusterMode("nps", 4), threads_per_core=2).machine
    assert nps4.core_dies == m.core_dies  # one die per NPS4 quadrant on a 4-die part
    assert sorted(nps4.cpu_to_node[d.cpus[0]] for d in nps4.core_dies) == list(range(8))
    moved = transfer_calibration(m, catalog_calibration(m), ClusterMode("nps", 1), threads_per_core=2)
    assert len(moved.calibration.core_dies) == 8


@pytest.mark.parametrize("mode", ["epoch", "exact"])
def test_spreading_threads_over_dies_doubles_what_one_die_reads(mode: str) -> None:
    from numasim.engine.pagemap import PageMap
    from numasim.engine.simulate import simulate
    from numasim.engine.spec import ThreadSpec
    from numasim.workload.access import AccessChunk

    m = _two_dies(20.0)
    cal = nominal_calibration(m)
    lines, base = 20_000, 1 << 30
    pages = PageMap()
    pages.assign(base, np.zeros(4 * lines * 64 // 4096 + 1, dtype=np.int16))
    addr = base + (np.arange(4 * lines) * 64).astype(np.uint64)
    chunk = AccessChunk.build(addr, thread=np.repeat(np.arange(4), lines))
    gb_s = {}
    for cpus in ((0, 1, 2, 3), (0, 1, 4, 5)):
        threads = [ThreadSpec(i, cpu=c) for i, c in enumerate(cpus)]
        r = simulate(m, cal, threads, [chunk], pages, mode=mode, seed=1, record_latencies=False)
        gb_s[cpus] = 4 * lines * 64 / r.run_time_ns
    assert gb_s[(0, 1, 2, 3)] == pytest.approx(20.0, rel=0.02)  # one die's port, the controller at 400
    assert gb_s[(0, 1, 4, 5)] == pytest.approx(40.0, rel=0.02)


def test_a_die_has_both_port_directions_or_none() -> None:
    with pytest.raises(ValidationError, match="a die's port has both directions, or the die has none"):
        CoreDie(cpus=[0, 1], read_bandwidth_gb_s=50.0)
    assert not CoreDie(cpus=[0, 1]).has_port and CoreDie(cpus=[0], read_bandwidth_gb_s=5, write_bandwidth_gb_s=2).has_port


def test_portless_dies_time_memory_as_no_dies_do() -> None:
    """A die without a port (only its core complexes) adds no initiator or resource: every run times alike."""
    from numasim.topology.render import render_tree

    bare = glueless(1, cpus_per_node=8, controller_bandwidth_gb_s=40.0)
    m = bare.model_copy(update={"core_dies": [CoreDie(cpus=[0, 1, 2, 3]), CoreDie(cpus=[4, 5, 6, 7])]})
    a, b = mlc(tool_context(bare, nominal_calibration(bare)), ["--peak_injection_bandwidth"]), \
        mlc(tool_context(m, nominal_calibration(m)), ["--peak_injection_bandwidth"])
    assert a.peak_mb_s == b.peak_mb_s
    assert "no port of its own" in render_tree(m)
