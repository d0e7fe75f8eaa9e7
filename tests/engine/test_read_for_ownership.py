"""A store miss reads its line for ownership: a read, at the controller's read bandwidth and on the route back.

A write costs ``write_cost_factor`` (``w``) lines. Where ``w > 1`` a core's store miss is its line's write-back (one
line on the route to memory, at the controller's write bandwidth) and ``w - 1`` lines of read for ownership (at the
controller's read bandwidth, then on the route back to the core, as a read's data). Before, both lines went to
memory at the write bandwidth: mlc's mixes with stores came out low wherever reads and writes have separate
directions (an EPYC 9224's core-die ports: its 1:1 mix -34 %) or rates (the controllers).
"""

from __future__ import annotations

import numpy as np
import pytest

from numasim.engine import PageMap, SimulationResult, ThreadSpec, simulate
from numasim.engine.memsys import LINE_BYTES, MemorySystem, build_memory_system
from numasim.timing.model import Calibration, nominal_calibration
from numasim.topology.builders import glueless
from numasim.topology.model import Machine
from numasim.workload.access import AccessChunk

_A = 1 << 32
READ_GB_S, WRITE_GB_S = 40.0, 25.0


def _calibration(m: Machine, write_cost: float) -> Calibration:
    d = nominal_calibration(m).model_dump()
    for c in d["controllers"]:
        c["read_bandwidth_gb_s"], c["write_bandwidth_gb_s"] = READ_GB_S, WRITE_GB_S
    d["core"]["write_cost_factor"] = write_cost
    return Calibration.model_validate({**d, "id": ""})


def _path(ms: MemorySystem, src: int, dst: int, write: bool) -> list[tuple[str, float, float]]:
    """(resource name, busy ns, write-back share) along the class's route."""
    c = int(ms.route_class(np.array([src]), np.array([dst]), np.array([int(write)]))[0])
    lo, hi = ms.path_ptr[c], ms.path_ptr[c + 1]
    share = ms.path_wb_share[lo:hi] if len(ms.path_wb_share) else np.zeros(hi - lo)
    return [(ms.resources[r].name, float(b), float(s))
            for r, b, s in zip(ms.path_res[lo:hi], ms.path_busy[lo:hi], share, strict=True)]


def _link_ns(ms: MemorySystem, name: str) -> float:
    return LINE_BYTES / next(r.capacity_bytes_per_ns for r in ms.resources if r.name == name)


def test_a_remote_store_writes_back_on_the_way_there_and_reads_for_ownership_on_the_way_back() -> None:
    m = glueless(2)
    ms = build_memory_system(m, _calibration(m, 2.0))
    there, back = _link_ns(ms, "0->1"), _link_ns(ms, "1->0")
    wb, rfo = LINE_BYTES / WRITE_GB_S, LINE_BYTES / READ_GB_S
    path = _path(ms, 0, 1, write=True)
    assert [p[0] for p in path] == ["0->1", "mc1", "1->0"]
    assert np.allclose([p[1] for p in path], [there, wb + rfo, back])
    assert np.allclose([p[2] for p in path], [1.0, wb / (wb + rfo), 0.0])  # what a write hit still owes
    # a read is as it was: the controller at the read bandwidth, then the route back
    assert _path(ms, 0, 1, write=False) == [("mc1", pytest.approx(rfo), 0.0), ("1->0", pytest.approx(back), 0.0)]
    # a local store: both lines at the controller
    assert [p[0] for p in _path(ms, 0, 0, write=True)] == ["mc0"]


def test_a_fraction_of_a_read_for_ownership_is_charged_as_such() -> None:
    m = glueless(2)
    ms = build_memory_system(m, _calibration(m, 1.5))
    path = _path(ms, 0, 1, write=True)
    assert np.allclose([p[1] for p in path], [_link_ns(ms, "0->1"), LINE_BYTES / WRITE_GB_S + 0.5 * LINE_BYTES / READ_GB_S,
                                              0.5 * _link_ns(ms, "1->0")])


