"""The processor's name is picked up from every source that carries it (the platform catalog's key)."""

from __future__ import annotations

from pathlib import Path

import pytest

from numasim.topology.builders import glueless
from numasim.topology.io import load_machine, save_machine, write_sysfs_node_tree
from numasim.topology.io.cpumodel import cpu_model_from_text, cpu_model_near

HWLOC = Path(__file__).resolve().parents[3] / "shared" / "data" / "hwloc"

LSCPU = """Architecture:                       x86_64
CPU(s):                             80
Model name:                         Intel(R) Xeon(R) Gold 6240 CPU @ 2.60GHz
Thread(s) per core:                 2
NUMA node0 CPU(s):                  0-17,36-53
"""


@pytest.mark.parametrize(
    ("xml", "model"),
    [
        ("dell-r740-2s-gold6230-snc2-optane2lm.xml", "Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz"),
        ("dell-r815-4s-opteron6272.xml", "AMD Opteron(TM) Processor 6272"),
        ("cisco-b200m4-2s-E5-2683v3-CoD.v1.xml", "Intel(R) Xeon(R) CPU E5-2683 v3 @ 2.00GHz"),
        ("tyan-s4881-8s-opteron865.from-sysfs.xml", "Dual Core AMD Opteron(tm) Processor 865"),
    ],
)
def test_hwloc_cpu_model(xml: str, model: str) -> None:
    if not (HWLOC / xml).is_file():
        pytest.skip("shared/data is not beside this checkout")
    assert load_machine(HWLOC / xml).cpu_model == model


def test_lscpu_and_cpuinfo() -> None:
    assert cpu_model_from_text(LSCPU) == "Intel(R) Xeon(R) Gold 6240 CPU @ 2.60GHz"
    cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9654 96-Core Processor\n"
    assert cpu_model_from_text(cpuinfo) == "AMD EPYC 9654 96-Core Processor"
    assert cpu_model_from_text("node 0 cpus: 0 1\n") is None


def test_sysfs_tree_finds_probe_lscpu(tmp_path: Path) -> None:
    # numasim probe's layout: DIR/lscpu.txt beside DIR/sys/devices/system/node
    tree = tmp_path / "sys" / "devices" / "system" / "node"
    write_sysfs_node_tree(glueless(2), tree)
    assert load_machine(tree).cpu_model is None
    (tmp_path / "lscpu.txt").write_text(LSCPU)
    assert cpu_model_near(tree) == "Intel(R) Xeon(R) Gold 6240 CPU @ 2.60GHz"
    assert load_machine(tree).cpu_model == "Intel(R) Xeon(R) Gold 6240 CPU @ 2.60GHz"


def test_cpu_model_survives_toml_and_hwloc_round_trip(tmp_path: Path) -> None:
    m = glueless(2).model_copy(update={"cpu_model": "Intel(R) Xeon(R) CPU E5-2680 v2 @ 2.80GHz"})
    save_machine(m, tmp_path / "m.toml")
    assert load_machine(tmp_path / "m.toml").cpu_model == m.cpu_model
    save_machine(m, tmp_path / "m.xml")
    assert load_machine(tmp_path / "m.xml").cpu_model == m.cpu_model
