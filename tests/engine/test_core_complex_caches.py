"""An AMD core complex's L3 (``CacheScope.CCX``): one instance per complex of a core die, not one per socket.

A catalog EPYC machine used to time the SKU's whole L3 as one socket-wide cache: ``lat_mem_rd`` on a 2x EPYC
7742 read L3 latency up to 192 MiB, where every 4-core complex has 16 MiB of its own.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from numasim.calibrate.public_mlc import PUBLIC_MLC_CASES, public_machine
from numasim.engine.caches import cache_levels, instance_keys
from numasim.timing.catalog import catalog_calibration, catalog_machine
from numasim.timing.model import Calibration
from numasim.topology.builders import glueless
from numasim.topology.io.lscpu import load_machine_lscpu
from numasim.topology.model import CacheLevel, CacheScope, CoreDie, Machine, core_complexes
from numasim.units import MiB

DATA = Path(__file__).resolve().parents[1] / "data" / "topology"


@pytest.fixture(scope="module")
def rome():  # type: ignore[no-untyped-def]
    """2x EPYC 7742 in NPS4, imported from lscpu (which names the model) and timed from the catalog."""
    machine = catalog_machine(load_machine_lscpu(DATA / "lscpu-2s-epyc-7742-nps4.txt"))
    return machine, catalog_calibration(machine)


def test_rome_l3_is_16_mib_per_four_core_complex(rome) -> None:  # type: ignore[no-untyped-def]
    machine, cal = rome
    l3 = next(c for c in cal.caches if c.name == "L3")
    assert l3.scope is CacheScope.CCX and l3.complexes_per_die == 2 and l3.size_bytes == 16 * MiB
    level = next(s for s in cache_levels(machine, cal) if s.name == "L3")
    keys = instance_keys(machine, level, sorted(machine.cpus))
    by_key: dict[tuple[object, ...], list[int]] = {}
    for cpu, key in zip(sorted(machine.cpus), keys, strict=True):
        by_key.setdefault(key, []).append(cpu)
    # 2 sockets x 8 dies x 2 complexes, each 4 cores and their 4 sibling threads; 256 MiB a socket in all
    assert len(by_key) == 32 and {len(v) for v in by_key.values()} == {8}
    assert sorted(by_key.values())[0] == [0, 1, 2, 3, 128, 129, 130, 131]
    assert len(by_key) * l3.size_bytes == 2 * 256 * MiB


def test_lat_mem_rd_steps_at_the_complex_size(rome) -> None:  # type: ignore[no-untyped-def]
    """One thread reads L3 latency while its working set fits its complex's 16 MiB, memory beyond it."""
    from numasim.tools.context import tool_context
    from numasim.tools.lat_mem_rd import lat_mem_rd

    machine, cal = rome
    l3 = next(c for c in cal.caches if c.name == "L3")
    r = lat_mem_rd(tool_context(machine, cal, cpunodebind=[0], membind=[0]), "48M", [128])
    size_mb = np.array(r.size_bytes) / 2**20
    ns = np.array(r.latency_ns[128])
    assert np.all(ns[(size_mb > 2) & (size_mb < 12)] == pytest.approx(l3.latency_ns))
    assert np.all(ns[size_mb > 24] > 5 * l3.latency_ns)  # memory: the rest of the socket's L3 is not this core's


def test_genoa_with_fused_l3_keeps_one_complex_a_die() -> None:
    """A 24-core EPYC 9224: 4 core dies of 6 cores, 64 MiB of L3, so 16 MiB a die (half of each fused off)."""
    case = next(c for c in PUBLIC_MLC_CASES if c.file == "cxl-2s-genoa-epyc9224-nps2.md")
    cal = catalog_calibration(public_machine(case))
    l3 = next(c for c in cal.caches if c.name == "L3")
    assert l3.scope is CacheScope.CCX and l3.complexes_per_die == 1 and l3.size_bytes == 16 * MiB
    assert len(cal.core_dies) == 8


def test_core_complexes_pair_every_thread_with_its_core() -> None:
    assert core_complexes([0, 1, 2, 3, 4, 5, 6, 7], 2) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(ValueError, match="cannot split them into 2 core complexes"):
        core_complexes([0, 1, 2, 3, 4, 5, 6, 7, 64, 65], 2)


