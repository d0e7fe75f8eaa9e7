"""Experiment 001: ``stress -m 1 --vm-bytes 64G --vm-keep`` on node 0 of the 2 x E5-2680 v2 of article 001.

The article (shared/seeds/001_fa2b5bbd904fce34.txt) asked whether a process that wants more memory than its node
has free swaps or spills to the other node. ``numactl --hardware`` showed 42,625 MB free on node 0 and 43,405 MB
on node 1; ``numastat -p`` of the stress worker then showed 44,313.61 MB on node 0 and 21,222.64 MB on node 1, no
swap, the same with ``kernel.numa_balancing`` on or off.

This script runs the same command on the simulated kernel of the shipped ``seed-001-e5-2680v2`` machine:

1. **model** -- Linux 6.12 defaults (``vm.zone_reclaim_mode = 0``, the machine's used memory not reclaimable):
   the fault path fills node 0 down to its low watermarks (and the DMA32/DMA lowmem reserves), then falls back
   to node 1 along node 0's zonelist; no reclaim, no swap.
2. **what-if** -- the article's node 0 ended 1,688.6 MB *above* its free memory, which only local reclaim of clean
   page cache can give. With ``vm.zone_reclaim_mode = 1`` and ``R`` MB of clean page cache on node 0,
   ``node_reclaim`` frees it (down to ``min_unmapped_ratio`` = 1 %) before the allocation leaves the node. ``R`` is
   not in the article: the script reports the ``R`` that reproduces it (an inference, one number fitted to one
   number).
3. **kswapd** -- the kernel's defaults (``vm.zone_reclaim_mode = 0``) with kswapd modelled
   (``KernelConfig.kswapd_enabled``): node 0's kswapd wakes when the fault path passes node 0 over for node 1
   and reclaims ``R`` MB of clean page cache there at ``kswapd_reclaim_bytes_per_s`` while stress faults at
   ``fault_pages_per_s`` (both nominal priors, KernelConfig defaults); what it frees goes to the next faults.
   ``R`` is again fitted to the article's node 0; a sensitivity sweep over kswapd's rate shows where the rate
   starts to matter.

Run ``python experiments/001-stress-64g/run.py [--out DIR]``: prints the numastat tables, the comparison with the
article, writes ``result.json`` and ``figure.png`` (bar chart) into DIR (default: this folder).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from numasim.kernel.config import KernelConfig
from numasim.kernel.kernel import Kernel
from numasim.tools.numactl import run_numactl
from numasim.tools.numastat import numastat_sources, run_numastat
from numasim.topology.io import load_machine

HERE = Path(__file__).resolve().parent
MACHINE = "seed-001-e5-2680v2"
COMMAND = ["--cpunodebind=0", "stress", "-m", "1", "--vm-bytes", "64G", "--vm-keep"]
ARTICLE_MB = {"node0": 44313.61, "node1": 21222.64, "total": 65536.25}
ARTICLE_BALANCING_OFF_MB = {"node0": 44318.18, "node1": 21218.07, "total": 65536.25}
ARTICLE_FREE_MB = {"node0": 42625, "node1": 43405}
WHAT_IF_CACHE_MB = 2687
"""Clean page cache on node 0 that, with zone_reclaim_mode = 1, reproduces the article (inferred, see README)."""
KSWAPD_CACHE_MB = 2046
"""Clean page cache on node 0 that kswapd reclaims while stress faults its memory in, with the kernel's defaults
(zone_reclaim_mode = 0): inferred from the article's node 0, one number fitted to one number (see README)."""
KSWAPD_RECLAIM_BYTES_PER_S = KernelConfig().kswapd_reclaim_bytes_per_s
"""kswapd's clean-cache reclaim rate: the KernelConfig default, a nominal prior (2 GB/s), not fitted."""
FAULT_PAGES_PER_S = KernelConfig().fault_pages_per_s
"""stress's fault rate: the KernelConfig default, a nominal prior (500,000 pages/s, 2 us a fault), not fitted."""
KSWAPD_SENSITIVITY_BYTES_PER_S = (50e6, 100e6, 200e6, 500e6, 2e9, 20e9)
"""kswapd rates of the sensitivity sweep (same R, same fault rate)."""


