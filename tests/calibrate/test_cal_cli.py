"""``numasim calibrate``, ``numasim validate`` and ``numasim probe`` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from numasim.calibrate.parsers import detect_measurement_format, parse_measurement
from numasim.calibrate.probe import copy_node_tree, probe
from numasim.cli import main
from numasim.timing.model import load_calibration

DATA = Path(__file__).resolve().parents[1] / "data" / "measurements"
SKX = DATA / "mlc" / "fdio-csit-2s-skylake-plat8180.md"


def test_calibrate_writes_a_calibration_and_prints_the_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cal.json"
    assert main(["calibrate", "--machine", "skylake-8180-2s", str(SKX), "-o", str(out), "--created", "2026-11-22"]) == 0
    text = capsys.readouterr().out
    assert "controllers[0].latency_ns" in text and "+-" in text
    assert "worst cell:" in text and "firmware SLIT[0][1] = 21" in text
    cal = load_calibration(out)
    assert cal.machine == "skylake-8180-2s" and cal.provenance.sources[0].tool_version == "v3.5"


def test_calibrate_json_and_fit_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cal.json"
    rc = main(["calibrate", "-m", "skylake-8180-2s", str(SKX), "--fit-on", "latency", "-o", str(out), "--json"])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert data["fitted_on"] == ["latency_matrix"] and data["mape_pct"]["latency_matrix"] < 3.0
    assert {r["table"] for r in data["residuals"]} == {"latency_matrix"}


def test_calibrate_says_what_validate_will_say_of_a_fitted_loaded_latency_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fit matches latency to each row's measured bandwidth; validate replays mlc at each injection delay.
    Near the knee the two differ widely (E5-2680 v2, delay 50: 124 against 199 ns), so calibrate prints the
    replay too, the same numbers validate prints."""
    ivy = DATA / "mlc" / "kuleuven-thinking-2s-ivybridge-E5-2680v2.md"
    out = tmp_path / "cal.json"
    assert main(["calibrate", "-m", "seed-001-e5-2680v2", str(ivy), "-o", str(out), "--json"]) == 0
    replay = json.loads(capsys.readouterr().out)["loaded_latency_replay"]
    assert main(["validate", "-m", "seed-001-e5-2680v2", "-c", str(out), str(ivy), "--tables", "loaded_latency",
                 "--json"]) == 0
    validated = json.loads(capsys.readouterr().out)
    row = next(t for t in validated["tables"] if t["table"] == "loaded_latency")
    assert replay["mape_pct"] == row["mape_pct"] and replay["cells"] == 38
    assert main(["calibrate", "-m", "seed-001-e5-2680v2", str(ivy), "-o", str(out)]) == 0
    assert "replayed by the virtual mlc at each injection delay (what `numasim validate` compares" in capsys.readouterr().out


