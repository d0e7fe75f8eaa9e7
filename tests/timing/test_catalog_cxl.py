"""CXL memory in the platform catalog: the data, the priors a CXL node gets, their physics, and the fit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.cli import main
from numasim.errors import CalibrationError, FormatError
from numasim.timing.catalog import (
    catalog_calibration,
    catalog_figures,
    catalog_machine,
    load_catalog,
    match_cpu,
)
from numasim.timing.catalog.calibration import socket_layout
from numasim.timing.catalog.cxl import load_cxl_catalog, parse_cxl_toml
from numasim.timing.catalog.cxl_timing import cxl_figures, measured_added_latency
from numasim.timing.model import Calibration, apply_calibration, load_calibration
from numasim.topology.builders import glueless
from numasim.topology.io import load_machine
from numasim.topology.model import Machine, MemoryKind
from numasim.topology.routing import bandwidth_table_gb_s, latency_table_ns

CXL_HOSTS = sorted(p.name for p in load_catalog() if p.cxl is not None)
DEVICES = [d.name for d in load_cxl_catalog().devices]


# --- the data ---------------------------------------------------------------------------------------------


def test_link_payload_follows_the_phy_and_the_flit() -> None:
    cat = load_cxl_catalog()
    x16, x8 = cat.link(16), cat.link(8)
    # 32 GT/s x 16 lanes / 8 x 128/130 = 63.02 GB/s; x 64/68 x 8/9 = 52.72 GB/s of line payload
    assert x16.raw_gb_s == pytest.approx(64 * 128 / 130)
    assert x16.payload_gb_s == pytest.approx(64 * 128 / 130 * 64 / 68 * 8 / 9)
    assert x8.payload_gb_s == pytest.approx(x16.payload_gb_s / 2)
    for ln in cat.links:
        assert ln.payload_gb_s < ln.raw_gb_s <= ln.gt_s * ln.lanes / 8
        assert "slot_efficiency" in ln.estimates  # the header share is ours, and says so


def test_every_device_number_has_a_source_or_an_estimate_label() -> None:
    cat = load_cxl_catalog()
    assert cat.default_device in DEVICES
    for d in cat.devices:
        assert d.sources, d.name
        assert set(d.estimates) <= set(type(d).model_fields)
        assert d.dram_peak_gb_s > 0
    assert "default_added_ns" in cat.latency.estimates and cat.latency.sources


def test_cxl_hosts_are_the_platforms_that_support_it() -> None:
    assert CXL_HOSTS == ["amd-epyc-bergamo", "amd-epyc-genoa", "amd-epyc-turin", "intel-emerald-rapids", "intel-granite-rapids",
                         "intel-granite-rapids-sp", "intel-sapphire-rapids", "intel-sapphire-rapids-hbm", "intel-sierra-forest"]
    assert all(p.cxl is None for p in load_catalog() if p.years[0] < 2022)


_GOOD = """
default_device = "d"
default_device_why = "the only one"
[latency]
default_added_ns = 100.0
derivation = "x"
sources = ["s"]
[[links]]
lanes = 8
gt_s = 32.0
encoding_efficiency = 0.98
flit_efficiency = 0.94
slot_efficiency = 0.9
derivation = "x"
sources = ["s"]
[[devices]]
name = "d"
title = "D"
cxl_version = "2.0"
lanes = 8
ddr = "DDR5"
channels = 2
mt_s = 4800
sources = ["s"]
[[source]]
id = "s"
title = "S"
gave = "all"
"""


def test_a_good_cxl_file_parses() -> None:
    cat = parse_cxl_toml(_GOOD)
    assert cat.default().name == "d" and cat.link(8).payload_gb_s == pytest.approx(32 * 0.98 * 0.94 * 0.9)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('sources = ["s"]\n[[source]]', 'sources = []\n[[source]]'), r"devices\[d\]: numbers .* neither sources"),
        (('mt_s = 4800', 'mt_s = 4800\nestimates = ["speed"]'), r"estimates names \['speed'\]"),
        (('mt_s = 4800', 'mt_s = 4800\nidle_latency_ns = 250.0\nmeasured_on = "a box"'), "needs measured_platform"),
        (('default_device = "d"', 'default_device = "e"'), r"default_device = 'e'"),
        (('lanes = 8\nddr', 'lanes = 16\nddr'), r"devices\[d\].lanes = 16: no link"),
        (('channels = 2', 'channels = 0'), "channels"),
        (('default_added_ns = 100.0', 'default_added_ns = -1.0'), "default_added_ns"),
    ],
)
def test_bad_cxl_data_is_an_error_naming_the_field(edit: tuple[str, str], message: str) -> None:
    with pytest.raises(FormatError, match=message):
        parse_cxl_toml(_GOOD.replace(*edit), "cxl.toml")


# --- priors on the shipped CXL machine ---------------------------------------------------------------------


def _cxl_cells(machine: Machine, cal: Calibration) -> tuple[np.ndarray, np.ndarray, list[int], list[int]]:
    timed = apply_calibration(machine, cal)
    ids = machine.node_ids
    cxl = [ids.index(n.id) for n in machine.nodes if n.memory_kind is MemoryKind.CXL]
    dram = [ids.index(n.id) for n in machine.nodes if n.memory_kind is MemoryKind.DRAM and n.has_memory]
    return np.asarray(latency_table_ns(timed)), np.asarray(bandwidth_table_gb_s(timed)), cxl, dram


def test_xeon_2s_cxl_from_the_catalog_alone() -> None:
    m = load_machine("xeon-2s-cxl")
    cal = catalog_calibration(m)
    lat, bw, cxl, dram = _cxl_cells(m, cal)
    found = match_cpu(m.cpu_model or "")
    assert found.sku is not None
    fig = catalog_figures(found.platform, found.sku)
    cat = load_cxl_catalog()
    dev = cat.default()
    (c,) = cxl
    # from the attach socket: local DRAM + what the measured devices add (the default device has no figure of its
    # own); from the other socket: the UPI hop more
    measured = measured_added_latency(cat)
    assert measured is not None and measured[0] > cat.latency.default_added_ns  # shipped devices: slower than design
    assert lat[0, c] == pytest.approx(fig.local_ns + measured[0])
    assert lat[1, c] == pytest.approx(lat[1, 0] + measured[0])
    for i in (0, 1):
        assert lat[i, c] > max(lat[i, j] for j in dram)  # slower than local and than remote-socket DRAM
        assert bw[i, c] <= cat.link(dev.lanes).payload_gb_s * (1 + 1e-9)
        assert bw[i, c] <= dev.dram_peak_gb_s
    whys = [p.why for p in cal.provenance.priors if "[2]" in p.parameter or "->2]" in p.parameter]
    assert whys and all("default micron-cz120 is assumed" in w for w in whys)
    # the DRAM nodes keep their socket's channels: the expander takes none of them
    assert cal.controller(0).read_bandwidth_gb_s == pytest.approx(fig.socket_peak_gb_s * fig.read_factor)


def test_a_named_device_is_not_called_a_default_and_its_measured_total_is_kept() -> None:
    m = load_machine("xeon-2s-cxl")
    cal = catalog_calibration(m, cxl_device="intel-ocp-e3s-96gb")
    lat, bw, (c,), _ = _cxl_cells(m, cal)
    # measured on intel-sapphire-rapids: 250 ns total and 17.8 GB/s all-read; on the same platform they come back
    assert lat[0, c] == pytest.approx(250.0) and bw[0, c] == pytest.approx(17.8)
    assert not any("default" in p.why for p in cal.provenance.priors)
    assert any("cxl0" in p.parameter for p in cal.provenance.priors)


def test_unknown_device_and_stray_node_mappings_are_errors() -> None:
    m = load_machine("xeon-2s-cxl")
    with pytest.raises(CalibrationError, match=r"cxl device 'nope' is not in the catalog; known: micron-cz120"):
        catalog_calibration(m, cxl_device="nope")
    with pytest.raises(CalibrationError, match=r"names nodes \[0\], which are not CXL"):
        catalog_calibration(m, cxl_device={0: "micron-cz120"})
    two_links = m.model_copy(update={"links": [*m.links, m.links[-1].model_copy(update={"a": 1})]})
    with pytest.raises(CalibrationError, match="node 2 of .* with 2 CXL links"):
        catalog_calibration(two_links)


# --- catalog_machine, CLI ----------------------------------------------------------------------------------


def test_catalog_machine_adds_expanders_timed_from_the_catalog() -> None:
    m = catalog_machine(glueless(2), "Xeon Platinum 8470", cxl_expanders=2, cxl_socket=1, cxl_size_bytes=2**36)
    cxl = [n for n in m.nodes if n.memory_kind is MemoryKind.CXL]
    assert [n.id for n in cxl] == [2, 3] and all(n.memory_bytes == 2**36 and n.socket == 1 for n in cxl)
    assert "micron-cz120 (the catalog's default device: none was named)" in m.description
    slit = m.slit()
    assert slit[1][2] < slit[0][2]  # the firmware row follows the catalog timing: nearer its own socket
    again = catalog_calibration(m)  # the file's nominal numbers are the catalog's: timing it again agrees
    lat_file = np.asarray(latency_table_ns(m))
    lat_cal = np.asarray(latency_table_ns(apply_calibration(m, again)))
    assert np.allclose(lat_file[:2], lat_cal[:2])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cpu": "Gold 6240", "cxl_expanders": 1}, "intel-cascade-lake-sp has no CXL support"),
        ({"cpu": "Xeon Platinum 8470", "cxl_expanders": 1, "cxl_socket": 5}, r"cxl_socket = 5: no node"),
        ({"cpu": "Xeon Platinum 8470", "cxl_expanders": -1}, "cxl_expanders = -1"),
    ],
)
def test_catalog_machine_cxl_errors_name_the_field(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(CalibrationError, match=message):
        catalog_machine(glueless(2), **kwargs)  # type: ignore[arg-type]


def test_catalog_show_lists_the_cxl_devices(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "show", "Xeon Platinum 8470"]) == 0
    out = capsys.readouterr().out
    assert "CXL memory:" in out and "versions = ['1.1']" in out
    for name in DEVICES:
        assert f"    {name}" in out
    assert main(["catalog", "show", "Gold 6240"]) == 0
    assert "not supported by this platform" in capsys.readouterr().out


def test_catalog_cxl_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "cxl"]) == 0
    out = capsys.readouterr().out
    assert "x16: 63.02 GB/s per direction after 128b/130b, 52.72 GB/s of line payload" in out
    assert "default device: micron-cz120" in out and "[intel-cachelib-ocp]" in out
    assert main(["catalog", "cxl", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {d["name"] for d in data["devices"]} == set(DEVICES)


def test_catalog_calibrate_and_topo_import_take_a_cxl_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cal.json"
    assert main(["catalog", "calibrate", "xeon-2s-cxl", "-o", str(out), "--cxl-device", "astera-leo"]) == 0
    text = capsys.readouterr().out
    assert "node 2 (CXL, behind node 0): 250.0 ns from node 0 (its DRAM 113.0 + 137.0 over the CXL link)" in text
    assert "link 52.7" in text
    assert load_calibration(out).provenance.method == "catalog"
    toml = tmp_path / "m.toml"
    assert main(["topo", "import", "seed-003-2node", "-o", str(toml), "--cxl", "1"]) == 2  # no processor named
    assert "--cpu" in capsys.readouterr().err
    assert main(["topo", "import", "skylake-8180-2s", "-o", str(toml), "--cpu", "Xeon Platinum 8470", "--cxl", "1",
                 "--cxl-device", "samsung-cmm-d"]) == 0
    assert "CXL memory nodes [2]" in capsys.readouterr().out
    assert load_machine(toml).nodes[2].memory_kind is MemoryKind.CXL


# --- the fit -------------------------------------------------------------------------------------------------


def _mlc_text(machine: Machine, truth: Calibration) -> str:
    """An mlc --latency_matrix --bandwidth_matrix run of ``machine`` under ``truth`` (closed form, no engine)."""
    timed = apply_calibration(machine, truth)
    lat, bw = latency_table_ns(timed), bandwidth_table_gb_s(timed)
    cols = [n.id for n in machine.nodes if n.has_memory]
    rows = [n.id for n in machine.nodes if n.has_cpus]

    def table(values: object, fmt: str) -> list[str]:
        out = ["\t\tNuma node", "Numa node" + "".join(f"\t{c:6d}" for c in cols) + "\t"]
        for r in rows:
            out.append(f"{r:8d}" + "".join(f"\t{values[r][c]:{fmt}}" for c in cols) + "\t")  # type: ignore[index]
        return out

    mb = [[x * 1000 for x in row] for row in bw]
    return "\n".join(["Intel(R) Memory Latency Checker - v3.11", "Measuring idle latencies (in ns)...",
                      *table(lat, "6.1f"), "", "Measuring Memory Bandwidths between nodes within system ",
                      "Bandwidths are in MB/sec (1 MB/sec = 1,000,000 Bytes/sec)",
                      "Using all the threads from each core if Hyper-threading is enabled",
                      "Using Read-only traffic type", *table(mb, "9.1f"), ""])


def test_calibrate_fits_the_cxl_node_and_says_what_the_tables_leave_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = load_machine("xeon-2s-cxl")
    truth = catalog_calibration(m, cxl_device="intel-ocp-e3s-96gb")  # 250 ns, 17.8 GB/s: not the priors' device
    run = tmp_path / "mlc.txt"
    run.write_text(_mlc_text(m, truth))
    out = tmp_path / "fit.json"
    assert main(["calibrate", str(run), "-m", "xeon-2s-cxl", "--priors", "catalog", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    fit = load_calibration(out)
    links = {(lt.src, lt.dst): lt for lt in fit.links}
    assert fit.controller(2).latency_ns + links[(0, 2)].latency_ns == pytest.approx(250.0, abs=0.2)
    assert fit.controller(2).read_bandwidth_gb_s == pytest.approx(17.8, rel=1e-3)
    # what an idle latency and a read bandwidth matrix cannot tell apart, or do not reach, is listed
    assert "links[0->2].latency_ns: moves the latency_matrix cells but trades off" in text
    assert "links[0->2].bandwidth_gb_s: not constrained" in text
    assert "controllers[2].write_bandwidth_gb_s: not constrained" in text


# --- a cpu-less node of an imported box --------------------------------------------------------------------

NUMACTL_9224 = Path(__file__).parents[1] / "data" / "topology" / "numactl-2s-epyc9224-nps2-cxl.txt"


def _numactl_text(threads_per_socket: int, to_memory_node: tuple[int, int]) -> str:
    """``numactl -H`` of two sockets of one node each and a cpu-less node 2 at the given distances from them."""
    t = threads_per_socket
    lines = ["available: 3 nodes (0-2)"]
    for n, cpus in enumerate([range(0, t), range(t, 2 * t), range(0)]):
        lines += [f"node {n} cpus: {' '.join(map(str, cpus))}", f"node {n} size: 65536 MB", f"node {n} free: 60000 MB"]
    a, b = to_memory_node
    lines += ["node distances:", "node   0   1   2", f"  0:  10  21  {a}", f"  1:  21  10  {b}", "  2:  255  255  10"]
    return "\n".join(lines) + "\n"


def test_a_cpu_less_node_of_an_imported_box_is_a_cxl_expander_behind_its_nearest_socket(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the 9224's own numactl -H (node 4: 126 GiB, no cpus, 50 from socket 0's nodes, 60 from socket 1's)
    out = tmp_path / "box.toml"
    assert main(["topo", "import", str(NUMACTL_9224), "--cpu", "AMD EPYC 9224", "-o", str(out)]) == 0
    assert "CXL memory nodes [4]" in capsys.readouterr().out
    m = load_machine(out)
    node = m.node(4)
    assert node.memory_kind is MemoryKind.CXL and node.socket == 0 and not node.cpus
    (link,) = [lk for lk in m.links if lk.kind.value == "cxl"]
    assert {link.a, link.b} == {"socket0-iod", 4}  # behind the I/O die, which holds the root port
    assert m.firmware_slit is not None and m.firmware_slit[4] == [255, 255, 255, 255, 10]  # the firmware's, kept
    assert "node 4 (distance 50 from node 0 (as from nodes [1]), 60 from the others); timed as micron-cz120 (the catalog's default: no device named)" in m.description
    lat = np.asarray(latency_table_ns(m))
    bw = np.asarray(bandwidth_table_gb_s(m))
    assert lat[0, 4] == pytest.approx(lat[1, 4])  # the socket's two NPS2 nodes reach it alike (mlc: 279.4, 278.8)
    assert lat[2, 4] > lat[2, 0] and lat[2, 4] > lat[0, 4]
    # no cpu reads it faster than what measured expanders read of their link
    share = 17.8 / load_cxl_catalog().link(8).payload_gb_s
    assert bw[:4, 4] == pytest.approx(load_cxl_catalog().link(8).payload_gb_s * share)
    # catalog calibrate says what a cpu sees of it: from the nearest node with cpus, the I/O die's hop included
    assert main(["catalog", "calibrate", str(out), "-o", str(tmp_path / "cal.json")]) == 0
    text = capsys.readouterr().out
    assert f"node 4 (CXL, behind socket0-iod): {lat[0, 4]:.1f} ns from node 0 (its DRAM " in text
    assert " to reach its link)" in text


def test_an_expander_s_read_bandwidth_without_a_figure_is_the_measured_share_of_its_link() -> None:
    cat = load_cxl_catalog()
    ocp = cat.device("intel-ocp-e3s-96gb")
    share = ocp.read_bandwidth_gb_s / cat.link(ocp.lanes).payload_gb_s  # type: ignore[operator]
    for dev in cat.devices:
        f = cxl_figures(dev, 110.0, "example host")
        if dev.read_bandwidth_gb_s is not None:
            assert f.controller_read_gb_s == pytest.approx(min(dev.read_bandwidth_gb_s, f.controller_read_gb_s))
            continue
        assert f.controller_read_gb_s == pytest.approx(min(cat.link(dev.lanes).payload_gb_s * share,
                                                           dev.dram_peak_gb_s))
        assert "intel-ocp-e3s-96gb: 17.8 GB/s" in f.read_source


def test_equidistant_cpu_less_node_goes_behind_the_lowest_node_and_says_so() -> None:
    from numasim.topology.io.numactl import machine_from_numactl

    m = machine_from_numactl(_numactl_text(104, (30, 30)), name="box")
    timed = catalog_machine(m, "Xeon Platinum 8470")
    (link,) = [lk for lk in timed.links if lk.kind.value == "cxl"]
    assert {link.a, link.b} == {0, 2} and timed.node(2).socket == 0
    assert "node 2 (distance 30 from node 0 (as from nodes [1]), as from every cpu node: no nearest" in timed.description


def test_a_cpu_less_node_on_a_platform_without_cxl_is_an_error_naming_it() -> None:
    from numasim.topology.io.numactl import machine_from_numactl

    m = machine_from_numactl(_numactl_text(36, (30, 40)), name="box")
    with pytest.raises(CalibrationError, match=r"node 2 of box has memory but no cpus, and the catalog's "
                                                r"intel-cascade-lake-sp has no CXL memory support"):
        catalog_machine(m, "Xeon Gold 6240")


@st.composite
def _boxes_with_memory_only_nodes(draw: st.DrawFn) -> tuple[str, str, int]:
    """``numactl -H`` of a CXL-capable box (Sapphire Rapids or Genoa, 1-2 sockets, 1-2 nodes a socket) with 1-2
    cpu-less nodes at random distances, their own rows 255 or symmetric; and the processor."""
    cpu, cores = draw(st.sampled_from([("Xeon Platinum 8470", 52), ("AMD EPYC 9654", 96)]))
    sockets = draw(st.integers(1, 2))
    per = draw(st.sampled_from([1, 2]))
    extra = draw(st.integers(1, 2))
    total = sockets * cores
    near, far = (11, 21) if "Xeon" in cpu else (12, 32)
    n_cpu = sockets * per
    nodes = []
    for s in range(sockets):
        for k in range(per):
            first = s * cores + k * (cores // per)
            run = range(first, first + cores // per)
            nodes.append([*run, *(c + total for c in run)])
    n = n_cpu + extra
    dist = [[10 if i == j else (near if i // per == j // per else far) for j in range(n_cpu)] for i in range(n_cpu)]
    to_mem = [[draw(st.integers(near + 1, 120)) for _ in range(n_cpu)] for _ in range(extra)]
    own_row_255 = draw(st.booleans())
    for i in range(n_cpu):
        dist[i] += [to_mem[e][i] for e in range(extra)]
    for e in range(extra):
        row = [255] * n_cpu if own_row_255 else list(to_mem[e])
        row += [10 if e == f else (255 if own_row_255 else 100) for f in range(extra)]
        dist.append(row)
    lines = [f"available: {n} nodes (0-{n - 1})"]
    for i in range(n):
        cpus = nodes[i] if i < n_cpu else []
        lines += [f"node {i} cpus: {' '.join(map(str, cpus))}", f"node {i} size: 65536 MB", f"node {i} free: 60000 MB"]
    lines += ["node distances:", "node " + " ".join(f"{i:3d}" for i in range(n))]
    lines += [f"  {i}: " + " ".join(f"{d:3d}" for d in row) for i, row in enumerate(dist)]
    return "\n".join(lines) + "\n", cpu, n_cpu


@settings(max_examples=25, deadline=None)
@given(_boxes_with_memory_only_nodes())
def test_every_memory_only_node_of_an_imported_box_hangs_behind_its_nearest_socket(
    box: tuple[str, str, int]
) -> None:
    from numasim.topology.io.numactl import machine_from_numactl

    text, cpu, n_cpu = box
    m = machine_from_numactl(text, name="box")
    timed = catalog_machine(m, cpu)
    slit = m.firmware_slit
    assert slit is not None and timed.firmware_slit == slit  # the firmware's distances kept as they are
    lat = np.asarray(latency_table_ns(timed))
    sku = match_cpu(cpu).sku
    assert sku is not None
    socket = socket_layout(timed, sku)[0]
    for n in timed.nodes[n_cpu:]:
        assert n.memory_kind is MemoryKind.CXL and not n.cpus
        (link,) = [lk for lk in timed.links if lk.kind.value == "cxl" and n.id in (lk.a, lk.b)]
        nearest = min(slit[c][n.id] for c in range(n_cpu))
        attach_socket = socket[min(c for c in range(n_cpu) if slit[c][n.id] == nearest)]
        assert n.socket in (None, attach_socket)
        # every cpu of its socket reaches it alike, and no other socket's sooner
        own = [lat[c, n.id] for c in range(n_cpu) if socket[c] == attach_socket]
        other = [lat[c, n.id] for c in range(n_cpu) if socket[c] != attach_socket]
        assert max(own) - min(own) < 1e-6 and all(x > max(own) for x in other)


def test_a_memory_only_node_between_the_sockets_keeps_them_joined() -> None:
    """Hypothesis found it: a cpu-less node at distance 13 from socket 0 and 29 from socket 1, the sockets 32
    apart. The importer joined the sockets through that node (13 + 29 - 10 = 32) and no link of their own, so
    hanging the expander off socket 0 left socket 1 alone (a disconnected machine). The path it carried is now a
    link between the sockets."""
    from numasim.topology.io.numactl import machine_from_numactl

    cpus0 = " ".join(map(str, [*range(96), *range(192, 288)]))
    cpus1 = " ".join(map(str, [*range(96, 192), *range(288, 384)]))
    text = (f"available: 3 nodes (0-2)\nnode 0 cpus: {cpus0}\nnode 0 size: 65536 MB\nnode 0 free: 60000 MB\n"
            f"node 1 cpus: {cpus1}\nnode 1 size: 65536 MB\nnode 1 free: 60000 MB\nnode 2 cpus: \n"
            "node 2 size: 65536 MB\nnode 2 free: 60000 MB\nnode distances:\nnode   0   1   2\n"
            "  0:  10  32  13\n  1:  32  10  29\n  2:  13  29  10\n")
    m = machine_from_numactl(text, name="box")
    assert not any({lk.a, lk.b} == {0, 1} for lk in m.links)  # the importer's reading of the distances
    timed = catalog_machine(m, "AMD EPYC 9654")
    lat = np.asarray(latency_table_ns(timed))
    assert timed.nodes[2].memory_kind is MemoryKind.CXL
    assert lat[0, 1] > lat[0, 0] and lat[1, 0] > lat[1, 1]
    assert lat[1, 2] > lat[0, 2]  # the expander is socket 0's


def test_an_expander_without_a_latency_adds_what_measured_devices_add(monkeypatch: pytest.MonkeyPatch) -> None:
    cat = load_cxl_catalog()
    ocp = cat.device("intel-ocp-e3s-96gb")
    # Intel's OCP device: 250 ns on Sapphire Rapids, whose local prior is 113 ns
    measured = measured_added_latency(cat)
    assert measured is not None and measured[0] == pytest.approx(250.0 - 113.0)
    for dev in cat.devices:
        f = cxl_figures(dev, 110.0, "example host")
        if dev is ocp:
            assert f.link_latency_ns == pytest.approx(137.0) and "250 ns measured on" in f.added_source
        else:
            assert f.link_latency_ns == pytest.approx(137.0)
            assert "intel-ocp-e3s-96gb: 250 ns" in f.added_source and "no public figure" in f.added_source
    # with no measured device in the catalog, the design midpoint (an estimate, said so) stands in
    bare = parse_cxl_toml(_GOOD)
    monkeypatch.setattr("numasim.timing.catalog.cxl_timing.load_cxl_catalog", lambda: bare)
    assert measured_added_latency(bare) is None
    f = cxl_figures(bare.device("d"), 110.0, "example host")
    assert f.link_latency_ns == 100.0 and "no device in the catalog has a measured one" in f.added_source