def reproduce(
    *, kernel_version: str = "6.12", zone_reclaim_mode: int = 0, node0_cache_mb: int = 0,
    kswapd: bool = False,
    kswapd_reclaim_bytes_per_s: float = KSWAPD_RECLAIM_BYTES_PER_S,
    fault_pages_per_s: float = FAULT_PAGES_PER_S,
) -> dict[str, Any]:
    """Run the article's command on a fresh simulated kernel; returns MB per node of the stress worker.

    Examples
    --------
    >>> r = reproduce()  # doctest: +SKIP
    >>> round(r["node0"])  # doctest: +SKIP
    42268
    """
    machine = load_machine(MACHINE)
    cache = {0: node0_cache_mb << 20} if node0_cache_mb else None
    config = KernelConfig(
        version=kernel_version, zone_reclaim_mode=zone_reclaim_mode, reclaimable_page_cache_bytes=cache,
        kswapd_enabled=kswapd,
        kswapd_reclaim_bytes_per_s=kswapd_reclaim_bytes_per_s,
        fault_pages_per_s=fault_pages_per_s,
    )
    kernel = Kernel(machine, config)
    run = run_numactl(kernel, COMMAND)
    if run.exit_code != 0:
        raise RuntimeError(f"stress failed: {run.stderr}")
    (worker,) = run.program_pids
    table = run_numastat(["-p", str(worker)], numastat_sources(kernel)).stdout
    balancing = numa_balancing_check(kernel, worker)
    pages = run.program_pages_per_node
    mb = {f"node{n}": pages.get(n, 0) * 4096 / 2**20 for n in (0, 1)}
    mb["total"] = mb["node0"] + mb["node1"]
    return {
        **mb,
        "numastat_p": table,
        "stdout": run.stdout,
        "swap_mb": 0.0,  # the model has no swap; an allocation that cannot be placed OOM-kills instead
        "oom_kills": len(kernel.oom_kills),
        "pgsteal_direct_mb": kernel.pm.vmstat["pgsteal_direct"] * 4096 / 2**20,
        "pgsteal_kswapd_mb": kernel.pm.vmstat["pgsteal_kswapd"] * 4096 / 2**20,
        "pageoutrun": kernel.pm.vmstat["pageoutrun"],
        "node0_low_wmark_mb": sum(z.wmark_low for z in kernel.pm.node_zones(0)) * 4096 / 2**20,
        "kernel_version": kernel_version,
        "zone_reclaim_mode": zone_reclaim_mode,
        "node0_cache_mb": node0_cache_mb,
        "kswapd": kswapd,
        "kswapd_reclaim_bytes_per_s": kswapd_reclaim_bytes_per_s if kswapd else None,
        "fault_pages_per_s": fault_pages_per_s if kswapd else None,
        **balancing,
    }


def migrate_balanced_pgdat(kernel: Kernel, nid: int, nr_pages: int = 1) -> bool:
    """mm/migrate.c ``migrate_balanced_pgdat``: may NUMA balancing migrate ``nr_pages`` onto node ``nid``?

    True if some managed zone passes ``zone_watermark_ok(zone, 0, high + nr_pages, ZONE_MOVABLE)``, i.e. keeps
    more than its high watermark plus the pages plus its ``lowmem_reserve[ZONE_MOVABLE]`` free.
    """
    movable = 3
    return any(
        z.managed_pages > 0 and z.free_pages > z.wmark_high + nr_pages + z.lowmem_reserve[movable]
        for z in kernel.pm.node_zones(nid)
    )


