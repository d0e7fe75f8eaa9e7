"""A modified line moving between two core complexes of one socket (AMD): the coherence's socket tier.

A core-to-core ping-pong on a 2x EPYC 7R13 measures three levels (tests/data/measurements/core_to_core): 22.7 ns
within a core complex, 107.6 between complexes of the socket the line is homed on, and 197-200 between sockets or
between complexes of the other socket (the request visits the line's home across the socket link). Before, the
model had one figure for every other last-level instance, so a calibration that carried measured figures timed
the middle level at the cross-socket one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _transfers import transfer_ns

from numasim.engine.caches import cache_levels, instance_keys
from numasim.timing.catalog import catalog_calibration, catalog_machine
from numasim.topology.builders import multi_die
from numasim.topology.model import Machine

EPYC_7313 = "AMD EPYC 7313 16-Core Processor"  # Milan: four core dies of one complex each


def _machine() -> Machine:
    return catalog_machine(multi_die(2, "NPS1", cores_per_socket=16, threads_per_core=2), EPYC_7313)


@pytest.mark.parametrize("mode", ["epoch", "exact"])
def test_each_tier_costs_its_figure_in_both_modes(mode: str) -> None:
    m = _machine()
    cal = catalog_calibration(m)
    c = cal.coherence
    assert c is not None and c.socket_hitm_ns is not None and c.remote_hitm_ns is not None
    assert "amd-epyc-milan" in c.source and "7R13" in c.source
    cpus = m.node(0).cpus
    llc = dict(zip(cpus, instance_keys(m, cache_levels(m, cal)[-1], cpus), strict=True))
    same = next(x for x in cpus[1:16] if llc[x] == llc[0])  # another core of cpu 0's complex
    other = next(x for x in cpus if llc[x] != llc[0])  # a core of another complex of socket 0
    far = m.node(1).cpus[0]  # socket 1
    assert transfer_ns(m, cal, 0, same, 0, mode) == pytest.approx(c.local_hitm_ns, rel=0.01)
    assert transfer_ns(m, cal, 0, other, 0, mode) == pytest.approx(c.socket_hitm_ns, rel=0.01)
    # homed on the other socket: the request goes there and back
    assert transfer_ns(m, cal, 0, other, 1, mode) == pytest.approx(c.remote_hitm_ns, rel=0.01)
    assert transfer_ns(m, cal, 0, far, 0, mode) == pytest.approx(c.remote_hitm_ns, rel=0.01)
    assert transfer_ns(m, cal, far, 0, 0, mode) == pytest.approx(c.remote_hitm_home_reader_ns, rel=0.01)


def test_without_a_socket_figure_another_complex_costs_the_remote_one_as_before() -> None:
    m = _machine()
    cal = catalog_calibration(m)
    assert cal.coherence is not None
    old = cal.model_copy(update={"coherence": cal.coherence.model_copy(update={"socket_hitm_ns": None})})
    cpus = m.node(0).cpus
    llc = dict(zip(cpus, instance_keys(m, cache_levels(m, cal)[-1], cpus), strict=True))
    other = next(x for x in cpus if llc[x] != llc[0])
    for mode in ("epoch", "exact"):
        assert transfer_ns(m, old, 0, other, 0, mode) == pytest.approx(cal.coherence.remote_hitm_home_reader_ns, rel=0.01)


def test_mlc_c2c_of_an_epyc_replays_each_tier_and_a_fit_takes_them_back(tmp_path: Path) -> None:
    """mlc's local pair is the socket's first two cpus (one core complex: the local figure); on a machine of
    four NUMA nodes a socket (one complex each), the cells between two nodes of a socket are transfers between
    complexes with the line homed on the socket: the socket figure, which a fit on the run takes back."""
    from numasim.calibrate.measurements import load_measurements
    from numasim.calibrate.pipeline import calibrate
    from numasim.tools.context import tool_context
    from numasim.tools.mlc import format_mlc, mlc

    m = catalog_machine(multi_die(2, "NPS4", cores_per_socket=16, threads_per_core=2), EPYC_7313)
    cal = catalog_calibration(m)
    c = cal.coherence
    assert c is not None and c.socket_hitm_ns is not None
    r = mlc(tool_context(m, cal), ["--c2c_latency"])
    assert r.c2c_hitm_ns == pytest.approx(c.local_hitm_ns, rel=0.01)
    writer = r.c2c_remote_ns["writer"]
    assert writer[0, 1] == pytest.approx(c.socket_hitm_ns, rel=0.01)  # nodes 0-3: socket 0
    assert writer[0, 4] == pytest.approx(c.remote_hitm_ns, rel=0.01)
    path = tmp_path / "mlc.txt"
    path.write_text(format_mlc(r))
    # validation's analytic replay and its engine replay (the virtual mlc) read the run as it was made
    from numasim.calibrate.validate import validate

    for method in ("analytic", "engine"):
        table = validate(m, cal, load_measurements([path]), method=method).table("c2c_latency")
        assert table.mape_pct < 0.5, (method, table.worst)
    fitted = calibrate(m, load_measurements([path]), fit_on=["c2c_latency"], priors=cal).calibration.coherence
    assert fitted is not None and "measured" in fitted.source
    assert (fitted.local_hitm_ns, fitted.socket_hitm_ns, fitted.remote_hitm_ns) == pytest.approx(
        (c.local_hitm_ns, c.socket_hitm_ns, c.remote_hitm_ns), rel=0.01)


def test_on_an_epyc_of_one_core_a_complex_mlcs_local_pair_is_two_complexes(tmp_path: Path) -> None:
    """The EPYC 72F3 spreads its eight cores over eight core dies: mlc's local pair (the socket's first two cpus)
    crosses complexes, and both of validation's replays say so."""
    from numasim.calibrate.measurements import load_measurements
    from numasim.calibrate.validate import validate
    from numasim.tools.context import tool_context
    from numasim.tools.mlc import format_mlc, mlc

    m = catalog_machine(multi_die(2, "NPS1", cores_per_socket=8, threads_per_core=2), "AMD EPYC 72F3 8-Core Processor")
    cal = catalog_calibration(m)
    assert cal.coherence is not None and cal.coherence.socket_hitm_ns is not None
    r = mlc(tool_context(m, cal), ["--c2c_latency"])
    assert r.c2c_hitm_ns == pytest.approx(cal.coherence.socket_hitm_ns, rel=0.01)
    path = tmp_path / "mlc.txt"
    path.write_text(format_mlc(r))
    for method in ("analytic", "engine"):
        assert validate(m, cal, load_measurements([path]), method=method).table("c2c_latency").mape_pct < 0.5
    # and a fit takes that figure for the socket's, keeping the priors' within a complex, said so
    from numasim.calibrate.pipeline import calibrate

    fitted = calibrate(m, load_measurements([path]), fit_on=["c2c_latency"], priors=cal).calibration.coherence
    assert fitted is not None
    assert (fitted.local_hitm_ns, fitted.socket_hitm_ns) == pytest.approx(
        (cal.coherence.local_hitm_ns, cal.coherence.socket_hitm_ns), rel=0.01)
    assert "mlc's local pair lies in two complexes" in fitted.source
