"""Exact /proc and /sys layouts (kernel_spec.md section 9)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from numasim.kernel.procfs import (
    PagesetView,
    VmaView,
    ZoneView,
    bitmap_string,
    buddy_orders_from_free,
    format_buddyinfo,
    format_node_meminfo,
    format_node_numastat,
    format_numa_map_line,
    format_status_mems_allowed,
    format_zoneinfo,
    zone_views,
)


def test_buddyinfo_line_layout_from_spec() -> None:
    z = ZoneView(0, "Normal", 4096, 4096, 4096, free_area=[120, 64, 32, 16, 8, 4, 2, 1, 0, 1, 200])
    assert format_buddyinfo([z]) == (
        "Node 0, zone   Normal    120     64     32     16      8      4      2      1      0      1    200 \n"
    )


def test_buddyinfo_skips_unpopulated_zones() -> None:
    zones = [
        ZoneView(0, "DMA", 4095, 3998, 3976, free=3976),
        ZoneView(0, "Movable", 0, 0, 0),
        ZoneView(1, "Normal", 10, 10, 10, free=3),
    ]
    lines = format_buddyinfo(zones).splitlines()
    assert [line[:20] for line in lines] == ["Node 0, zone      DM", "Node 1, zone   Norma"]


@given(st.integers(0, 10**9))
def test_buddy_split_adds_up(free: int) -> None:
    counts = buddy_orders_from_free(free)
    assert sum(c << order for order, c in enumerate(counts)) == free


def test_zoneinfo_populated_and_unpopulated() -> None:
    normal = ZoneView(
        0,
        "Normal",
        spanned=100,
        present=90,
        managed=80,
        free=50,
        min=5,
        low=6,
        high=7,
        promo=8,
        protection=[0, 0, 0, 0, 0],
        zone_stats=[("nr_free_pages", 50)],
        numa_events=[1, 2, 3, 4, 5, 6],
        node_stats=[("nr_inactive_anon", 12)],
        pagesets=[PagesetView(0, 3, 42, 63, 24)],
        start_pfn=1048576,
    )
    movable = ZoneView(0, "Movable", 0, 0, 0, protection=[0, 0, 0, 0, 0])
    text = format_zoneinfo([normal, movable])
    assert text == (
        "Node 0, zone   Normal"
        "\n  per-node stats"
        "\n      nr_inactive_anon 12"
        "\n  pages free     50"
        "\n        boost    0"
        "\n        min      5"
        "\n        low      6"
        "\n        high     7"
        "\n        promo    8"
        "\n        spanned  100"
        "\n        present  90"
        "\n        managed  80"
        "\n        cma      0"
        "\n        protection: (0, 0, 0, 0, 0)"
        "\n      nr_free_pages 50"
        "\n      numa_hit     1"
        "\n      numa_miss    2"
        "\n      numa_foreign 3"
        "\n      numa_interleave 4"
        "\n      numa_local   5"
        "\n      numa_other   6"
        "\n  pagesets"
        "\n    cpu: 0"
        "\n              count: 3"
        "\n              high:  42"
        "\n              batch: 63"
        "\n  vm stats threshold: 24"
        "\n  node_unreclaimable:  0"
        "\n  start_pfn:           1048576"
        "\n"
        "Node 0, zone  Movable"
        "\n  pages free     0"
        "\n        boost    0"
        "\n        min      0"
        "\n        low      0"
        "\n        high     0"
        "\n        spanned  0"
        "\n        present  0"
        "\n        managed  0"
        "\n        cma      0"
        "\n        protection: (0, 0, 0, 0, 0)"
        "\n"
    )


def test_numa_maps_fields() -> None:
    anon = VmaView(0x7F1234000000, "interleave:0-1", {0: 2, 1: 2}, anon=4, dirty=4)
    assert (
        format_numa_map_line(anon)
        == "7f1234000000 interleave:0-1 anon=4 dirty=4 N0=2 N1=2 kernelpagesize_kB=4\n"
    )
    file_ = VmaView(0x400000, "default", {0: 10}, file="/usr/bin/stress", mapmax=3, active=4)
    assert format_numa_map_line(file_) == (
        "00400000 default file=/usr/bin/stress mapped=10 mapmax=3 active=4 N0=10 kernelpagesize_kB=4\n"
    )
    empty = VmaView(0x7FFF0000, "bind=static:1", stack=True)
    assert format_numa_map_line(empty) == "7fff0000 bind=static:1 stack\n"
    huge = VmaView(
        0x7F0000000000, "default", {1: 5}, huge=True, anon=5, dirty=5, active=0, kernelpagesize_kb=2048
    )
    assert (
        format_numa_map_line(huge) == "7f0000000000 default huge anon=5 dirty=5 N1=5 kernelpagesize_kB=2048\n"
    )
    # nodes ascending over N_MEMORY, zero counts omitted
    v = VmaView(0x1000, "default", {3: 1, 0: 0, 1: 2}, anon=3, dirty=3)
    assert format_numa_map_line(v, memory_nodes=[0, 1, 3]).endswith(" N1=2 N3=1 kernelpagesize_kB=4\n")


def test_status_bitmaps() -> None:
    assert format_status_mems_allowed([0, 1], max_numnodes=64) == (
        "Mems_allowed:\t00000000,00000003\nMems_allowed_list:\t0-1\n"
    )
    assert format_status_mems_allowed([0, 1]).startswith("Mems_allowed:\t" + "00000000," * 31 + "00000003\n")
    assert bitmap_string([0, 39], 40) == "80,00000001"
    assert bitmap_string([], 8) == "00"


def test_sysfs_node_files() -> None:
    assert format_node_numastat({"numa_hit": 7, "other_node": 2}) == (
        "numa_hit 7\nnuma_miss 0\nnuma_foreign 0\ninterleave_hit 0\nlocal_node 0\nother_node 2\n"
    )
    assert format_node_meminfo(
        0, [("MemTotal", 16314556), ("Active(anon)", 5)], [("HugePages_Total", 0)]
    ) == (
        "Node 0 MemTotal:       16314556 kB\n"
        "Node 0 Active(anon):          5 kB\n"
        "Node 0 HugePages_Total:     0\n"
    )


def test_zoneinfo_pagesets_of_newer_kernels_have_high_min_max() -> None:
    z = ZoneView(1, "Normal", 10, 10, 10, pagesets=[PagesetView(3, 0, 42, 63, 24, high_min=42, high_max=500)])
    text = format_zoneinfo([z])
    assert (
        "\n    cpu: 3\n              count:    0\n              high:     42\n              batch:    63"
        "\n              high_min: 42\n              high_max: 500\n  vm stats threshold: 24\n"
    ) in text


def test_zone_views_of_a_kernel_follow_its_version() -> None:
    from numasim.kernel.config import KernelConfig
    from numasim.kernel.kernel import Kernel
    from numasim.topology.builders import glueless

    machine = glueless(2, cpus_per_node=2, memory_bytes=1 << 30)
    new = format_zoneinfo(zone_views(Kernel(machine, KernelConfig(version="6.12"))))
    old = format_zoneinfo(zone_views(Kernel(machine, KernelConfig(version="6.1"))))
    assert "high_min:" in new and "high_min:" not in old
    assert new.count("Node 0, zone") == 5 and new.count("per-node stats") == 2
    assert "\n        promo    " in old
    buddy = format_buddyinfo(zone_views(Kernel(machine)))
    assert all(line.startswith("Node ") and line.endswith(" ") for line in buddy.splitlines())


def test_zoneinfo_counts_a_programs_pages() -> None:
    from numasim.kernel.kernel import Kernel
    from numasim.tools.numactl import run_numactl
    from numasim.topology.builders import glueless

    kernel = Kernel(glueless(2, cpus_per_node=2, memory_bytes=1 << 30))
    run = run_numactl(kernel, ["-m", "1", "memhog", "8M"], keep_alive=True)
    views = [v for v in zone_views(kernel, pagesets=False) if v.node == 1 and v.populated]
    anon = sum(dict(v.zone_stats)["nr_zone_active_anon"] for v in views)
    assert anon == sum(run.program_pages_per_node.values()) - 48  # all but the 48 file pages of the image
    first = views[0]
    assert first.node_stats is not None and dict(first.node_stats)["nr_anon_pages"] == anon


def test_status_of_a_task_in_a_cpuset() -> None:
    from numasim.kernel.kernel import Kernel
    from numasim.kernel.procfs import status_mems_allowed_of
    from numasim.topology.builders import glueless

    kernel = Kernel(glueless(4, cpus_per_node=1, memory_bytes=256 << 20))
    kernel.cpuset_create("two", cpus=[1, 2], mems=[1, 2])
    text = status_mems_allowed_of(kernel, kernel.spawn("x", cpuset="two"))
    assert text == "Mems_allowed:\t" + "00000000," * 31 + "00000006\nMems_allowed_list:\t1-2\n"