def numa_balancing_check(kernel: Kernel, pid: int) -> dict[str, Any]:
    """What ``kernel.numa_balancing = 1`` would do to the worker's pages after the run.

    A hinting fault on a page asks ``mpol_misplaced`` (default policy: MOF|MORON, so the target is the
    faulting cpu's node) and migrates only if ``migrate_balanced_pgdat`` accepts the target node.
    """
    import numpy as np

    task = kernel.tasks[pid]
    big = max(task.mm.vmas, key=lambda v: v.npages)
    remote = np.flatnonzero(big.nodes == 1)
    samples = [int(remote[0]), int(remote[len(remote) // 2]), int(remote[-1])] if remote.size else []
    targets = {kernel.mpol_misplaced(task, big.start + (i << 12)) for i in samples}
    room = migrate_balanced_pgdat(kernel, 0)
    return {
        "balancing_remote_pages": int(remote.size),
        "balancing_target_nodes": sorted(targets),
        "balancing_node0_has_room": room,
        "balancing_pages_moved": int(remote.size) if room else 0,
    }


def _error_pct(model: float, article: float) -> float:
    return 100.0 * (model - article) / article


def plot(results: dict[str, dict[str, Any]], path: Path) -> None:
    """Bar chart: MB on node 0 and node 1, article vs the model runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [
        "article\n(balancing on)",
        "article\n(balancing off)",
        "model 6.12\n(defaults)",
        "model 6.1\n(defaults)",
        f"what-if: zone_reclaim=1\n+{WHAT_IF_CACHE_MB} MB cache",
        f"kswapd: defaults\n+{KSWAPD_CACHE_MB} MB cache",
    ]
    rows = [
        ARTICLE_MB,
        ARTICLE_BALANCING_OFF_MB,
        results["model_6.12"],
        results["model_6.1"],
        results["what_if"],
        results["kswapd"],
    ]
    fig, ax = plt.subplots(figsize=(10.5, 4.5))
    xs = range(len(rows))
    node0 = [r["node0"] / 1024 for r in rows]
    node1 = [r["node1"] / 1024 for r in rows]
    ax.bar([x - 0.2 for x in xs], node0, width=0.4, label="node 0 (cpus of stress)")
    ax.bar([x + 0.2 for x in xs], node1, width=0.4, label="node 1")
    ax.axhline(
        ARTICLE_FREE_MB["node0"] / 1024,
        color="gray",
        linestyle="--",
        linewidth=1,
        label="node 0 free before (42,625 MB)",
    )
    for x, (a, b) in enumerate(zip(node0, node1, strict=True)):
        ax.text(x - 0.2, a + 0.3, f"{a * 1024:,.0f}", ha="center", fontsize=7)
        ax.text(x + 0.2, b + 0.3, f"{b * 1024:,.0f}", ha="center", fontsize=7)
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set_ylabel("GiB of the 64 GiB stress worker")
    ax.set_ylim(0, 58)
    ax.set_title("Article 001: numactl --cpunodebind=0 stress -m 1 --vm-bytes 64G (seed-001-e5-2680v2)")
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fd, tmp = tempfile.mkstemp(suffix=".png", dir=path.parent)
    os.close(fd)
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder for result.json and figure.png")
    args = parser.parse_args(argv)
    results = {
        "model_6.12": reproduce(kernel_version="6.12"),
        "model_6.1": reproduce(kernel_version="6.1"),
        "what_if": reproduce(zone_reclaim_mode=1, node0_cache_mb=WHAT_IF_CACHE_MB),
        "kswapd": reproduce(node0_cache_mb=KSWAPD_CACHE_MB, kswapd=True),
    }
    sweep = [
        {
            "kswapd_reclaim_bytes_per_s": rate,
            **{k: reproduce(node0_cache_mb=KSWAPD_CACHE_MB, kswapd=True, kswapd_reclaim_bytes_per_s=rate)[k]
               for k in ("node0", "node1", "pgsteal_kswapd_mb")},
        }
        for rate in KSWAPD_SENSITIVITY_BYTES_PER_S
    ]
    base = results["model_6.12"]
    print("$ numactl --cpunodebind=0 -- stress -m 1 --vm-bytes 64G --vm-keep")
    print(base["stdout"], end="")
    print(base["numastat_p"])
    print(f"{'':34}{'node 0 MB':>12}{'node 1 MB':>12}{'total MB':>12}{'node 0 err':>12}")
    print(
        f"{'article (balancing on)':34}{ARTICLE_MB['node0']:12.2f}{ARTICLE_MB['node1']:12.2f}{ARTICLE_MB['total']:12.2f}"
    )
    print(
        f"{'article (balancing off)':34}{ARTICLE_BALANCING_OFF_MB['node0']:12.2f}"
        f"{ARTICLE_BALANCING_OFF_MB['node1']:12.2f}{ARTICLE_BALANCING_OFF_MB['total']:12.2f}"
    )
    for name, r in results.items():
        label = {
            "model_6.12": "model, Linux 6.12 defaults",
            "model_6.1": "model, Linux 6.1 defaults",
            "what_if": f"what-if, reclaim {WHAT_IF_CACHE_MB} MB cache",
            "kswapd": f"kswapd, {KSWAPD_CACHE_MB} MB cache",
        }[name]
        print(
            f"{label:34}{r['node0']:12.2f}{r['node1']:12.2f}{r['total']:12.2f}"
            f"{_error_pct(r['node0'], ARTICLE_MB['node0']):11.2f}%"
        )
    print(
        f"numa_balancing on: mpol_misplaced sends the {base['balancing_remote_pages']:,} node-1 pages to node(s) "
        f"{base['balancing_target_nodes']}, but migrate_balanced_pgdat(node 0) = {base['balancing_node0_has_room']}: "
        f"{base['balancing_pages_moved']} pages move, so on = off"
    )
    ks = results["kswapd"]
    print(
        f"kswapd: R = {KSWAPD_CACHE_MB} MB of clean cache on node 0 (fitted), reclaim "
        f"{KSWAPD_RECLAIM_BYTES_PER_S / 1e9:g} GB/s, faults {FAULT_PAGES_PER_S:,.0f} pages/s (nominal priors): "
        f"node 1 {_error_pct(ks['node1'], ARTICLE_MB['node1']):+.3f} % vs the article; "
        f"pgsteal_kswapd {ks['pgsteal_kswapd_mb']:.0f} MB, pageoutrun {ks['pageoutrun']}"
    )
    print("kswapd rate sensitivity (same R):")
    for row in sweep:
        print(
            f"  {row['kswapd_reclaim_bytes_per_s'] / 1e9:6.2f} GB/s: node 0 {row['node0']:10.2f} MB "
            f"({_error_pct(row['node0'], ARTICLE_MB['node0']):+6.2f} %), node 1 {row['node1']:10.2f} MB "
            f"({_error_pct(row['node1'], ARTICLE_MB['node1']):+6.2f} %)"
        )
    print(
        f"\nswap used: 0 MB in every run (article: none); OOM kills: {sum(r['oom_kills'] for r in results.values())}"
    )
    print(
        f"node 0 low watermarks: {base['node0_low_wmark_mb']:.1f} MB; node 0 ends "
        f"{ARTICLE_FREE_MB['node0'] - base['node0']:.1f} MB below its free memory in the model, "
        f"{ARTICLE_MB['node0'] - ARTICLE_FREE_MB['node0']:.1f} MB above it in the article"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    summary = {
        name: {k: v for k, v in r.items() if k not in ("numastat_p", "stdout")} for name, r in results.items()
    }
    summary["article"] = ARTICLE_MB
    summary["kswapd_rate_sensitivity"] = sweep  # type: ignore[assignment]
    fd, tmp = tempfile.mkstemp(suffix=".json", dir=args.out)
    with os.fdopen(fd, "w") as fh:
        json.dump(summary, fh, indent=2)
    os.replace(tmp, args.out / "result.json")
    plot(results, args.out / "figure.png")
    print(f"wrote {args.out / 'result.json'} and {args.out / 'figure.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
