"""kerncraft machine files (likwid-bench bandwidth vs cores) and their replay with the virtual STREAM."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from numasim.calibrate.parsers import detect_measurement_format, parse_measurement
from numasim.calibrate.parsers.kerncraft import parse_kerncraft_text
from numasim.calibrate.scaling import compare_scaling, kerncraft_machine
from numasim.errors import CalibrationError, FormatError, NumasimError
from numasim.timing.catalog import catalog_calibration
from numasim.timing.model import nominal_calibration

KERNCRAFT = Path(__file__).resolve().parents[3] / "shared" / "data" / "kerncraft"
needs_data = pytest.mark.skipif(not KERNCRAFT.is_dir(), reason="shared/data is not beside this checkout")


@needs_data
def test_every_shipped_file_parses_or_is_refused_by_name() -> None:
    parsed = {}
    for f in sorted(KERNCRAFT.glob("*.yml")):
        assert detect_measurement_format(f) == "kerncraft"
        parsed[f.name] = parse_measurement(f)
    # ThunderX2's file names its part in a comment only: its layout and measurements still read, but nothing
    # names the processor the catalog would time
    tx2 = parsed["ARMv8_ThunderX2-CN9980.yml"]
    assert tx2.model_name is None and tx2.layout.model_type == "Cavium Thunder X2 (ARMv8)"
    assert tx2.scaling["MEM"]["copy"].cores.tolist()[:2] == [1, 2]
    with pytest.raises(NumasimError, match="cpu|processor|model"):
        catalog_calibration(kerncraft_machine(tx2))
    spr = parsed["SapphireRapids_Platinum-8470.yml"]
    # the file's MEM cores list lost a comma ("38\n 39"): split back, 52 counts for 52 values
    assert spr.scaling["MEM"]["copy"].cores.tolist() == list(range(1, 53))
    skx = parsed["SkylakeSP_Gold-6148_SNC.yml"]
    assert (skx.sockets, skx.numa_domains_per_socket, skx.cores_per_numa_domain) == (2, 2, 10)
    assert skx.clock_ghz == pytest.approx(2.4)
    assert skx.scaling["MEM"]["load"].bandwidth_gb_s[-1] == pytest.approx(131.34)


def test_garbage_is_refused_with_the_field() -> None:
    base = "model name: X\nsockets: 1\ncores per socket: 2\nthreads per core: 1\nNUMA domains per socket: 1\n"
    base += "cores per NUMA domain: 2\n"
    with pytest.raises(FormatError, match="cores per socket"):
        parse_kerncraft_text(base.replace("cores per socket: 2", "cores per socket: two"))
    bad = base + "benchmarks:\n  measurements:\n    MEM:\n      1:\n        cores: [1, 2]\n        results:\n"
    with pytest.raises(FormatError, match="expected 2 values"):
        parse_kerncraft_text(bad + "          copy: [1 GB/s]\n")
    with pytest.raises(FormatError, match="quantity in B/s"):
        parse_kerncraft_text(bad + "          copy: [1 GB/s, 2 ns]\n")
    with pytest.raises(FormatError, match="not valid YAML"):
        parse_kerncraft_text("model name: [unclosed\n")
    with pytest.raises(FormatError, match=r"'NUMA domains per socket' 1 x 'cores per NUMA domain' 3 != 'cores per "
                                          r"socket' 2"):
        parse_kerncraft_text(base.replace("cores per NUMA domain: 2", "cores per NUMA domain: 3"))


@needs_data
def test_replay_runs_the_virtual_stream_and_respects_physics() -> None:
    r = parse_measurement(KERNCRAFT / "SkylakeSP_Gold-6148_SNC.yml")
    m = kerncraft_machine(r)
    assert [len(n.cpus) for n in m.nodes] == [20, 20, 20, 20] and m.cpu_model == r.model_name
    cal = nominal_calibration(m)
    c = compare_scaling(m, cal, r.scaling["MEM"]["copy"], threads_per_core=2, core_counts=[1, 10, 20])
    assert c.cores.tolist() == [1, 10, 20]
    # more cores never lower the socket's bandwidth; the socket never beats its controllers' peak
    assert np.all(np.diff(c.simulated_gb_s) >= -1e-9)
    socket_peak = sum(n.controller.read_bandwidth_gb_s for n in m.nodes if n.socket == 0 and n.controller)
    assert c.simulated_gb_s[-1] <= socket_peak * 1.0001
    assert c.to_dict()["calibration"] == cal.id


def test_kernel_streams_are_parsed_and_checked() -> None:
    base = "model name: X\nsockets: 1\ncores per socket: 2\nthreads per core: 1\nNUMA domains per socket: 1\n"
    base += "cores per NUMA domain: 2\nbenchmarks:\n  kernels:\n    daxpy:\n"
    good = ("      read streams: {bytes: 16.00 B, streams: 2}\n      read+write streams: {bytes: 8.00 B, streams: 1}\n"
            "      write streams: {bytes: 8.00 B, streams: 1}\n")
    k = parse_kerncraft_text(base + good).kernels["daxpy"]
    assert (k.read_only, k.read_write, k.write_only, k.counted_bytes) == (1, 1, 0, 24)
    with pytest.raises(FormatError, match=r"benchmarks.kernels.daxpy.read streams: '24.00 B' for 2 streams"):
        parse_kerncraft_text(base + good.replace("16.00 B", "24.00 B"))
    with pytest.raises(FormatError, match="benchmarks.kernels.daxpy: 0 read, 1 read"):
        parse_kerncraft_text(base + good.replace("{bytes: 16.00 B, streams: 2}", "{bytes: 0 B, streams: 0}"))
    with pytest.raises(FormatError, match="write streams: expected"):
        parse_kerncraft_text(base + good.replace("{bytes: 8.00 B, streams: 1}\n", "one\n"))


@needs_data
def test_every_kernel_replays_and_copy_is_streams_copy() -> None:
    from numasim.calibrate.scaling import replay_bandwidth_scaling, replay_kernel_scaling
    from numasim.timing.catalog import catalog_calibration

    r = parse_measurement(KERNCRAFT / "HaswellEP_E5-2695v3_CoD.yml")
    m = kerncraft_machine(r)
    cal = catalog_calibration(m)
    # the generic replay of copy's streams is the virtual STREAM's Copy, access for access
    generic = replay_kernel_scaling(m, cal, [1, 7], r.kernels["copy"], threads_per_core=r.threads_per_core)
    stream_copy = replay_bandwidth_scaling(m, cal, [1, 7], threads_per_core=r.threads_per_core)
    np.testing.assert_allclose(generic, stream_copy, rtol=1e-12)  # (only the GB/s arithmetic differs)
    with pytest.raises(CalibrationError, match="its streams are needed"):
        compare_scaling(m, cal, r.scaling["MEM"]["load"], core_counts=[1])
    got = {k: compare_scaling(m, cal, r.scaling["MEM"][k], threads_per_core=r.threads_per_core, core_counts=[1, 7],
                              streams=r.kernels[k]).simulated_gb_s for k in ("load", "update", "daxpy", "triad")}
    socket_domain_peak = m.nodes[0].controller.read_bandwidth_gb_s
    for k, bw in got.items():
        assert np.all(np.diff(bw) >= -1e-9), k  # more cores never move less
        assert bw[-1] <= socket_domain_peak * 1.0001, k  # one domain's cores, its controller's peak
    # a core's update (one line read, written back) counts two streams per line miss, load one
    assert got["update"][0] > got["load"][0]
