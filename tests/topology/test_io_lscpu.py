"""``lscpu`` output as a machine: real outputs of three util-linux layouts (tests/data/topology/README.md says
where each comes from), the assumptions said in the description, bad input refused by its line's key."""

from __future__ import annotations

from pathlib import Path

import pytest

from numasim.errors import FormatError
from numasim.topology.io import detect_format, load_machine
from numasim.topology.io.lscpu import machine_from_lscpu, parse_lscpu_text
from numasim.topology.model import CacheScope
from numasim.units import KiB, MiB

DATA = Path(__file__).resolve().parents[1] / "data" / "topology"
NUMACTL_2S = """available: 2 nodes (0-1)
node 0 cpus: 0 1 2 3
node 0 size: 32768 MB
node 0 free: 30000 MB
node 1 cpus: 4 5 6 7
node 1 size: 32768 MB
node 1 free: 31000 MB
node distances:
node   0   1
  0:  10  21
  1:  21  10
"""


def _text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_the_grouped_layout_gives_each_instance_and_the_cpus_as_listed() -> None:
    """util-linux 2.38+ (Debian 12): caches as sums with their instance counts."""
    info = parse_lscpu_text(_text("lscpu-2s-platinum-8259CL.txt"))
    assert (info.model_name, info.sockets, info.cores_per_socket, info.threads_per_core) == (
        "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz", 2, 24, 2)
    assert {k: (c.size_bytes, c.instances) for k, c in info.caches.items()} == {
        "L1d": (32 * KiB, 48), "L2": (1 * MiB, 48), "L3": (35.75 * MiB, 2)}
    m = load_machine(DATA / "lscpu-2s-platinum-8259CL.txt")
    assert [n.cpus for n in m.nodes] == [[*range(0, 24), *range(48, 72)], [*range(24, 48), *range(72, 96)]]
    assert [n.socket for n in m.nodes] == [0, 1] and m.cpu_model == info.model_name
    assert [(c.name, c.scope) for c in m.caches] == [("L1d", CacheScope.CORE), ("L2", CacheScope.CORE),
                                                     ("L3", CacheScope.SOCKET)]
    assert "memory size not in lscpu: 64 GiB a node assumed" in m.description


def test_sums_without_their_count_are_divided_where_the_scope_is_known() -> None:
    """util-linux 2.34-2.36 (Ubuntu 20.04) on a 2x EPYC 7742 in NPS4: L1d and L2 per core; AMD's L3 is per core
    complex, which lscpu does not count: left out, and said so."""
    info = parse_lscpu_text(_text("lscpu-2s-epyc-7742-nps4.txt"))
    assert {k: c.size_bytes for k, c in info.caches.items()} == {"L1d": 32 * KiB, "L2": 512 * KiB}
    assert any("L3: '512 MiB'" in n and "left out" in n for n in info.notes)
    m = machine_from_lscpu(info)
    assert len(m.nodes) == 8 and [n.socket for n in m.nodes] == [0] * 4 + [1] * 4
    assert {n.die for n in m.nodes} == {0, 1, 2, 3}  # NPS4: four quadrants of the IO die per socket
    assert m.nodes[5].cpus == [*range(80, 96), *range(208, 224)]
    assert "NPS4" in m.description and "128 per-core instances assumed" in m.description


def test_interleaved_cpu_numbering_is_kept() -> None:
    """A 2x Xeon X5550 (Nehalem-EP) whose firmware numbers cpus alternately on the two sockets."""
    m = load_machine(DATA / "lscpu-2s-xeon-x5550.txt")
    assert m.nodes[0].cpus == list(range(0, 16, 2)) and m.nodes[1].cpus == list(range(1, 16, 2))
    assert m.cpu_model == "Intel(R) Xeon(R) CPU X5550 @ 2.67GHz"  # lscpu's padding spaces folded
    assert {c.name: c.size_bytes for c in m.caches} == {"L1d": 32 * KiB, "L2": 256 * KiB, "L3": 8 * MiB}


def test_topo_import_times_it_from_the_catalog_and_names_the_socket_link(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from numasim.cli import main

    out = tmp_path / "x5550.toml"
    assert main(["topo", "import", str(DATA / "lscpu-2s-xeon-x5550.txt"), "-o", str(out)]) == 0
    assert "timing from the platform catalog for 'Intel(R) Xeon(R) CPU X5550 @ 2.67GHz'" in capsys.readouterr().out
    m = load_machine(out)
    (link,) = m.links
    assert link.kind.value == "qpi"  # Nehalem's socket link, not the builder's UPI
    assert {c.name for c in m.caches} == {"L1d", "L2", "L3"}


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("    Socket(s):           2", "    Socket(s):           -"), r"'Socket\(s\)': expected a positive integer, got '-'"),
        (("  NUMA node1 CPU(s):     24-47,72-95", "  NUMA node1 CPU(s):     "),
         r"'NUMA node1 CPU\(s\)' is empty: a memory-only node"),
        (("  NUMA node1 CPU(s):     24-47,72-95", "  NUMA node1 CPU(s):     23-47,72-95"), "listed on two nodes"),
        (("  NUMA node1 CPU(s):     24-47,72-95", "  NUMA node1 CPU(s):     24-47,72-94"),
         r"the nodes list 95 cpus, but 'Socket\(s\)' 2 x 'Core\(s\) per socket' 24 x 'Thread\(s\) per core' 2 = 96"),
        (("  NUMA node1 CPU(s):     24-47,72-95", "  NUMA node1 CPU(s):     24-47,72-x"), r"'NUMA node1 CPU\(s\)'"),
        (("  NUMA node(s):          2", "  NUMA node(s):          3"), r"'NUMA node\(s\)' says 3"),
        (("  L3:                    71.5 MiB (2 instances)", "  L3:                    lots"),
         "L3 cache: cannot read the size 'lots'"),
    ],
)
def test_bad_lines_are_refused_by_their_key(edit: tuple[str, str], message: str) -> None:
    text = _text("lscpu-2s-platinum-8259CL.txt")
    assert edit[0] in text
    with pytest.raises(FormatError, match=message):
        parse_lscpu_text(text.replace(edit[0], edit[1]), "box.txt")


def test_a_numactl_text_takes_the_processor_from_lscpu_in_the_same_file_or_beside_it(tmp_path: Path) -> None:
    together = tmp_path / "together" / "box.txt"
    together.parent.mkdir()
    together.write_text(_text("lscpu-2s-xeon-x5550.txt").replace("0-15", "0-7") + "\n" + NUMACTL_2S)
    assert detect_format(together) == "numactl"  # the numactl part is the machine: sizes and distances
    m = load_machine(together)
    assert m.cpu_model == "Intel(R) Xeon(R) CPU X5550 @ 2.67GHz" and m.nodes[1].memory_bytes == 32768 * MiB
    beside = tmp_path / "beside"
    beside.mkdir()
    (beside / "numactl.txt").write_text(NUMACTL_2S)
    assert load_machine(beside / "numactl.txt").cpu_model is None
    (beside / "lscpu.txt").write_text(_text("lscpu-2s-epyc-7742-nps4.txt"))
    assert load_machine(beside / "numactl.txt").cpu_model == "AMD EPYC 7742 64-Core Processor"


def test_topo_import_of_lscpu_says_the_memory_it_assumed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from numasim.cli import main

    assert main(["topo", "import", str(DATA / "lscpu-2s-platinum-8259CL.txt"), "-o", str(tmp_path / "m.toml")]) == 0
    assert "warning: lscpu gives no memory sizes: 64 GiB a node assumed" in capsys.readouterr().err
