"""numactl --hardware text: the source articles' output parses and re-prints exactly; errors name the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from numasim.errors import FormatError
from numasim.topology.builders import glueless
from numasim.topology.distances import timing_distances
from numasim.topology.io.numactl import (
    NumactlHardware,
    NumactlNode,
    format_numactl_hardware,
    machine_from_numactl,
    numactl_hardware_for,
    parse_numactl_hardware,
)
from numasim.topology.model import Machine, Node
from numasim.units import MiB

DATA = Path(__file__).resolve().parents[1] / "data" / "topology"


def _text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_seed_000_mangled_table_and_chinese_comments_parse() -> None:
    hw = parse_numactl_hardware(_text("numactl-seed-000.txt"), "seed-000")
    assert hw.node_ids == [0, 1, 2, 3]
    assert hw.distances == [[10, 11, 20, 20], [11, 10, 20, 20], [20, 20, 10, 11], [20, 20, 11, 10]]
    assert hw.style is None  # whitespace was lost: the printing style cannot be told
    assert [(n.size_mb, n.free_mb) for n in hw.nodes] == [
        (128402, 49043),
        (128965, 849),
        (129017, 25550),
        (129010, 10116),
    ]
    assert hw.nodes[0].cpus == [*range(0, 12), *range(48, 60)]
    # The article lost the table's newlines; the canonical file is what numactl 2.0.18 prints for this machine.
    assert format_numactl_hardware(hw, "2.0.18") == _text("numactl-seed-000.canonical.txt")


def test_seed_001_round_trips_byte_for_byte() -> None:
    text = _text("numactl-seed-001.txt")
    hw = parse_numactl_hardware(text)
    assert hw.style == "2.0.18"
    verbatim = "".join(text.splitlines(keepends=True)[1:])  # without the shell prompt line
    assert format_numactl_hardware(hw) == verbatim
    assert hw.nodes[0].free_mb == 42625 and hw.distances == [[10, 20], [20, 10]]


def test_seed_003_round_trips_up_to_the_trailing_spaces_the_blog_stripped() -> None:
    text = _text("numactl-seed-003.txt")
    hw = parse_numactl_hardware(text)
    assert hw.style == "2.0.18"
    printed = format_numactl_hardware(hw).splitlines()
    assert [line.rstrip() for line in printed] == text.splitlines()
    assert printed[-1] == "  1:  21  10 "


@pytest.mark.parametrize("name", ["numactl-seed-000.txt", "numactl-seed-001.txt", "numactl-seed-003.txt"])
@pytest.mark.parametrize("style", ["2.0.18", "2.0.19"])
def test_printed_text_parses_back_to_the_same_hardware(name: str, style: str) -> None:
    hw = parse_numactl_hardware(_text(name))
    again = parse_numactl_hardware(format_numactl_hardware(hw, style))  # type: ignore[arg-type]
    assert again.style == style
    assert (again.nodes, again.distances) == (hw.nodes, hw.distances)


def test_2_0_19_style_layout() -> None:
    hw = NumactlHardware(
        nodes=[NumactlNode(0, [0], 10, 5), NumactlNode(1, [1], 10, 5)], distances=[[10, 255], [255, 10]]
    )
    lines = format_numactl_hardware(hw, "2.0.19").splitlines()
    assert lines[-3:] == ["node     0    1 ", "   0:   10  255 ", "   1:  255   10 "]
    assert format_numactl_hardware(hw, "2.0.18").splitlines()[-2] == "  0:  10  255 "


def test_memoryless_cpuless_sparse_nodes_and_missing_distances() -> None:
    hw = NumactlHardware(
        nodes=[
            NumactlNode(0, [0, 1], 1024, 512),
            NumactlNode(2, [], 2048, 2048),
            NumactlNode(3, [2], 0, 0),
            NumactlNode(4, [3], None, None),
        ],
        distances=None,
    )
    text = format_numactl_hardware(hw)
    assert text.splitlines()[0] == "available: 4 nodes (0,2-4)"
    assert "node 2 cpus:\n" in text
    assert "node 4 size: <not available>\nnode 4 free: <not available>\n" in text
    assert text.endswith("No distance information available.\n")
    again = parse_numactl_hardware(text)
    assert again.nodes == hw.nodes and again.distances is None


def test_machine_from_seed_000_has_exact_sizes_and_slit() -> None:
    m = machine_from_numactl(_text("numactl-seed-000.txt"), "seed-000", "seeds/000")
    assert m.nodes[1].memory_bytes == 128965 * MiB and m.nodes[1].free_bytes == 849 * MiB + MiB // 2
    table = [[10, 11, 20, 20], [11, 10, 20, 20], [20, 20, 10, 11], [20, 20, 11, 10]]
    assert m.firmware_slit == table and timing_distances(m) == table
    assert len(m.cpus) == 96
    assert parse_numactl_hardware(numactl_hardware_for(m, "2.0.18")).distances == table


def test_machine_from_numactl_round_trips_through_numactl_hardware_for() -> None:
    text = _text("numactl-seed-001.txt")
    m = machine_from_numactl(text, "seed-001")
    assert numactl_hardware_for(m, "2.0.18") == "".join(text.splitlines(keepends=True)[1:])


def test_cpuless_node_becomes_memory_only_and_empty_node_is_dropped() -> None:
    text = """available: 3 nodes (0-2)