def test_bad_input_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "junk.txt"
    junk.write_text("hello\n")
    assert main(["calibrate", "-m", "skylake-8180-2s", str(junk), "-o", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err
    assert "unknown measurement format" in err and "Traceback" not in err
    assert not (tmp_path / "c.json").exists()
    assert main(["calibrate", "-m", "skylake-8180-2s", str(SKX), "--fit-on", "nope", "-o", str(tmp_path / "c.json")]) == 2
    assert "unknown table" in capsys.readouterr().err


def test_validate_with_report_dir_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cal = tmp_path / "cal.json"
    main(["calibrate", "-m", "skylake-8180-2s", str(SKX), "--fit-on", "latency,peak_bandwidth", "-o", str(cal)])
    capsys.readouterr()
    rep = tmp_path / "report"
    rc = main(
        ["validate", "-m", "skylake-8180-2s", "-c", str(cal), str(SKX), "--tables", "latency_matrix,bandwidth_matrix,loaded_latency",
         "-o", str(rep), "--plots"]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "latency_matrix" in text and "engine" in text and "MAPE" in text
    data = json.loads((rep / "report.json").read_text())
    by = {t["table"]: t for t in data["tables"]}
    assert by["latency_matrix"]["mape_pct"] < 3.0
    assert by["bandwidth_matrix"]["cells"] == 4 and by["loaded_latency"]["cells"] == 2 * 19  # latency and bandwidth per delay
    for name in ("latency_matrix.png", "bandwidth_matrix.png", "loaded_latency.png"):
        assert (rep / name).stat().st_size > 1000


def test_validate_without_calibration_says_how_to_make_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from numasim.topology.io import load_machine
    from numasim.topology.io.toml_format import save_machine_toml

    mfile = tmp_path / "box.toml"
    save_machine_toml(load_machine("skylake-8180-2s").model_copy(update={"calibration": None}), mfile)
    assert main(["validate", "-m", str(mfile), str(SKX)]) == 2
    assert "numasim calibrate --machine skylake-8180-2s" in capsys.readouterr().err


def test_probe_on_this_host_degrades_to_local_only(tmp_path: Path) -> None:
    res = probe(tmp_path / "p", working_set_bytes=4 << 20, repeats=1, steps=5000, use_numactl=False)
    n = len(res.nodes)
    assert res.placement == "local-only"
    assert res.latency_ns[0][0] is not None and res.latency_ns[0][0] > 0
    assert res.bandwidth_gb_s[0][0] is not None and res.bandwidth_gb_s[0][0] > 0
    assert all(res.latency_ns[i][j] is None for i in range(n) for j in range(n) if i != j)
    if n == 1:
        assert any("1 NUMA node" in note for note in res.notes)
    p = tmp_path / "p" / "probe.json"
    assert detect_measurement_format(p) == "probe"
    assert parse_measurement(p).nodes == res.nodes


def test_probe_cli_and_calibrate_from_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "probe"
    assert main(["probe", "-o", str(out), "--working-set", "2M", "--repeats", "1", "--steps", "2000"]) == 0
    assert "latency_ns from node" in capsys.readouterr().out
    assert main(["probe", "-o", str(out), "--working-set", "lots"]) == 2


def test_copy_node_tree_keeps_hmat_initiators(tmp_path: Path) -> None:
    src = tmp_path / "sys"
    init = src / "node1" / "access0" / "initiators"
    init.mkdir(parents=True)
    (init / "read_latency").write_text("240\n")
    (src / "node0").mkdir()
    (src / "node0" / "cpulist").write_text("0-3\n")
    (init / "node0").symlink_to(src / "node0")
    (src / "node0" / "cpu0").mkdir()
    dst = tmp_path / "copy"
    assert copy_node_tree(src, dst) == [0, 1]
    assert (dst / "node1" / "access0" / "initiators" / "node0").is_dir()
    assert (dst / "node1" / "access0" / "initiators" / "read_latency").read_text() == "240\n"
    assert (dst / "node0" / "cpulist").read_text() == "0-3\n"


def test_probe_multi_node_path_with_a_stand_in_numactl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A 2-node sysfs tree and a numactl that prints a hardware summary and otherwise runs the command unbound:
    # exercises the per-pair subprocess path this 1-node sandbox cannot reach for real.
    tree = tmp_path / "sys"
    for n in (0, 1):
        (tree / f"node{n}").mkdir(parents=True)
        (tree / f"node{n}" / "cpulist").write_text("0\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "numactl"
    fake.write_text('#!/bin/sh\nif [ "$1" = "--hardware" ]; then echo "available: 2 nodes (0-1)"; exit 0; fi\nshift 2\nexec "$@"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    res = probe(tmp_path / "p", working_set_bytes=2 << 20, repeats=1, steps=2000, sys_node=tree)
    assert res.placement == "numactl" and res.nodes == [0, 1]
    assert all(v is not None and v > 0 for row in res.latency_ns for v in row)
    assert (tmp_path / "p" / "numactl-hardware.txt").read_text().startswith("available: 2 nodes")


def test_calibrate_a_one_node_host_from_its_probe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from numasim.topology.io.toml_format import save_machine_toml
    from numasim.topology.model import Machine, MemoryController, Node

    host = Machine(
        name="host",
        nodes=[Node(id=0, cpus=[0], memory_bytes=1 << 30, controller=MemoryController(latency_ns=90.0, read_bandwidth_gb_s=20.0))],
    )
    mfile = tmp_path / "host.toml"
    save_machine_toml(host, mfile)
    res = probe(tmp_path / "p", working_set_bytes=2 << 20, repeats=1, steps=2000, use_numactl=False)
    cal_file = tmp_path / "host.cal.json"
    assert main(["calibrate", "-m", str(mfile), str(tmp_path / "p" / "probe.json"), "-o", str(cal_file)]) == 0
    assert "core-bound" in capsys.readouterr().out
    cal = load_calibration(cal_file)
    assert cal.controller(0).latency_ns == pytest.approx(res.latency_ns[0][0])


def test_calibrate_with_catalog_priors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--priors catalog`: what the latency and peak tables leave open keeps the catalog's value and source
    (issue 9: link bandwidth used to stay at the importer's 20 GB/s, silently)."""
    out = tmp_path / "cal.json"
    code = main(["calibrate", str(DATA / "mlc" / "kuleuven-thinking-2s-ivybridge-E5-2680v2.md"), "-m",
                 "seed-001-e5-2680v2", "--fit-on", "latency,peak_bandwidth", "--priors", "catalog", "-o", str(out)])
    text = capsys.readouterr().out
    assert code == 0
    line = next(ln for ln in text.splitlines() if "links[0->1].bandwidth_gb_s" in ln)
    assert "not constrained by the latency matrix and peak bandwidth tables" in line
    assert "intel-ivy-bridge-ep" in line
    cal = load_calibration(out)
    link = next(lt for lt in cal.links if lt.src == 0 and lt.dst == 1)
    assert link.bandwidth_gb_s == pytest.approx(2 * 16.0 * 0.793)  # 2 QPI links at 8 GT/s x the measured read share
    prior = next(p for p in cal.provenance.priors if p.parameter == "links[0->1].bandwidth_gb_s")
    assert "catalog" in prior.source


def test_a_machine_the_catalog_wrote_starts_its_fit_from_the_catalog(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 9's held-out procedure (import the box's numactl -H with its processor, calibrate on idle latency and
    peak, predict the rest) must not need `--priors catalog`: without it the fit of a catalog-written machine
    started from numasim's default core (10 misses in flight, a write one line, no clock), silently."""
    box = tmp_path / "box.toml"
    topo = Path(__file__).resolve().parents[1] / "data" / "topology" / "numactl-2s-epyc9224-nps2-cxl.txt"
    mlc = DATA / "public_mlc" / "cxl-2s-genoa-epyc9224-nps2.md"
    assert main(["topo", "import", str(topo), "--cpu", "AMD EPYC 9224", "-o", str(box)]) == 0
    capsys.readouterr()
    fits = {}
    for how in ([], ["--priors", "catalog"], ["--priors", "nominal"]):
        out = tmp_path / f"cal{len(fits)}.json"
        assert main(["calibrate", str(mlc), "-m", str(box), "--fit-on", "latency,peak_bandwidth", *how,
                     "-o", str(out)]) == 0
        err = capsys.readouterr().err
        assert ("priors: the platform catalog's for amd-epyc-genoa / EPYC 9224" in err) == (how == [])
        fits[tuple(how)] = load_calibration(out)
    default, catalog, nominal = fits.values()
    assert default.core == catalog.core and default.core.max_outstanding_misses == 24  # Zen 4's fill buffers
    assert default.controllers == catalog.controllers
    assert nominal.core.max_outstanding_misses == 10 and nominal.core.core_clock_ghz is None
