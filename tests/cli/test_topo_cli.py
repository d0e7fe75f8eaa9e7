"""``numasim topo``: every subcommand through :func:`numasim.cli.main`, output and exit codes, errors included."""

from __future__ import annotations

from pathlib import Path

import pytest

from numasim.cli import main
from numasim.topology.io.toml_format import load_machine_toml

REPO = Path(__file__).resolve().parents[2]
HWLOC = REPO / ".." / "shared" / "data" / "hwloc" / "tyan-s4881-8s-opteron865.from-sysfs.xml"

ARTICLE_000_HARDWARE = """\
available: 4 nodes (0-3)
node 0 cpus: 0 1 2 3 4 5 6 7 8 9 10 11 48 49 50 51 52 53 54 55 56 57 58 59
node 0 size: 128402 MB
node 0 free: 49043 MB
node 1 cpus: 12 13 14 15 16 17 18 19 20 21 22 23 60 61 62 63 64 65 66 67 68 69 70 71
node 1 size: 128965 MB
node 1 free: 849 MB
node 2 cpus: 24 25 26 27 28 29 30 31 32 33 34 35 72 73 74 75 76 77 78 79 80 81 82 83
node 2 size: 129017 MB
node 2 free: 25550 MB
node 3 cpus: 36 37 38 39 40 41 42 43 44 45 46 47 84 85 86 87 88 89 90 91 92 93 94 95
node 3 size: 129010 MB
node 3 free: 10116 MB
node distances:
"""

