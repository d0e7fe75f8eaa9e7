"""Regression tests for what tests/fuzz found, kept outside the fuzz suite so each stays covered whatever the
fuzz strategies draw next."""

from __future__ import annotations

from pathlib import Path

import pytest

from numasim.cli import main
from numasim.topology.builders import glueless
from numasim.topology.io import write_hwloc_xml, write_sysfs_node_tree

MACHINE = glueless(2, cpus_per_node=2, memory_bytes=256 << 20)


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and "invalid literal" not in err and err.count("\n") == 1, err
    return err


def test_hwloc_bad_gp_index_is_a_format_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = write_hwloc_xml(MACHINE)
    assert 'gp_index="4" local_memory' in text  # node 0's NUMANode
    path = tmp_path / "m.xml"
    path.write_text(text.replace('gp_index="4" local_memory', 'gp_index="1e308" local_memory', 1))
    assert main(["topo", "show", str(path)]) == 2
    assert "NUMANode object: bad gp_index='1e308'" in _one_line(capsys)


def test_hwloc_model_errors_name_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a PU listed twice under one NUMA node: the Node model refuses it; the message must say which file
    text = write_hwloc_xml(MACHINE)
    pu = text[text.index('<object type="PU"') : text.index("/>", text.index('<object type="PU"')) + 2]
    path = tmp_path / "m.xml"
    path.write_text(text.replace(pu, pu + pu, 1))
    assert main(["topo", "show", str(path)]) == 2
    err = _one_line(capsys)
    assert str(path) in err and "cpu" in err


def test_sysfs_model_errors_name_the_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = tmp_path / "node"
    write_sysfs_node_tree(MACHINE, tree)
    (tree / "node1" / "access0" / "initiators" / "read_bandwidth").write_text("-1\n")
    assert main(["topo", "show", str(tree)]) == 2
    err = _one_line(capsys)
    assert str(tree) in err and "read_bandwidth_gb_s = -0.001" in err


def test_an_access_spanning_pages_places_every_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a 65535-byte access (the npz format allows it) touches 17 pages: each must be placed, else the engine
    # met "address ... is not mapped to any node"
    import json

    import numpy as np

    from numasim.workload.access import AccessChunk
    from numasim.workload.trace import read_trace, trace_info, write_trace
    from numasim.workload.trace.stats import touched_pages

    chunk = AccessChunk.build(np.array([0x7F0000000000, 0x7F0000100000], dtype=np.uint64),
                              size_bytes=np.array([65535, 64]), thread=np.array([0, 1]))
    pages, first = touched_pages([chunk])
    assert len(pages) == 17 and first.tolist() == [0] * 16 + [1]
    path = tmp_path / "t.npz"
    write_trace([chunk], path)
    assert trace_info(read_trace(path)).footprint_pages == 17
    machine = tmp_path / "m.toml"
    from numasim.topology.io.toml_format import save_machine_toml

    save_machine_toml(MACHINE, machine)
    result = tmp_path / "r.json"
    assert main(["run", "-m", str(machine), "--nominal", "-t", str(path), "--no-progress", "-o", str(result)]) == 0
    placement = json.loads(result.read_text())["placement"]
    assert sum(placement["pages_per_node"].values()) == 17 and placement["failed_pages"] == 0


def test_placement_errors_name_the_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import numpy as np

    from numasim.workload.access import AccessChunk
    from numasim.workload.trace import write_trace

    path = tmp_path / "k.npz"
    write_trace([AccessChunk.build(np.array([2**64 - 4096], dtype=np.uint64))], path)
    assert main(["run", "-m", "seed-003-2node", "-t", str(path), "--no-progress"]) == 2
    err = _one_line(capsys)
    assert f"{path}: trace touches address 0xfffffffffffff000, beyond user space" in err


@pytest.mark.parametrize(
    ("tail", "needle"),
    [
        ("benchmarks: none\n", "benchmarks: expected a mapping"),
        ("benchmarks:\n  measurements:\n    MEM:\n      1: x\n", "benchmarks.measurements.MEM.1: expected a mapping"),
        ("benchmarks:\n  measurements:\n    MEM:\n      1:\n        cores: [1]\n        results: c\n",
         "benchmarks.measurements.MEM.1.results: expected a mapping of kernels"),
    ],
)
def test_kerncraft_wrong_types_are_format_errors(tail: str, needle: str) -> None:
    from numasim.calibrate.parsers.kerncraft import parse_kerncraft_text
    from numasim.errors import FormatError

    head = ("model name: Intel(R) Xeon(R) CPU E5-2680 v2 @ 2.80GHz\nsockets: 2\ncores per socket: 10\n"
            "threads per core: 2\nNUMA domains per socket: 1\ncores per NUMA domain: 10\n")
    with pytest.raises(FormatError, match=needle):
        parse_kerncraft_text(head + tail, "k.yml")


def test_mlc_peak_fit_error_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # peak bandwidths without the ALL Reads row: the fit cannot start, and must say from which file
    text = (
        "Intel(R) Memory Latency Checker - v3.1a\nMeasuring Peak Memory Bandwidths for the system\n"
        "Bandwidths are in MB/sec (1 MB/sec = 1,000,000 Bytes/sec)\nUsing all the threads from each core if "
        "Hyper-threading is enabled\nUsing traffic with the following read-write ratios\n"
        "3:1 Reads-Writes :\t93000.0\n1:1 Reads-Writes :\t81000.0\n"
    )
    path = tmp_path / "mlc.txt"
    path.write_text(text)
    code = main(["calibrate", str(path), "-m", "seed-001-e5-2680v2", "-o", str(tmp_path / "c.json")])
    assert code == 2
    err = _one_line(capsys)
    assert f"{path}: peak bandwidth: no 'ALL Reads' figure" in err
    assert not (tmp_path / "c.json").exists()


def test_numactl_distance_beyond_64_bits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from numasim.topology.io.numactl import numactl_hardware_for

    text = numactl_hardware_for(MACHINE)
    assert "   0:   10   16" in text
    path = tmp_path / "h.txt"
    path.write_text(text.replace("   0:   10   16", "   0:   18446744073709551616   16"))
    assert main(["topo", "show", str(path)]) == 2
    err = _one_line(capsys)
    assert str(path) in err and "distances must be whole numbers 10..255" in err


def test_calibration_errors_name_the_measurement_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (
        "Intel(R) Memory Latency Checker - v3.1a\nMeasuring idle latencies (in ns)...\n\t\tNuma node\n"
        "Numa node\t     0\t     1\t\n       0\t  61.7\t 115.1\t\n       1\t -114.6\t  61.2\t\n"
    )
    path = tmp_path / "mlc.txt"
    path.write_text(text)
    code = main(["calibrate", str(path), "-m", "seed-001-e5-2680v2", "-o", str(tmp_path / "c.json")])
    assert code == 2
    assert f"{path}:6: idle latency matrix: node 1 -> 0 = -114.6 ns: not a ns figure" in _one_line(capsys)
    assert not (tmp_path / "c.json").exists()
