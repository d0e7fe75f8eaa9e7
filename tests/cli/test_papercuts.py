"""Issue 13's papercuts, met trying the docs as a new user would: each one a regression test."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from numasim.cli import main
from numasim.topology.builders import glueless
from numasim.topology.io import load_machine, machine_source
from numasim.topology.io.toml_format import save_machine_toml


@pytest.fixture
def small(tmp_path: Path) -> str:
    path = tmp_path / "small.toml"
    save_machine_toml(glueless(2, cpus_per_node=2, memory_bytes=256 << 20), path)
    return str(path)


# -- a MACHINE argument: path or shipped name ------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [["kernel", "zonelists", "nosuch.toml"], ["topo", "import", "nosuch.txt", "-o", "out.toml"],
     ["topo", "show", "sub/nosuch"]],
)
def test_a_missing_file_is_reported_as_one(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"numasim: error: {argv[2]}: no such file\n"
    assert not (tmp_path / "out.toml").exists()


def test_a_folder_named_like_a_shipped_machine_does_not_shadow_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "seed-003-2node").mkdir()
    assert machine_source("seed-003-2node") is None
    assert main(["kernel", "zonelists", "seed-003-2node"]) == 0
    assert capsys.readouterr().out == "Fallback order for Node 0: 0 1 \nFallback order for Node 1: 1 0 \n"
    # ./NAME is the folder, on purpose
    assert machine_source("./seed-003-2node") == Path("seed-003-2node")


def test_a_bare_name_that_is_a_file_here_is_that_file(
    small: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("seed-003-2node").write_text(Path(small).read_text())  # a file wins over the shipped name
    assert machine_source("seed-003-2node") == Path("seed-003-2node")
    assert len(load_machine("seed-003-2node").cpus) == 4
    # a sysfs tree under a name no shipped machine has is still found as a bare name
    from numasim.topology.io import write_sysfs_node_tree

    write_sysfs_node_tree(load_machine(small), tmp_path / "mybox")
    assert machine_source("mybox") == Path("mybox")
    assert len(load_machine("mybox").nodes) == 2


# -- --help labels -------------------------------------------------------------------------------------------------


def _every_command() -> list[list[str]]:
    import typer

    from numasim.cli import _register, app

    _register()
    out: list[list[str]] = []

    def walk(command: object, path: list[str]) -> None:
        subs = getattr(command, "commands", {})
        if path and not subs:
            out.append(path)
        for name, sub in subs.items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return out


def test_every_help_names_values_like_a_real_tool(capsys: pytest.CaptureFixture[str]) -> None:
    commands = _every_command()
    assert ["run"] in commands and ["topo", "import"] in commands and len(commands) > 15
    for argv in commands:
        if argv in (["numactl"], ["numastat"]):
            continue  # their own plain-text help (help_text), tested with the kernel CLI
        assert main([*argv, "--help"]) == 0, argv
        text = capsys.readouterr().out
        for label in ("<str>", "<bool>", "<path>", "<int>", "<float>", "<list", "{"):
            assert label not in text, (argv, label)
    main(["run", "--help"])
    text = capsys.readouterr().out
    assert "--machine       -m                   MACHINE" in text
    assert "--seed                               N " in text
    assert "--workload      -w                   FILE " in text
    main(["topo", "import", "--help"])
    text = capsys.readouterr().out
    assert "Usage: numasim topo import [OPTIONS] FILE " in text
    # a flag shows no value label: the help text follows the name
    assert any(line.split("│")[1].split()[:2] == ["--force", "Replace"] for line in text.splitlines() if "--force" in line)


def test_option_metavar_rule() -> None:
    from numasim.cli.help_labels import option_metavar

    assert option_metavar("--kernel-version", "str") == "VERSION"
    assert option_metavar("--die-bandwidth-gb-s", "float") == "GB/S"
    assert option_metavar("--after", "str") == "CMD"
    assert option_metavar("--plots", "path") == "DIR"


# -- node and cpu lists out of range ------------------------------------------------------------------------------

_TRIAD = str(Path(__file__).resolve().parents[2] / "examples" / "workloads" / "stream-triad.toml")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--policy", "interleave:0-9"],
         "--policy = 'interleave:0-9': node 4-9 out of range (machine seed-000-4node has nodes 0-3)"),
        (["--policy", "bind:7"], "--policy = 'bind:7': node 7 out of range (machine seed-000-4node has nodes 0-3; no node left: the kernel answers EINVAL)"),
        (["--compare", "local", "--compare", "preferred:4"], "--policy = 'preferred:4': node 4 out of range"),
        (["--cpus", "99"], "--cpus = '99': applies to --trace only"),
    ],
)
def test_run_rejects_what_it_would_silently_ignore(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "-m", "seed-000-4node", "-w", _TRIAD, "--nominal", "--no-progress", *extra]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith(f"numasim: error: {message}")


def test_relative_nodes_are_not_range_checked() -> None:
    # MPOL_F_RELATIVE_NODES: node 5 of a 4-node allowed set folds onto node 1 (mpol_relative_nodemask)
    from numasim.kernel.kernel import Kernel
    from numasim.workload.placement import apply_task_policy

    kernel = Kernel(load_machine("seed-000-4node"))
    task = kernel.spawn("t", cpu=0)
    assert apply_task_policy(kernel, task, "interleave:5:relative") == "interleave:5:relative"


# -- numasim numactl: an error is the whole answer -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("program", "err"),
    [(["foo"], "numactl: execution of `foo': No such file or directory\n"),
     (["mlc", "--latency_matrx"], "Invalid Argument: --latency_matrx")],
)
def test_numactl_error_prints_no_numastat_table(
    small: str, program: list[str], err: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["numactl", "--machine", small, "--nominal", "-i", "0-1", "--", *program]) == 1
    captured = capsys.readouterr()
    assert "Per-node process memory usage" not in captured.out
    assert captured.out == ""
    assert err in captured.err
    # and a program that succeeds still gets its table
    assert main(["numactl", "--machine", small, "-i", "0-1", "--", "alloc", "--pages", "4"]) == 0
    assert "Per-node process memory usage (in MBs) for PID " in capsys.readouterr().out


# -- numactl -H text round trip ------------------------------------------------------------------------------------

from numasim.topology.library import list_shipped  # noqa: E402

_SHIPPED = [m.name for m in list_shipped()]


@pytest.mark.parametrize("style", ["2.0.18", "2.0.19"])
@pytest.mark.parametrize("name", _SHIPPED)
def test_numactl_hardware_text_round_trip_is_byte_identical(
    name: str, style: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["topo", "hardware", name, "--style", style]) == 0
    static = capsys.readouterr().out
    width = 3 if style == "2.0.18" else 4  # numactl.c print_distances: "% 3d " before 2.0.19, "% 4d " since
    assert f"\n{0: {width}d}: {10: {width}d} " in static
    first = tmp_path / "static.txt"
    first.write_text(static)
    assert main(["topo", "hardware", str(first)]) == 0
    assert capsys.readouterr().out == static
    # What a numactl -H run prints (its own pages are in use: free < size), read back every way
    assert main(["numactl", "--machine", str(first), "-H"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[-1] == static.splitlines()[-1]  # same layout; free may be 1 MB lower
    src = tmp_path / "hw.txt"
    src.write_text(text)
    assert main(["topo", "import", str(src), "-o", str(tmp_path / "hw.toml")]) == 0
    capsys.readouterr()
    for machine in (str(src), str(tmp_path / "hw.toml")):
        assert main(["topo", "hardware", machine]) == 0
        assert capsys.readouterr().out == text
        assert main(["numactl", "--machine", machine, "-H"]) == 0
        assert capsys.readouterr().out == text


# -- alloc: a raw nodemask, as a real program passes it -----------------------------------------------------------


def _alloc_json(machine: str, capsys: pytest.CaptureFixture[str], *policy: str) -> dict:  # type: ignore[type-arg]
    import json

    assert main(["numactl", "--machine", machine, "--json", "--", "alloc", "--pages", "64", *policy]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_alloc_raw_mask_drops_absent_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    # bits 0 and 23 on a 4-node machine: node 23 does not exist, the kernel keeps node 0 (nodes & mems_allowed)
    report = _alloc_json("seed-000-4node", capsys, "--set-mempolicy", "interleave:mask=0x800001")
    call = report["syscalls"][0]
    assert (call["call"], call["ret"], call["errno"]) == ("set_mempolicy", 0, None)
    assert report["pages_per_node"]["0"] >= 64 and report["pages_per_node"].get("1", 0) == 0
    # the node-list form refuses node 23 as numactl does
    assert main(["numactl", "--machine", "seed-000-4node", "--", "alloc", "--pages", "4",
                 "--set-mempolicy", "interleave:0,23"]) == 2
    assert "alloc: policy 'interleave:0,23': nodes '0,23'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("policy", "errno"),
    [("interleave:mask=0x800000", "EINVAL"),  # only an absent node: empty effective mask
     ("bind:mask=0", "EINVAL"),
     ("bind:mask=0x" + "1" + "0" * 300, "EINVAL"),  # bit 1200 >= MAX_NUMNODES (1024)
     ("bind:mask=0b1010", None), ("preferred:mask=12", None)],  # 12 = nodes 2 and 3
)
def test_alloc_raw_mask_errnos(policy: str, errno: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    for option in ("--set-mempolicy", "--mbind"):
        report = _alloc_json("seed-000-4node", capsys, option, policy)
        call = report["syscalls"][0]
        assert call["errno"] == errno, (option, call)
        assert call["call"] == option.lstrip("-").replace("-", "_")


def test_alloc_raw_mask_places_where_the_kernel_would(capsys: pytest.CaptureFixture[str]) -> None:
    report = _alloc_json("seed-000-4node", capsys, "--mbind", "bind:mask=0b1000")
    assert report["syscalls"][0]["ret"] == 0
    assert report["pages_per_node"]["3"] == 64  # the program image stays on node 0 (touched from cpu 0)
    assert [3, 64] in report["page_runs"]


def test_alloc_bad_raw_mask_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["numactl", "--machine", "seed-000-4node", "--", "alloc", "--pages", "4",
                 "--set-mempolicy", "bind:mask=0xzz"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("alloc: policy 'bind:mask=0xzz': mask '0xzz': expected a number such as 0x800001")
    assert "Traceback" not in err and "invalid literal" not in err


# -- --thp: a kernel booted with transparent hugepages off ---------------------------------------------------------


def _zones(text: str) -> list[dict[str, int | str]]:
    zones: list[dict[str, int | str]] = []
    for line in text.splitlines():
        if line.startswith("Node "):
            zones.append({"zone": line.split("zone")[1].strip()})
        elif zones and line.strip().split()[:1] in (["min"], ["low"], ["high"], ["managed"]):
            key, value = line.split()
            zones[-1][key] = int(value)
    return zones


def _expected_min_free_kbytes(zones: list[dict[str, int | str]], thp: bool) -> int:
    # mm/page_alloc.c calculate_min_free_kbytes: int_sqrt(lowmem_kbytes * 16) clamped to 128..262144 kB, where
    # lowmem is the managed pages of the zones up to Normal (their high marks are still 0 at boot)
    lowmem = [z for z in zones if z["zone"] != "Movable"]
    lowmem_pages = sum(int(z["managed"]) for z in lowmem)
    kbytes = min(max(math.isqrt(lowmem_pages * 4 * 16), 128), 262144)
    if thp:  # mm/khugepaged.c set_recommended_min_free_kbytes: 512 * populated zones * (2 + 3*3), <= 5 % lowmem
        populated = sum(1 for z in lowmem if int(z["managed"]) > 0)
        kbytes = max(kbytes, min(512 * populated * 11, lowmem_pages // 20) * 4)
    return kbytes


@pytest.mark.parametrize("name", ["seed-003-2node", "seed-000-4node", "opteron-865-8s"])
@pytest.mark.parametrize("thp", ["always", "madvise", "never"])
def test_watermarks_follow_the_formula_for_each_thp_setting(
    name: str, thp: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["kernel", "zoneinfo", name, "--thp", thp]) == 0
    zones = _zones(capsys.readouterr().out)
    lowmem_pages = sum(int(z["managed"]) for z in zones if z["zone"] != "Movable")
    pages_min = _expected_min_free_kbytes(zones, thp != "never") // 4
    for z in zones:
        if z["zone"] == "Movable":
            continue
        managed = int(z["managed"])
        expected_min = pages_min * managed // lowmem_pages  # __setup_per_zone_wmarks
        delta = max(expected_min >> 2, managed * 10 // 10000)
        assert (z["min"], z["low"], z["high"]) == (expected_min, expected_min + delta, expected_min + 2 * delta), z


def test_thp_never_boots_with_lower_min_watermarks(capsys: pytest.CaptureFixture[str]) -> None:
    mins = {}
    for thp in ("always", "never"):
        assert main(["kernel", "zoneinfo", "seed-003-2node", "--thp", thp]) == 0
        mins[thp] = sum(int(z.get("min", 0)) for z in _zones(capsys.readouterr().out) if z["zone"] != "Movable")
    assert mins["never"] < mins["always"]
    # and numactl / numastat boot the same way
    assert main(["numastat", "--machine", "seed-003-2node", "--thp", "never", "-m"]) == 0
    assert main(["numactl", "--machine", "seed-003-2node", "--thp", "sometimes", "-H"]) == 2
    assert capsys.readouterr().err.endswith("--thp 'sometimes': expected one of always, madvise, never\n")


# -- --json: the pages of each mapping ----------------------------------------------------------------------------


def test_json_lists_the_pages_of_each_mapping(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["numactl", "--machine", "seed-000-4node", "--json", "-m", "2", "--",
                 "alloc", "--pages", "10", "--mbind", "interleave:0-1"]) == 0
    report = json.loads(capsys.readouterr().out)
    mappings = report["mappings"]
    assert report["mappings_truncated"] is False
    # the buffer alloc mapped, found by the address it printed: interleaved over 0-1 by its mbind
    start = report["stdout"].split("mmap(10 pages) = ")[1].split()[0]
    buffer = [m for m in mappings if m["start"] == start]
    assert len(buffer) == 1 and buffer[0]["pages"] == 10 and buffer[0]["present"] == 10
    assert sorted(node for node, _ in buffer[0]["runs"]) == [0] * 5 + [1] * 5
    # the image (binary, libc, stack) follows the task policy -m 2
    image = [m for m in mappings if m["start"] != start and m["present"]]
    assert {m["name"] for m in image} >= {"stack", "file=/usr/bin/alloc"}
    assert all(node == 2 for m in image for node, _ in m["runs"])
    # the per-mapping runs are the process-wide page_runs, split at mapping boundaries
    merged: list[list[int]] = []
    for m in mappings:
        assert m["present"] == sum(c for _, c in m["runs"]) <= m["pages"]
        for node, count in m["runs"]:
            if merged and merged[-1][0] == node:
                merged[-1][1] += count
            else:
                merged.append([node, count])
    assert merged == report["page_runs"]
    assert sum(m["present"] for m in mappings) == sum(report["pages_per_node"].values())


def test_run_boots_its_kernel_with_the_thp_setting(capsys: pytest.CaptureFixture[str]) -> None:
    from numasim.kernel.config import KernelConfig
    from numasim.timing.model import nominal_calibration
    from numasim.workload.run import run_workload
    from numasim.workload.spec import load_workload

    machine = load_machine("seed-003-2node")
    spec = load_workload(_TRIAD)
    kbytes = {}
    for thp in (True, False):
        out = run_workload(machine, spec, nominal_calibration(machine), kernel_config=KernelConfig(thp_enabled=thp))
        kbytes[thp] = out.placement.kernel.pm.min_free_kbytes
    # khugepaged's floor (512 x 4 zones x 11 pages) vs int_sqrt(lowmem kB * 16), lowmem just under 64 GiB
    assert (kbytes[True], kbytes[False]) == (90112, 32764)
    assert main(["run", "-m", "seed-003-2node", "-w", _TRIAD, "--nominal", "--no-progress", "--thp", "often"]) == 2
    assert capsys.readouterr().err.endswith("--thp = 'often': expected always, madvise or never\n")
