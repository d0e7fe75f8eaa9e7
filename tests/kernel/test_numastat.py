"""The virtual numastat (kernel_spec.md 8.6, numactl/numastat.c): exact layouts."""

from __future__ import annotations

from numasim.kernel.procfs import VmaView, format_node_meminfo, format_numa_maps
from numasim.tools.numastat import NumastatProcess, NumastatSources, numastat_text, run_numastat

# Article 001 (stress -m 1 --vm-bytes 64G --vm-keep, PID 23652), reproduced from its own page counts.
ARTICLE_001 = """
Per-node process memory usage (in MBs) for PID 23652 (stress)
                           Node 0          Node 1           Total
                  --------------- --------------- ---------------
Huge                         0.00            0.00            0.00
Heap                         0.00            0.00            0.00
Stack                        0.00            0.01            0.01
Private                  44313.61        21222.64        65536.25
----------------  --------------- --------------- ---------------
Total                    44313.61        21222.66        65536.27
"""


def article_sources() -> NumastatSources:
    # pages: 44313.61 MB = 11344284 pages (44313.609 MB), 21222.64 MB = 5432996 pages; stack 3 pages on node 1
    vmas = [
        VmaView(0x00400000, "default", {0: 11344284, 1: 5432996}, anon=16777280, dirty=16777280),
        VmaView(0x7FFC00000000, "default", {1: 3}, stack=True, anon=3, dirty=3),
    ]
    maps = format_numa_maps(vmas)
    counters = numastat_text(
        {0: [("numa_hit", 100), ("numa_miss", 0)], 1: [("numa_hit", 50), ("numa_miss", 7)]}
    )
    return NumastatSources(counters, processes={23652: NumastatProcess(23652, "stress", maps, "stress -m 1")})


def test_process_table_matches_article_layout() -> None:
    out = run_numastat(["-p", "23652"], article_sources()).stdout
    got, want = out.splitlines(), ARTICLE_001.splitlines()
    assert got[:4] == want[:4]  # blank, title, header, dashes
    assert got[4:7] == want[4:7]  # Huge, Heap, Stack
    assert got[8] == want[8]  # the dash row: 16 dashes, a blank, then 15-dash cells
    assert got[7].startswith("Private                  44313.61        21222.6")
    assert len(got[7]) == len(want[7]) == 17 + 3 * 16


def test_compat_mode_has_no_total_and_integer_counts() -> None:
    out = run_numastat([], article_sources()).stdout
    assert out == (
        "                           node0           node1\n"
        "numa_hit                     100              50\n"
        "numa_miss                      0               7\n"
    )


def test_n_table_in_mb_with_total() -> None:
    out = run_numastat(["-n"], article_sources()).stdout
    assert out.splitlines() == [
        "",
        "Per-node numastat info (in MBs):",
        "                          Node 0          Node 1           Total",
        "                 --------------- --------------- ---------------",
        "Numa_Hit                    0.39            0.20            0.59",
        "Numa_Miss                   0.00            0.03            0.03",
    ]


def test_bare_pid_and_pattern_and_several_pids() -> None:
    src = article_sources()
    assert run_numastat(["23652"], src).stdout == run_numastat(["-p", "23652"], src).stdout
    assert run_numastat(["stress"], src).stdout == run_numastat(["-p", "23652"], src).stdout
    src.processes[7] = NumastatProcess(
        7, "memhog", format_numa_maps([VmaView(0x1000, "bind:1", {1: 256}, anon=256, dirty=256)])
    )
    out = run_numastat(["-p", "7", "23652"], src).stdout.splitlines()
    assert out[1] == "Per-node process memory usage (in MBs)"
    assert out[2].startswith("PID ")
    assert out[4].startswith("7 (memhog)                   0.00            1.00            1.00")
    assert out[5].startswith("23652 (stress)")
    assert out[-1].startswith("Total")
    assert run_numastat(["nosuch"], src).stdout.startswith('Found no processes containing pattern: "nosuch"')


def test_zero_rows_hidden_with_z_and_sorting() -> None:
    out = run_numastat(["-z", "-p", "23652"], article_sources()).stdout.splitlines()
    labels = [line.split()[0] for line in out[4:] if line]
    assert labels == ["Stack", "Private", "----------------", "Total"]
    out = run_numastat(["-s", "-p", "23652"], article_sources()).stdout.splitlines()
    assert out[4].startswith("Private")


def test_compressed_columns() -> None:
    out = run_numastat(["-c", "-n"], article_sources()).stdout.splitlines()
    assert out[2] == "           Node 0 Node 1 Total"
    assert out[3] == "           ------ ------ -----"
    assert out[4] == "Numa_Hit        0      0     1"


def test_width_folding_makes_sections() -> None:
    out = run_numastat(["-n"], article_sources(), numastat_width="40").stdout
    sections = out.split("\n\n")
    assert len(sections) == 3  # title block + Node 0, Node 1, Total (one column per 40-char screen)
    assert "                          Node 1\n" in out


def test_meminfo_table() -> None:
    src = article_sources()
    src.meminfo_files = {
        0: format_node_meminfo(0, [("MemTotal", 1048576), ("MemFree", 524288)], [("HugePages_Total", 0)]),
        1: format_node_meminfo(1, [("MemTotal", 2097152), ("MemFree", 1048576)], [("HugePages_Total", 0)]),
    }
    out = run_numastat(["-m"], src).stdout.splitlines()
    assert out[1] == "Per-node system memory usage (in MBs):"
    assert out[4] == "MemTotal                 1024.00         2048.00         3072.00"
    assert out[6] == "HugePages_Total             0.00            0.00            0.00"


def test_usage_errors() -> None:
    r = run_numastat(["-x"], article_sources())
    assert r.exit_code == 1 and "invalid option -- 'x'" in r.stderr and r.stderr.count("Usage:") == 1
