"""Fuzz: machine files in every format (our TOML, numactl -H text, hwloc XML, a sysfs node tree, lscpu output and
lscpu beside a tree, a kerncraft machine file), mutated from valid ones, through ``topo show`` and ``topo import``."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from _fuzz import assert_clean, cli, fuzz_settings, mutated
from hypothesis import given
from hypothesis import strategies as st

from numasim.topology.builders import glueless
from numasim.topology.io import write_hwloc_xml, write_sysfs_node_tree
from numasim.topology.io.numactl import numactl_hardware_for
from numasim.topology.io.toml_format import dumps_machine

HWLOC_REAL = Path("/work/shared/data/hwloc/intel-knl-groveport-a2a-hybrid.xml")
TOPOLOGY_DATA = Path(__file__).resolve().parents[1] / "data" / "topology"
KERNCRAFT_REAL = Path("/work/shared/data/kerncraft/HaswellEP_E5-2695v3_CoD.yml")
_counter = itertools.count()


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-machines")


def _bases(work: Path) -> dict[str, tuple[str, str]]:
    machine = glueless(2, cpus_per_node=2, memory_bytes=256 << 20)
    bases = {
        "toml": (dumps_machine(machine), ".toml"),
        "numactl": (numactl_hardware_for(machine), ".txt"),
        "hwloc": (write_hwloc_xml(machine), ".xml"),
    }
    if HWLOC_REAL.is_file():
        bases["hwloc-real"] = (HWLOC_REAL.read_text(), ".xml")
    # lscpu's grouped and flat layouts (real outputs), and a kerncraft machine file's layout keys
    bases["lscpu-grouped"] = ((TOPOLOGY_DATA / "lscpu-2s-xeon-x5550.txt").read_text(), ".txt")
    bases["lscpu-flat"] = ((TOPOLOGY_DATA / "lscpu-2s-epyc-7742-nps4.txt").read_text(), ".txt")
    if KERNCRAFT_REAL.is_file():
        head = KERNCRAFT_REAL.read_text().split("in-core model:")[0]  # the layout, without the measurements
        bases["kerncraft"] = (head, ".yml")
    return bases


@pytest.mark.parametrize("fmt", ["toml", "numactl", "hwloc", "hwloc-real", "lscpu-grouped", "lscpu-flat", "kerncraft"])
def test_mutated_machine_files(work: Path, fmt: str) -> None:
    bases = _bases(work)
    if fmt not in bases:
        pytest.skip(f"{fmt}: the shared data folder is not here")  # not part of an installed tree
    text, suffix = bases[fmt]

    @fuzz_settings(25)
    @given(mutated(text))
    def check(bad: str) -> None:
        path = work / f"m{next(_counter)}{suffix}"
        path.write_text(bad)
        assert_clean(cli("topo", "show", str(path)), names=(path.name,))

    check()


def test_mutated_sysfs_trees(work: Path) -> None:
    machine = glueless(2, cpus_per_node=2, memory_bytes=256 << 20)
    base = work / "base-tree"
    write_sysfs_node_tree(machine, base)
    members = sorted(str(p.relative_to(base)) for p in base.rglob("*") if p.is_file())

    @fuzz_settings(40)
    @given(st.sampled_from(members), st.data())
    def check(member: str, data: st.DataObject) -> None:
        tree = work / f"tree{next(_counter)}"
        write_sysfs_node_tree(machine, tree)
        (tree / member).write_text(data.draw(mutated((base / member).read_text())))
        assert_clean(cli("topo", "show", str(tree)), names=(tree.name,))

    check()


def test_mutated_lscpu_beside_a_tree(work: Path) -> None:
    machine = glueless(2, cpus_per_node=2, memory_bytes=256 << 20)
    lscpu = (
        "Architecture:            x86_64\nCPU(s):                  4\nModel name:              "
        "Intel(R) Xeon(R) Gold 6240 CPU @ 2.60GHz\nSocket(s):               2\nNUMA node(s):            2\n"
    )

    @fuzz_settings(15)
    @given(mutated(lscpu))
    def check(bad: str) -> None:
        top = work / f"probe{next(_counter)}"
        write_sysfs_node_tree(machine, top / "node")
        (top / "lscpu.txt").write_text(bad)
        o = cli("topo", "import", str(top / "node"), "-o", str(top / "m.toml"))
        assert_clean(o, names=(top.name, "lscpu", "cpu"))
        assert (o.code == 0) == (top / "m.toml").is_file()  # no half-written output

    check()
