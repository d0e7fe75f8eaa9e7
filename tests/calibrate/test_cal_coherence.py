"""Cache-to-cache transfer latencies: taken as measured from mlc's --c2c_latency section into the calibration."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from numasim.calibrate.measurements import load_measurements
from numasim.calibrate.pipeline import calibrate
from numasim.engine import PageMap, ThreadSpec, simulate
from numasim.timing.model import load_calibration
from numasim.topology.io import load_machine
from numasim.workload.access import AccessChunk

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "measurements" / "mlc"


@pytest.mark.parametrize(("machine", "file", "figures"), [
    # Ivy Bridge-EP: local L2->L2 HITM 28.3; remote LLC->LLC HITM 70.4/69.7 (writer homed), 69.6/69.1 (reader)
    ("seed-001-e5-2680v2", "kuleuven-thinking-2s-ivybridge-E5-2680v2.md", (28.3, 70.05, 69.35)),
    # Skylake-SP: 53.7; 113.9/113.9; 177.9/177.6
    ("skylake-8180-2s", "fdio-csit-2s-skylake-plat8180.md", (53.7, 113.9, 177.75)),
])  # fmt: skip
def test_calibrate_takes_the_c2c_figures_as_measured(machine: str, file: str, figures: tuple[float, ...]) -> None:
    m = load_machine(str(ROOT / "topologies" / f"{machine}.toml"))
    report = calibrate(m, load_measurements([DATA / file]), fit_on=["latency", "c2c_latency"], created="2026-01-01")
    c = report.calibration.coherence
    assert c is not None
    assert (c.local_hitm_ns, c.remote_hitm_ns, c.remote_hitm_home_reader_ns) == pytest.approx(figures)
    assert file in c.source and "measured" in c.source
    assert "c2c_latency" in report.tables_used
    # without the table asked for, none (the priors have none)
    assert calibrate(m, load_measurements([DATA / file]), fit_on=["latency"]).calibration.coherence is None


def test_calibrations_without_coherence_keep_their_ids() -> None:
    # the coherence field, unset, leaves a calibration's id as it was before the field existed; set, it is part
    # of the content the id names (the E5-2680 v2 and the 8180 are fitted on runs with a c2c table)
    with_c2c = set()
    for path in sorted((ROOT / "topologies").glob("*.cal.json")):
        cal = load_calibration(path)
        assert cal.id == cal.content_id(), path.name
        if cal.coherence is not None:
            with_c2c.add(cal.machine)
            assert cal.model_copy(update={"coherence": None}).content_id() != cal.id
    assert with_c2c == {"seed-001-e5-2680v2", "skylake-8180-2s"}


def test_a_fitted_skylake_times_cross_socket_false_sharing_at_its_measured_hitm() -> None:
    # The 8180's own mlc run, fitted; two threads on the two sockets take turns writing one line homed on
    # node 0: thread 1 (node 1) reads it from thread 0's cache at the writer-homed 113.9 ns, thread 0 at the
    # reader-homed 177.75 ns.
    m = load_machine(str(ROOT / "topologies" / "skylake-8180-2s.toml"))
    cal = calibrate(m, load_measurements([DATA / "fdio-csit-2s-skylake-plat8180.md"]), created="2026-01-01").calibration
    n = 200
    chunk = AccessChunk.build(np.zeros(n, dtype=np.uint64), thread=(np.arange(n) % 2).astype(np.int32), size_bytes=8,
                              is_write=np.ones(n, dtype=bool), compute_ns=np.full(n, 400.0))  # fmt: skip
    pm = PageMap(4096)
    pm.assign(0, np.zeros(1, dtype=np.int16))
    cpus = [m.nodes[0].cpus[0], m.nodes[1].cpus[0]]
    specs = [ThreadSpec(0, cpu=cpus[0]), ThreadSpec(1, cpu=cpus[1], start_ns=200.0)]
    for mode in ("exact", "epoch"):
        r = simulate(m, cal, specs, [chunk], pm, mode=mode, record_latencies=False)
        assert r.coherence is not None and r.coherence["transfers_remote"] == n - 1
        assert r.threads[1].load_to_use_mean_ns == pytest.approx(113.9)


def test_an_snc_run_s_remote_figures_are_its_cross_socket_cells() -> None:
    """The 2x 8269CY in SNC2: its remote HITM tables hold same-socket cells between clusters (45-51 ns) beside
    the cross-socket ones; the remote figures are the cross-socket cells' means (writer homed 107.2-113.5, reader
    homed 167.9-175.3), not means pulled down by the socket's own transfers (130 ns before)."""
    from numasim.calibrate.public_mlc import PUBLIC_MLC_CASES, public_machine

    case = next(c for c in PUBLIC_MLC_CASES if c.file == "plantegg-2s-cascadelake-8269CY-snc2.md")
    path = ROOT / "tests" / "data" / "measurements" / "public_mlc" / case.file
    m = public_machine(case)
    c = calibrate(m, load_measurements([path]), fit_on=["latency", "c2c_latency"]).calibration.coherence
    assert c is not None and c.local_hitm_ns == 45.1
    writer = [107.2, 109.2, 111.2, 113.1, 107.6, 109.6, 111.6, 113.5]
    reader = [169.1, 175.0, 167.9, 172.1, 171.4, 175.3, 169.7, 173.6]
    assert (c.remote_hitm_ns, c.remote_hitm_home_reader_ns) == pytest.approx((np.mean(writer), np.mean(reader)))