node 0 cpus: 0 1
node 0 size: 1024 MB
node 0 free: 1000 MB
node 1 cpus:
node 1 size: 4096 MB
node 1 free: 4096 MB
node 2 cpus:
node 2 size: 0 MB
node 2 free: 0 MB
node distances:
node   0   1   2
  0:  10  20  30
  1:  20  10  30
  2:  30  30  10
"""
    m = machine_from_numactl(text, "cxl")
    assert m.node_ids == [0, 1]
    assert m.nodes[1].cpus == [] and m.nodes[1].memory_bytes == 4096 * MiB
    assert m.firmware_slit == [[10, 20], [20, 10]]
    assert "node 2 has neither cpus nor memory: dropped" in m.description


def test_numactl_hardware_for_uses_free_or_total() -> None:
    m = Machine(
        name="x",
        nodes=[
            Node(id=0, cpus=[0], memory_bytes=3 * MiB + 5, free_bytes=MiB),
            Node(id=1, cpus=[1], memory_bytes=2 * MiB),
        ],
        links=glueless(2).links,
        firmware_slit=[[10, 21], [21, 10]],
    )
    lines = numactl_hardware_for(m).splitlines()
    assert lines[2:4] == ["node 0 size: 3 MB", "node 0 free: 1 MB"]
    assert lines[6] == "node 1 free: 2 MB"


@pytest.mark.parametrize(
    "text,line,match",
    [
        ("hello\n", 1, "available"),
        ("available: 2 nodes (0-2)\n", 1, "has 3"),
        (
            "available: 1 nodes (0)\nnode 0 cpus: 0 x\nnode 0 size: 1 MB\nnode 0 free: 1 MB\n",
            2,
            "cpu numbers",
        ),
        ("available: 1 nodes (0)\nnode 0 cpus: 0\nnode 0 size: 1 GB\nnode 0 free: 1 MB\n", 3, "MB"),
        (
            "available: 1 nodes (0)\nnode 0 cpus: 0\nnode 0 size: 1 MB\nnode 0 free: 1 MB\nnode distances:\n"
            "node   0\n  0:  10  20\n",
            7,
            "1 distances|has 2",
        ),
        (
            "available: 1 nodes (0)\nnode 0 cpus: 0\nnode 0 size: 1 MB\nnode 0 free: 1 MB\nnode distances:\n"
            "node   0\n  0:  10\ngarbage\n",
            8,
            "after the distance table",
        ),
        ("available: 1 nodes (0)\nnode 1 cpus: 0\n", 2, "not in the available list"),
        (
            "available: 1 nodes (0)\nnode 0 cpus: 0\nnode 0 size: 1 MB\nnode 0 free: 1 MB\nwhat\n",
            5,
            "node distances",
        ),
    ],
)
def test_garbage_is_a_format_error_with_the_line(text: str, line: int, match: str) -> None:
    with pytest.raises(FormatError, match=match) as info:
        parse_numactl_hardware(text, "f.txt")
    assert info.value.line == line
    assert str(info.value).startswith(f"f.txt:{line}:")


def test_missing_node_line_is_reported() -> None:
    with pytest.raises(FormatError, match="missing 'node 0 size:'") as info:
        parse_numactl_hardware(
            "available: 1 nodes (0)\nnode 0 cpus: 0\nnode 0 free: 1 MB\nNo distance information available.\n"
        )
    assert info.value.line == 3  # the node's last line, not the table's


def test_free_lines_left_out_leave_free_memory_unknown() -> None:
    hw = parse_numactl_hardware(
        "available: 1 nodes (0)\nnode 0 cpus: 0\nnode 0 size: 1 MB\nNo distance information available.\n"
    )
    assert hw.nodes[0].size_mb == 1 and hw.nodes[0].free_mb is None


HAND_WRITTEN = """> available: 2 nodes (0-1)
> node 0 cpus: 0-3,8-11
> node 0 size: 1024 MB node 0 free: 900 MB
> node 1 cpus: 4 5 6
> 7 12 13 14 15
> node 1 size: 1024 MB
> node 1 free: 1000 MB
> node distances:
> node   0   1
>   0:  10  21
>   1:  21  10
"""


def test_what_pages_and_hand_written_copies_do_to_it_is_read() -> None:
    # a quote before every line, cpu ranges, two fields on one line, a cpu list wrapped onto a line of its own
    hw = parse_numactl_hardware(HAND_WRITTEN)
    assert hw.nodes[0].cpus == [0, 1, 2, 3, 8, 9, 10, 11] and hw.nodes[0].free_mb == 900
    assert hw.nodes[1].cpus == [4, 5, 6, 7, 12, 13, 14, 15] and hw.distances == [[10, 21], [21, 10]]
    with pytest.raises(FormatError, match="node 0 cpus: not a list of cpu numbers"):
        parse_numactl_hardware(HAND_WRITTEN.replace("0-3,8-11", "0-3,x"))


def test_rows_glued_onto_one_line_under_an_intact_header() -> None:
    text = (
        "available: 2 nodes (0-1)\nnode 0 cpus: 0\nnode 0 size: 1 MB\nnode 0 free: 1 MB\n"
        "node 1 cpus: 1\nnode 1 size: 1 MB\nnode 1 free: 1 MB\nnode distances:\nnode   0   1\n  0:  10  21   1:  21  10\n"
    )
    hw = parse_numactl_hardware(text)
    assert hw.distances == [[10, 21], [21, 10]] and hw.style is None


def test_more_free_than_size_is_an_error_naming_the_node() -> None:
    """Free memory above the node's size was clamped to the size without a word."""
    text = ("available: 1 nodes (0)\nnode 0 cpus: 0 1\nnode 0 size: 32756 MB\nnode 0 free: 99642 MB\n"
            "node distances:\nnode   0\n  0:  10\n")
    with pytest.raises(FormatError, match="node 0 free: 99642 MB is more than its size: 32756 MB"):
        machine_from_numactl(text, "x", "box.txt")
    assert machine_from_numactl(text.replace("99642", "32756"), "x").nodes[0].free_bytes == 32756 * 2**20


def test_a_quoted_hand_written_copy_is_detected_and_imported(tmp_path: Path) -> None:
    from numasim.topology.io import load_machine

    path = tmp_path / "box.txt"
    path.write_text("$ lscpu | head -1\nArchitecture: x86_64\n" + HAND_WRITTEN)
    m = load_machine(path)
    assert m.node_ids == [0, 1] and m.node(1).cpus == [4, 5, 6, 7, 12, 13, 14, 15]