ARTICLE_001_HARDWARE = """\
available: 2 nodes (0-1)
node 0 cpus: 0 1 2 3 4 5 6 7 8 9 20 21 22 23 24 25 26 27 28 29
node 0 size: 64141 MB
node 0 free: 42625 MB
node 1 cpus: 10 11 12 13 14 15 16 17 18 19 30 31 32 33 34 35 36 37 38 39
node 1 size: 64509 MB
node 1 free: 43405 MB
node distances:
node   0   1\x20
  0:  10  20\x20
  1:  20  10\x20
"""  # numactl ends these lines with a space


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["topo", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_list_names_every_shipped_machine(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "list")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == len(list((REPO / "topologies").glob("*.toml")))
    line = next(x for x in lines if x.startswith("seed-001-e5-2680v2 "))
    assert "2 nodes" in line and "40 cpus" in line and "125.6 GiB" in line and "shared/seeds/001" in line


def test_show_prints_the_tree(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "show", "seed-000-4node")
    assert code == 0
    assert out.startswith("Machine seed-000-4node (503.3 GiB total, 4 nodes, 96 cpus)\n")
    assert "      NUMANode 1 (125.9 GiB, free 849.0 MiB, dram)  cpus 12-23,60-71\n" in out
    assert "Device mlx5_2 (nic" in out and "\nLinks " in out


def test_hardware_is_numactl_verbatim(capsys: pytest.CaptureFixture[str]) -> None:
    # article 001 was printed by a numactl older than 2.0.19 (three-wide distance columns)
    code, out, _ = _run(capsys, "hardware", "seed-001-e5-2680v2", "--style", "2.0.18")
    assert code == 0
    assert out.rstrip("\n") == ARTICLE_001_HARDWARE.rstrip("\n")
    code, out, _ = _run(capsys, "hardware", "seed-001-e5-2680v2")
    assert code == 0 and "node     0    1" in out
    code, out, _ = _run(capsys, "hardware", "seed-000-4node", "--style", "2.0.18")
    assert code == 0
    assert out.startswith(ARTICLE_000_HARDWARE)
    assert "  0:  10  11  20  20" in out


def test_hardware_rejects_an_unknown_style(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "hardware", "seed-000-4node", "--style", "3.0")
    assert code == 2
    assert "'3.0'" in err and "2.0.18" in err


def test_unknown_machine_exits_2_listing_names(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "show", "seed-000-4nod")
    assert code == 2 and out == ""
    assert "no shipped machine 'seed-000-4nod'" in err
    assert "seed-000-4node" in err and "skylake-8180-2s" in err


def test_import_numactl_text_then_refuse_to_overwrite(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = tmp_path / "numactl.txt"
    source.write_text(ARTICLE_001_HARDWARE)
    target = tmp_path / "m.toml"
    code, out, _ = _run(capsys, "import", str(source), "-o", str(target))
    assert code == 0 and "2 nodes, 40 cpus" in out
    m = load_machine_toml(target)
    assert m.nodes[0].free_bytes == (42625 << 20) + (1 << 19) and m.slit() == [[10, 20], [20, 10]]
    before = target.read_bytes()
    code, _, err = _run(capsys, "import", str(source), "-o", str(target))
    assert code == 2 and "--force" in err
    assert target.read_bytes() == before
    code, _, _ = _run(capsys, "import", str(source), "-o", str(target), "--force")
    assert code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.toml", "numactl.txt"]


@pytest.mark.skipif(not HWLOC.exists(), reason="shared data not beside the checkout")
def test_import_hwloc_xml(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "tyan.toml"
    code, _, _ = _run(capsys, "import", str(HWLOC), "-o", str(target))
    assert code == 0
    m = load_machine_toml(target)
    assert len(m.nodes) == 8 and len(m.cpus) == 16


def test_import_of_a_missing_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = _run(capsys, "import", str(tmp_path / "nope" / "x.txt"), "-o", str(tmp_path / "o.toml"))
    assert code == 2 and "nope" in err
    assert not (tmp_path / "o.toml").exists()


def test_draw_writes_png_and_svg(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    png, svg = tmp_path / "t.png", tmp_path / "t.svg"
    assert _run(capsys, "draw", "seed-002-opteron-4s", "-o", str(png))[0] == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert _run(capsys, "draw", "xeon-2s-cxl", "-o", str(svg))[0] == 0
    assert b"<svg" in svg.read_bytes()[:400]
    code, _, err = _run(capsys, "draw", "xeon-2s-cxl", "-o", str(tmp_path / "t.jpg"))
    assert code == 2 and ".png" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.png", "t.svg"]


def test_distances_firmware_timing_and_heatmap(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = _run(capsys, "distances", "seed-002-opteron-4s")
    assert code == 0
    assert "firmware SLIT" in out and "    0:  10  20  20  20" in out
    code, out, _ = _run(capsys, "distances", "seed-002-opteron-4s", "--timing")
    assert code == 0
    # the links know what the firmware hides: 0 -> 3 is two hops, farther than 0 -> 1
    row0 = next(x for x in out.splitlines() if x.strip().startswith("0:")).split()[1:]
    assert int(row0[3]) > int(row0[1]) > 10
    heat = tmp_path / "slit.png"
    code, _, _ = _run(capsys, "distances", "seed-000-4node", "-o", str(heat))
    assert code == 0 and heat.stat().st_size > 0
    code, out, err = _run(capsys, "distances", "seed-000-4node", "-o", str(heat))
    assert code == 2 and out == "" and "--force" in err


def test_latency_tables_match_mlc(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "latency", "seed-001-e5-2680v2")
    assert code == 0
    assert "idle latency (ns)" in out and "timing from calibration seed-001-e5-2680v2-" in out
    assert "    0:   61.7  115.1" in out and "    1:  114.6   61.2" in out
    assert "    0:  55.2  25.5" in out
    assert "hops" in out


def test_latency_marks_cpuless_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "latency", "xeon-2s-cxl")
    assert code == 0 and "node(s) 2 have no cpus" in out


def test_import_with_cpu_takes_catalog_timing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`topo import box.txt --cpu MODEL`: links, controllers and caches from the platform catalog (issue 9)."""
    source = tmp_path / "numactl.txt"
    source.write_text(ARTICLE_001_HARDWARE)
    plain, catalog = tmp_path / "plain.toml", tmp_path / "catalog.toml"
    assert _run(capsys, "import", str(source), "-o", str(plain))[0] == 0
    code, out, _ = _run(capsys, "import", str(source), "-o", str(catalog), "--cpu", "Intel Xeon E5-2680 v2")
    assert code == 0 and "platform catalog" in out
    p, c = load_machine_toml(plain), load_machine_toml(catalog)
    assert p.cpu_model is None and c.cpu_model == "Intel Xeon E5-2680 v2"
    # Ivy Bridge-EP: 4 x DDR3-1866 channels per socket -> 59.7 GB/s peak; the placeholder knows nothing of it
    bw = c.nodes[0].controller.read_bandwidth_gb_s
    assert bw != p.nodes[0].controller.read_bandwidth_gb_s and 40.0 < bw <= 4 * 1.866 * 8
    assert [x.name for x in c.caches][:2] == ["L1d", "L2"] and "catalog" in c.description
    code, _, err = _run(capsys, "import", str(source), "-o", str(tmp_path / "x.toml"), "--cpu", "Xeon Foo 9999")
    assert code == 2 and "not in the platform catalog" in err and not (tmp_path / "x.toml").exists()


@pytest.mark.skipif(not HWLOC.exists(), reason="shared data not beside the checkout")
def test_import_picks_the_cpu_from_hwloc(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    r740 = HWLOC.parent / "dell-r740-2s-gold6230-snc2-optane2lm.xml"
    code, out, err = _run(capsys, "import", str(r740), "-o", str(tmp_path / "r740.toml"))
    assert code == 0 and "Gold 6230" in out and "platform catalog" in out
    # its memory is Optane behind 96 GiB DRAM caches (Memory Mode), which numasim does not model: a warning, and the
    # machine file records them, so that `topo show` and `run` say so too
    assert "warning: nodes [0, 1, 2, 3] sit behind memory-side caches (node 0: 96.0 GiB" in err and "not time" in err
    assert load_machine_toml(tmp_path / "r740.toml").nodes[0].memory_side_cache_bytes == 96 * 2**30
    assert "nodes 0, 1, 2, 3: 96.0 GiB, direct-mapped" in load_machine_toml(tmp_path / "r740.toml").description
    code, out, _ = _run(capsys, "show", str(tmp_path / "r740.toml"))
    assert code == 0 and "NUMANode 0 (370.5 GiB, dram, behind a 96.0 GiB memory-side cache, not modelled)" in out
    m = load_machine_toml(tmp_path / "r740.toml")
    assert m.cpu_model == "Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz"
    # an Itanium box names a cpu the catalog does not hold: kept nominal, and said so
    code, out, _ = _run(capsys, "import", str(HWLOC.parent / "ia64-madison-8n.from-sysfs.xml"), "-o",
                        str(tmp_path / "ia64.toml"))
    assert code == 0 and "nominal placeholder timing" in out


def test_views_say_whether_timing_is_calibrated_or_nominal(capsys: pytest.CaptureFixture[str]) -> None:
    from numasim.timing.resolve import resolve_calibration
    from numasim.topology.io import load_machine

    cal = resolve_calibration(load_machine("seed-000-4node"))
    code, out, _ = _run(capsys, "show", "seed-000-4node")
    assert code == 0 and out.splitlines()[1] == (
        f"Timing: calibration {cal.id} (fit), {len(cal.provenance.priors)} parameter(s) not constrained by its measurements"
    )
    assert cal.provenance.priors  # the NIC-only calibration leaves the DRAM timing at its priors
    # the NIC's calibrated attach bandwidth, not the machine file's nominal one
    fitted = cal.devices[0].attach_bandwidth_gb_s
    assert fitted != load_machine("seed-000-4node").devices[0].attach_bandwidth_gb_s
    assert f"Device mlx5_2 (nic, 500 ns, {fitted:g} GB/s)" in out
    code, out, _ = _run(capsys, "show", "opteron-865-8s")
    assert out.splitlines()[1].startswith("Timing: the machine file's nominal numbers (it names no calibration")
    code, out, _ = _run(capsys, "distances", "seed-000-4node", "--timing")
    assert f"SLIT derived from link timing; calibration {cal.id} (fit), " in out.splitlines()[0]
    code, out, _ = _run(capsys, "distances", "opteron-865-8s", "--timing")
    assert "nominal numbers" in out.splitlines()[0]


def test_draw_titles_the_timing_source(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from numasim.topology.builders import glueless
    from numasim.topology.plots import draw_topology

    fig = draw_topology(glueless(2), timing_source="calibration x-123 (fit)")
    assert fig.axes[0].get_title().endswith("\ntiming: calibration x-123 (fit)")
    code, out, _ = _run(capsys, "draw", "opteron-865-8s", "-o", str(tmp_path / "o.svg"))
    assert code == 0 and "(timing: the machine file's nominal numbers" in out


def test_import_of_a_shipped_machine_keeps_its_numbers(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # skylake-8180-2s names its cpu, but its file's numbers are its own: converting it must not replace them
    code, out, _ = _run(capsys, "import", "skylake-8180-2s", "-o", str(tmp_path / "s.toml"))
    assert code == 0 and "timing numbers as in the file" in out
    from numasim.topology.io import load_machine

    assert load_machine(tmp_path / "s.toml").nodes[0].controller == load_machine("skylake-8180-2s").nodes[0].controller


def test_show_says_a_catalog_timed_file_holds_the_catalogs_priors(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # A machine imported with --cpu holds the catalog's numbers, not placeholders: the Timing line says whose
    from numasim.timing.catalog import catalog_machine
    from numasim.topology.builders import glueless
    from numasim.topology.io import save_machine

    path = tmp_path / "box.toml"
    save_machine(catalog_machine(glueless(2), "Xeon Gold 6240"), path)
    code, out, _ = _run(capsys, "show", str(path))
    assert code == 0
    assert ("Timing: the machine file's numbers, the platform catalog's priors for intel-cascade-lake-sp / Xeon Gold "
            "6240 (it names no calibration; nothing of this box measured)") in out
    save_machine(glueless(2), path)
    assert "Timing: the machine file's nominal numbers" in _run(capsys, "show", str(path))[1]


def test_converting_our_toml_to_numactl_text_says_the_timing_stays_behind(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """numactl's text holds no timing: converting a machine file to it used to say 'timing numbers as in the
    file', and re-importing the text gave placeholder numbers."""
    assert main(["topo", "import", "seed-001-e5-2680v2", "-o", str(tmp_path / "m.txt")]) == 0
    assert "numactl text holds no timing" in capsys.readouterr().out
    assert main(["topo", "import", "seed-001-e5-2680v2", "-o", str(tmp_path / "m.toml")]) == 0
    assert "timing numbers as in the file" in capsys.readouterr().out


def test_a_processor_smaller_than_a_node_is_warned_of(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`--cpu "Opteron 8218"` (2 cores a socket) on nodes of 12 cpus was accepted without a word."""
    from numasim.topology.builders import glueless
    from numasim.topology.io.numactl import numactl_hardware_for

    text = tmp_path / "box.txt"
    text.write_text(numactl_hardware_for(glueless(2, cpus_per_node=12)))
    assert main(["topo", "import", str(text), "--cpu", "Opteron 8218", "-o", str(tmp_path / "o.toml")]) == 0
    err = capsys.readouterr().err
    assert "node 0 has 12 cpus, more than a socket of Opteron 8218 has threads (2): is the processor right?" in err
    assert main(["topo", "import", str(text), "--cpu", "Xeon E5-2680 v2", "-o", str(tmp_path / "x.toml")]) == 0
    assert "is the processor right?" not in capsys.readouterr().err