def test_a_core_complex_cache_needs_core_dies_that_split_into_its_complexes() -> None:
    m = glueless(2, cpus_per_node=8)
    ccx = CacheLevel(name="L3", size_bytes=16 * MiB, latency_ns=15.0, scope=CacheScope.CCX, complexes_per_die=2)
    with pytest.raises(ValidationError, match="are on no core die"):
        type(m).model_validate({**m.model_dump(), "caches": [ccx.model_dump()]})
    dies = [CoreDie(cpus=c, read_bandwidth_gb_s=50.0, write_bandwidth_gb_s=25.0)
            for c in ([0, 1, 2], [3, 4, 5, 6, 7], list(range(8, 16)))]
    with pytest.raises(ValidationError, match=r"core_dies\[0\]: cpus \[0, 1, 2\] are not runs"):
        type(m).model_validate({**m.model_dump(), "caches": [ccx.model_dump()], "core_dies": [d.model_dump() for d in dies]})
    with pytest.raises(ValidationError, match="only a ccx-scoped level splits a core die"):
        CacheLevel(name="L3", size_bytes=MiB, latency_ns=15.0, scope=CacheScope.SOCKET, complexes_per_die=2)


def _naples() -> tuple[Machine, Calibration]:
    """2x EPYC 7451 as the firmware shows it: a node a die (4 a socket), 6 cores of 2 threads each."""
    from numasim.topology.builders import multi_die

    m = multi_die(2, "NPS4", cores_per_socket=24, threads_per_core=2)
    m = m.model_copy(update={"cpu_model": "AMD EPYC 7451 24-Core Processor"})
    return m, catalog_calibration(m)


def test_naples_l3_is_8_mib_per_complex_of_dies_without_ports() -> None:
    """Naples' dies own their memory controllers: they have no port, yet each die's two core complexes have
    8 MiB of L3 each. Before, the package's 64 MiB was one socket-wide cache."""
    machine, cal = _naples()
    l3 = next(c for c in cal.caches if c.name == "L3")
    assert l3.scope is CacheScope.CCX and l3.complexes_per_die == 2 and l3.size_bytes == 8 * MiB
    dies = cal.core_dies
    assert len(dies) == 8 and all(not d.has_port and d.read_bandwidth_gb_s is None for d in dies)
    assert not any(p.parameter.startswith("core_dies") for p in cal.provenance.priors)
    assert "no port of their own" in cal.provenance.notes


def test_naples_lat_mem_rd_steps_at_its_complex_and_ports_are_absent() -> None:
    from numasim.engine.memsys import build_memory_system
    from numasim.timing.model import apply_calibration
    from numasim.tools.context import tool_context
    from numasim.tools.lat_mem_rd import lat_mem_rd

    machine, cal = _naples()
    l3 = next(c for c in cal.caches if c.name == "L3")
    r = lat_mem_rd(tool_context(machine, cal, cpunodebind=[0], membind=[0]), "32M", [128])
    size_mb = np.array(r.size_bytes) / 2**20
    ns = np.array(r.latency_ns[128])
    assert np.all(ns[(size_mb > 1) & (size_mb < 6)] == pytest.approx(l3.latency_ns))
    assert np.all(ns[size_mb > 12] > 4 * l3.latency_ns)  # memory beyond the complex's 8 MiB
    # a die without a port is no initiator and no resource of the memory system
    ms = build_memory_system(apply_calibration(machine, cal), cal)
    assert not any(r.kind == "die" for r in ms.resources)
    assert ms.initiator_names[: len(machine.nodes)] == [f"node{n.id}" for n in machine.nodes]
    assert len([n for n in ms.initiator_names if ".die" in n]) == 0


@pytest.mark.parametrize(("model", "instances", "l3_mib"), [("AMD EPYC 4464P 12-Core Processor", 2, 32),
                                                             ("AMD EPYC 4344P 8-Core Processor", 1, 32),
                                                             ("AMD EPYC 3201 8-Core Processor", 2, 8)])
def test_single_socket_epycs_split_their_l3_per_die(model: str, instances: int, l3_mib: int) -> None:
    """AM5's EPYC 4004 (one or two core dies of 32 MiB) and the EPYC 3000 (a Zeppelin die of two 8 MiB complexes):
    ``instances`` L3s of ``l3_mib`` each, which together are the SKU's L3."""
    from numasim.timing.catalog import match_cpu
    from numasim.topology.builders import multi_die

    sku = match_cpu(model).sku
    assert sku is not None and sku.l3_mib is not None
    m = multi_die(1, "NPS1", cores_per_socket=sku.cores, threads_per_core=sku.threads // sku.cores)
    cal = catalog_calibration(m.model_copy(update={"cpu_model": model}))
    l3 = next(c for c in cal.caches if c.name == "L3")
    assert l3.scope is CacheScope.CCX and l3.size_bytes == l3_mib * MiB
    assert len(cal.core_dies) * l3.complexes_per_die == instances
    assert instances * l3.size_bytes == sku.l3_mib * MiB