def test_a_lines_own_busy_time_is_a_whole_line_whatever_the_read_for_ownership() -> None:
    """What a request's own line adds to the utilisation it sees (and the unit a queue is counted in) stays one
    line, not the ``w - 1`` of a line a fitted factor's read for ownership carries back."""
    m = glueless(2)
    ms = build_memory_system(m, _calibration(m, 1.25))
    own = dict(zip([r.name for r in ms.resources], ms.own_line_busy_ns(), strict=True))
    assert np.isclose(own["1->0"], _link_ns(ms, "1->0")) and np.isclose(own["mc1"], LINE_BYTES / READ_GB_S)


def test_writes_that_cost_one_line_are_as_before() -> None:
    """``w <= 1``: a write is ``w`` lines to memory at the write bandwidth, no read for ownership, no write-back."""
    m = glueless(2)
    for w in (1.0, 0.8):
        ms = build_memory_system(m, _calibration(m, w))
        path = _path(ms, 0, 1, write=True)
        assert [p[0] for p in path] == ["0->1", "mc1"]
        assert np.allclose([p[1] for p in path], [w * _link_ns(ms, "0->1"), w * LINE_BYTES / WRITE_GB_S])
        assert len(ms.path_wb_share) == 0 and not ms.models_write_backs


def test_a_core_die_reads_for_ownership_through_its_port() -> None:
    from numasim.calibrate.public_mlc import PUBLIC_MLC_CASES, public_machine
    from numasim.timing.catalog import catalog_calibration

    case = next(c for c in PUBLIC_MLC_CASES if "9224" in c.label)
    m = public_machine(case)
    ms = build_memory_system(m, catalog_calibration(m))
    die = ms.initiator_of_cpu(m.node(0).cpus[0])
    names = [p[0] for p in _path(ms, die, 0, write=True)]
    port_out, port_in = names[0], names[-1]
    assert port_out.startswith("die") and port_in.endswith(port_out.split("->")[0])  # die<k>->node0, node0->die<k>
    assert names.count("mc0") == 1


def _stores(mode: str, write_cost: float) -> SimulationResult:
    """Four threads on node 0 store to lines of node 1, each line once (stores only, mlc's 1:1)."""
    m = glueless(2, cpus_per_node=8)
    pm = PageMap(4096)
    pm.assign(_A, np.ones(4 * 4096 * 64 // 4096 + 2, dtype=np.int16))
    chunks = [AccessChunk.build(np.uint64(_A) + (np.arange(4096, dtype=np.uint64) + np.uint64(t * 4096)) * np.uint64(64),
                                thread=t, is_write=True) for t in range(4)]
    return simulate(m, _calibration(m, write_cost), [ThreadSpec(t, cpu=t) for t in range(4)], chunks, pm,
                    mode=mode, record_latencies=False)


@pytest.mark.parametrize("mode", ["exact", "epoch"])
def test_remote_stores_move_their_lines_both_ways(mode: str) -> None:
    r = _stores(mode, 2.0)
    res = {x.name: x for x in r.resources}
    n = 4 * 4096 * LINE_BYTES
    # one write-back each way there, one read for ownership each on the way back
    assert res["0->1"].bytes == n and res["1->0"].bytes == n
    assert np.isclose(res["0->1"].busy_ns, res["1->0"].busy_ns, rtol=1e-9)
    # the controller: a line at each rate per store, never more than its read bandwidth's worth of time allows
    mc1 = res["mc1"]
    assert np.isclose(mc1.busy_ns, 4 * 4096 * (LINE_BYTES / WRITE_GB_S + LINE_BYTES / READ_GB_S), rtol=1e-9)
    assert mc1.utilisation_mean <= 1.0 + 1e-9
    # at w = 1 the stores go one way only
    one = {x.name: x for x in _stores(mode, 1.0).resources}
    assert one["1->0"].bytes == 0 and one["0->1"].bytes == n


def test_both_engines_time_remote_stores_alike() -> None:
    exact, epoch = _stores("exact", 2.0), _stores("epoch", 2.0)
    assert abs(epoch.run_time_ns / exact.run_time_ns - 1.0) < 0.05
