"""render_tree: a golden lstopo-like tree of a machine shaped like source article 000's."""

from __future__ import annotations

from numasim.topology.builders import _rebuild, cache_hierarchy, multi_die, with_cxl_expander, with_device
from numasim.topology.model import Link, LinkKind, Machine, MemoryController, Node
from numasim.topology.render import render_links, render_tree
from numasim.units import GiB, KiB, MiB

GOLDEN_000 = """\
Machine article-000 (503.3 GiB total, 4 nodes, 96 cpus)
  Package 0
    Die 0
      NUMANode 0 (125.4 GiB, free 47.9 GiB, dram)  cpus 0-11,48-59
        Device mlx5_2 (nic, 500 ns, 25.5 GB/s)
    Die 1
      NUMANode 1 (125.9 GiB, free 849.0 MiB, dram)  cpus 12-23,60-71
  Package 1
    Die 0
      NUMANode 2 (126.0 GiB, free 25.0 GiB, dram)  cpus 24-35,72-83
    Die 1
      NUMANode 3 (126.0 GiB, free 9.9 GiB, dram)  cpus 36-47,84-95
Caches
  L1d 48.0 KiB per core, 1.5 ns, 8-way, 64 B lines
  L2 1.2 MiB per core, 5 ns, 16-way, 64 B lines
Links (a <-> b  kind  latency  bandwidth; -> is a to b, <- is b to a)
  0 <-> socket0-mesh  on-die  4 ns  100 GB/s  each way
  1 <-> socket0-mesh  on-die  4 ns  100 GB/s  each way
  2 <-> socket1-mesh  on-die  4 ns  100 GB/s  each way
  3 <-> socket1-mesh  on-die  4 ns  100 GB/s  each way
  socket0-mesh <-> socket1-mesh  upi  42 ns  50 GB/s  each way
Switches
  socket0-mesh  on-die  traversal 0 ns  links to 0, 1, socket1-mesh
  socket1-mesh  on-die  traversal 0 ns  links to 2, 3, socket0-mesh"""


def _article_000() -> Machine:
    m = multi_die(2, "SNC2", cores_per_socket=24, threads_per_core=2)
    size_mb = [128402, 128965, 129017, 129010]
    free_mb = [49043, 849, 25550, 10116]
    nodes = [
        n.model_copy(update={"memory_bytes": s * MiB, "free_bytes": f * MiB}).model_dump()
        for n, s, f in zip(m.nodes, size_mb, free_mb, strict=True)
    ]
    caches = [c.model_dump() for c in cache_hierarchy(l1d_bytes=48 * KiB, l2_bytes=1280 * KiB, l3_bytes=None)]
    m = _rebuild(m, name="article-000", nodes=nodes, caches=caches)
    return with_device(m, "mlx5_2", 0, attach_bandwidth_gb_s=25.5)


def test_golden_tree_of_article_000_machine() -> None:
    assert render_tree(_article_000()) == GOLDEN_000


def test_asymmetric_link_shows_both_directions() -> None:
    ctrl = MemoryController(latency_ns=61.7, read_bandwidth_gb_s=55.3)
    m = Machine(
        name="ivb",
        nodes=[Node(id=0, cpus=[0], memory_bytes=GiB, controller=ctrl), Node(id=1, cpus=[1], memory_bytes=GiB)],
        links=[Link(a=0, b=1, kind=LinkKind.QPI, latency_ns=53.9, bandwidth_gb_s=25.5, latency_ns_reverse=52.9)],
    )
    assert render_links(m)[1] == "  0 <-> 1  qpi  -> 53.9 ns 25.5 GB/s  <- 52.9 ns 25.5 GB/s"
    # no socket given: the nodes are grouped under "Package (none)"
    assert "  Package (none)\n    NUMANode 0 (1.0 GiB, dram)  cpus 0" in render_tree(m)


def test_cpuless_cxl_node_is_shown_with_its_kind() -> None:
    m = with_cxl_expander(multi_die(2, "SNC1", cores_per_socket=4, threads_per_core=1), 0, 64 * GiB)
    text = render_tree(m)
    assert "NUMANode 2 (64.0 GiB, cxl)  no cpus" in text
    assert "Device cxl0 (cxl-expander" in text
    assert "0 <-> 2  cxl  100 ns  52 GB/s  each way" in text


def test_figures_are_deterministic_and_labelled(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from numasim.topology.plots import draw_topology, layout, slit_heatmap

    m = _article_000()
    assert layout(m) == layout(m)
    assert layout(m, kind="spring", seed=3) == layout(m, kind="spring", seed=3)
    fig = draw_topology(m)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "node 0\n125.4 GiB\n24 cpus" in texts
    assert "42 ns\n50 GB/s" in texts
    assert "socket0\nmesh" in texts
    fig.savefig(tmp_path / "t.png")
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    heat = slit_heatmap(m, which="timing")
    cells = [t.get_text() for t in heat.axes[0].texts]
    assert cells[:4] == ["10", "11", "16", "16"]
    assert "no firmware table" in slit_heatmap(m).axes[0].get_title()


def test_dense_machines_are_drawn_without_link_labels() -> None:
    from numasim.topology.builders import glueless
    from numasim.topology.plots import draw_topology

    fig = draw_topology(glueless(8))  # 28 links
    assert "28 links: labels omitted" in fig.axes[0].get_title()
    assert not any(" ns\n" in t.get_text() for t in fig.axes[0].texts)
    labelled = draw_topology(glueless(8), edge_labels=True)
    assert sum(" ns\n" in t.get_text() for t in labelled.axes[0].texts) == 28
