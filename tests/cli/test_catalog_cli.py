"""``numasim catalog``: list, show and calibrate through :func:`numasim.cli.main`, output and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from numasim.cli import main
from numasim.timing.catalog import load_catalog
from numasim.timing.model import load_calibration


def test_list_has_one_row_per_platform(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "vendor", "years", "SKUs", "channels", "DDR", "links"]
    assert [ln.split()[0] for ln in lines[1:]] == [p.name for p in load_catalog()]
    assert any(ln.split()[:2] == ["intel-skylake-sp", "intel"] and "DDR4-2666" in ln and "3x upi 10.4 GT/s" in ln
               for ln in lines)


def test_list_vendor_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "list", "--vendor", "amd", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["vendor"] for r in rows} == {"amd"}
    rome = next(r for r in rows if r["name"] == "amd-epyc-rome")
    assert (rome["channels_per_socket"], rome["ddr"], rome["links"]["per_socket"]) == (8, "DDR4-3200", 4)


def test_list_rejects_an_unknown_vendor(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "list", "--vendor", "arm"]) == 2
    assert "'arm': expected intel or amd" in capsys.readouterr().err


def test_show_marks_the_sku_and_lists_sources(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "show", "Intel(R) Xeon(R) Gold 6240 CPU @ 2.60GHz"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("intel-cascade-lake-sp: Xeon Scalable (2nd gen), Cascade Lake-SP")
    assert " *Xeon Gold 6240: cores = 18, threads = 36, base_ghz = 2.6" in out
    assert "[kerncraft] RRZE-HPC/kerncraft machine files" in out
    assert "read_factor = 0.889" in out and "no public measurement in this entry" in out


def test_show_derives_what_a_sibling_cluster_adds_where_two_modes_were_measured(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["catalog", "show", "amd-epyc-rome"]) == 0
    assert "derived: a sibling cluster's memory adds 12.0 ns on average, (NPS1 122 - NPS4 113 ns) x 4/3" in (
        capsys.readouterr().out
    )
    assert main(["catalog", "show", "intel-skylake-sp"]) == 0  # measured with one node a socket only
    assert "sibling cluster" not in capsys.readouterr().out
    # an entry without a measurement says whose figures a calibration borrows, and what follows from them
    assert main(["catalog", "show", "amd-epyc-genoa"]) == 0
    out = capsys.readouterr().out
    assert "borrows: local 113 ns (NPS4, NPS1 122 ns) from amd-epyc-rome" in out
    assert "derived: remote - local 94.2 ns from its cache-to-cache tiers" in out
    assert "borrows: remote" not in out
    assert main(["catalog", "show", "amd-epyc-turin"]) == 0  # no tiers of its own: Genoa's, said so
    assert "borrows: remote - local 94.2 ns derived from amd-epyc-genoa's cache-to-cache tiers" in (
        capsys.readouterr().out
    )
    assert "adds 12.0 ns on average (borrowed from amd-epyc-rome)" in out


def test_show_json_round_trips_the_entry(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "show", "intel-ivy-bridge-ep", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["name"] == "intel-ivy-bridge-ep" and data["latency"]["local_ns"] == 61.7
    assert data["matched"] == {"query": "intel-ivy-bridge-ep", "how": "name", "sku": None}
    assert {s["id"] for s in data["source"]} >= {"ark", "orm", "mlc-kuleuven"}


def test_show_unknown_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "show", "Intel Xeon Phi 7250"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("numasim: error: cpu 'Intel Xeon Phi 7250'") and err.count("\n") == 1


def test_calibrate_writes_a_catalog_calibration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sky.json"
    assert main(["catalog", "calibrate", "skylake-8180-2s", "-o", str(out)]) == 0
    assert "from intel-skylake-sp (priors only, no measurement)" in capsys.readouterr().out
    cal = load_calibration(out)
    assert cal.provenance.method == "catalog" and cal.machine == "skylake-8180-2s"
    # refuses to overwrite without --force, and leaves the file as it was
    before = out.read_text()
    assert main(["catalog", "calibrate", "skylake-8180-2s", "-o", str(out), "--sku", "Gold 6240"]) == 2
    assert out.read_text() == before
    assert main(["catalog", "calibrate", "skylake-8180-2s", "-o", str(out), "--sku", "Gold 6240", "--force"]) == 0
    assert load_calibration(out).provenance.platform == "intel-cascade-lake-sp"


def test_calibrate_takes_the_clock_the_box_runs_at(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "6240.json"
    assert main(["catalog", "calibrate", "skylake-8180-2s", "--sku", "Gold 6240", "--core-clock-ghz", "3.3",
                 "-o", str(out)]) == 0
    assert "core clock 3.3 GHz: given (3.3 GHz, --core-clock-ghz)" in capsys.readouterr().out
    assert load_calibration(out).core.core_clock_ghz == pytest.approx(3.3)
    # MHz by mistake: a one-line error, no file
    bad = tmp_path / "bad.json"
    assert main(["catalog", "calibrate", "skylake-8180-2s", "--core-clock-ghz", "3300", "-o", str(bad)]) == 2
    assert "did you mean 3.3 GHz" in capsys.readouterr().err and not bad.exists()


def test_calibrate_without_cpu_model_says_how(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "x.json"
    assert main(["catalog", "calibrate", "seed-003-2node", "-o", str(out)]) == 2
    assert "names no cpu_model" in capsys.readouterr().err
    assert not out.exists()


def test_a_single_socket_platform_shows_no_links_and_no_remote_figures(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "list", "--vendor", "intel"]) == 0
    row = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("intel-broadwell-de "))
    assert row.endswith("none (1 socket)")
    assert main(["catalog", "show", "Intel(R) Xeon(R) CPU E3-1230 v5 @ 3.40GHz"]) == 0
    out = capsys.readouterr().out
    assert "interconnect: none (a single-socket platform)" in out
    assert "sockets: remote - local" not in out  # (it listed differences borrowed for 2 and 4 sockets)
    assert main(["catalog", "list", "--json"]) == 0
    de = next(r for r in json.loads(capsys.readouterr().out) if r["name"] == "intel-broadwell-de")
    assert de["links"] is None


def test_show_says_whose_cache_to_cache_figures_a_calibration_borrows(capsys: pytest.CaptureFixture[str]) -> None:
    """It used to say transfers are timed as what serves them, on every entry without figures, where a catalog
    calibration borrows the nearest measured platform's."""
    assert main(["catalog", "show", "amd-epyc-turin"]) == 0
    out = capsys.readouterr().out
    assert "a catalog calibration borrows amd-epyc-genoa's" in out and "socket_hitm_ns = 103.4" in out
    assert main(["catalog", "show", "amd-opteron-k10"]) == 0  # HyperTransport: nobody measured
    assert "transfers are timed as the level or memory that serves them" in capsys.readouterr().out
    assert main(["catalog", "show", "amd-epyc-milan"]) == 0  # its own
    out = capsys.readouterr().out
    assert "local_hitm_ns = 22.7, socket_hitm_ns = 107.6" in out and "borrows amd-epyc" not in out
