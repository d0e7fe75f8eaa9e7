"""``numasim catalog``: the platform catalog of processor generations (caches, channels, links, core limits,
public measurements, SKUs), each number with its public source; and calibrations made of its priors alone.

``catalog list`` tabulates the platforms, ``catalog show NAME|CPU-STRING`` prints one with every field and
its source (and, for a CXL-capable platform, the catalog's CXL devices), ``catalog cxl`` prints the CXL
section (links, expanders, the added-latency default, sources), ``catalog calibrate MACHINE`` writes a ``method="catalog"`` calibration for a machine that was
never measured (every parameter listed as a prior), which ``--calibration`` then uses like any other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:  # imported where used: a kernel-only command never loads the timing model (start-up time)
    import numpy as np

    from numasim.timing.catalog import CatalogMatch, Platform
    from numasim.timing.catalog.cxl import CxlCatalog

__all__ = ["register", "catalog_app"]

catalog_app = typer.Typer(
    name="catalog",
    help="Processor platforms with what the timing model needs (list, show) and catalog-only calibrations.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def register(app: typer.Typer) -> None:
    """Add the ``catalog`` command group to ``app`` (once, however often it is called)."""
    if any(group.name == "catalog" for group in app.registered_groups):
        return
    app.add_typer(catalog_app, name="catalog")


def _memory(p: Platform) -> str:
    return f"{p.memory.ddr}-{p.memory.max_mt_s}"


def _links(p: Platform) -> str:
    ic = p.interconnect
    return "none (1 socket)" if ic is None else f"{ic.links_per_socket}x {ic.kind} {ic.gt_s:g} GT/s"


@catalog_app.command("list")
def list_cmd(
    vendor: Annotated[str | None, typer.Option("--vendor", help="Only this vendor: intel or amd.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """One line per platform: name, vendor, years, SKUs, channels per socket, DDR, socket links."""
    if vendor is not None and vendor not in ("intel", "amd"):
        raise typer.BadParameter(f"{vendor!r}: expected intel or amd", param_hint="'--vendor'")
    from numasim.timing.catalog import load_catalog

    platforms = [p for p in load_catalog() if vendor is None or p.vendor == vendor]
    if as_json:
        rows = [
            {
                "name": p.name, "vendor": p.vendor, "title": p.title, "years": list(p.years), "skus": len(p.skus),
                "channels_per_socket": p.memory.channels_per_socket, "ddr": _memory(p),
                "links": None if p.interconnect is None else {
                    "kind": p.interconnect.kind, "per_socket": p.interconnect.links_per_socket,
                    "gt_s": p.interconnect.gt_s,
                },
            }
            for p in platforms
        ]
        typer.echo(json.dumps(rows, indent=2))
        return
    header = ("name", "vendor", "years", "SKUs", "channels", "DDR", "links")
    rows_t = [
        (p.name, p.vendor, _years(p),
         str(len(p.skus)), str(p.memory.channels_per_socket), _memory(p), _links(p))
        for p in platforms
    ]
    widths = [max(len(r[i]) for r in [header, *rows_t]) for i in range(len(header))]
    for r in [header, *rows_t]:
        typer.echo("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def _years(p: Any) -> str:
    """A platform's years on the market: ``2019-2020``, or one year (``2017``, not ``2017-2017``)."""
    return f"{p.years[0]}-{p.years[1]}" if p.years[0] != p.years[1] else str(p.years[0])


def _fields(obj: Any, skip: tuple[str, ...] = ("sources",)) -> str:
    data = obj.model_dump(exclude_none=True, exclude=set(skip))
    return ", ".join(f"{k} = {v}" for k, v in data.items() if v not in ("", [], {}))


def _show_text(found: CatalogMatch) -> list[str]:
    p = found.platform
    lines = [f"{p.name}: {p.title}", f"  vendor {p.vendor}, microarchitecture {p.microarchitecture}, "
             f"{_years(p)}, up to {p.max_cores_per_socket} cores x {p.threads_per_core} threads per socket"]
    if found.sku is not None:
        lines.append(f"  matched {found.query!r} -> SKU {found.sku.model}")
    elif found.how == "pattern":
        lines.append(f"  matched {found.query!r} by model pattern; this SKU is not listed (a machine with it is "
                     "timed as the listed SKU nearest in cores a socket, with the string's clock where it gives "
                     "one: the calibration's notes say which)")

    def src(ids: list[str]) -> str:
        return f"    source: {', '.join(ids)}" if ids else "    source: -"

    lines.append("caches:")
    for c in p.caches:
        one = ("complexes_per_die",) if c.complexes_per_die == 1 else ()  # (shown where a die holds several)
        module = () if c.scope == "module" else ("cores_per_module",)  # (shown where a module shares it)
        lines += [f"  {c.level}: {_fields(c, ('sources', 'level', *one, *module))}", src(c.sources)]
    buffered = () if p.memory.buffered else ("buffered",)  # (shown where the DIMMs sit behind buffers)
    lines += ["memory:", f"  {_fields(p.memory, ('sources', *buffered))}", src(p.memory.sources)]
    if p.hbm is not None:
        lines += ["HBM in the package (flat mode: cpu-less nodes beside their cluster):",
                  f"  {_fields(p.hbm)}; peak {p.hbm.peak_gb_s_per_socket:g} GB/s a socket", src(p.hbm.sources)]
    if p.numa_modes:
        lines.append("NUMA modes:")
        for m in p.numa_modes:
            lines += [f"  {_fields(m)}", src(m.sources)]
    if p.interconnect is None:
        lines += ["interconnect: none (a single-socket platform)"]
    else:
        lines += ["interconnect:", f"  {_fields(p.interconnect)}", src(p.interconnect.sources)]
    if p.core_die_link is not None:
        d = p.core_die_link
        lines += ["core-die ports (one per core die, to the I/O die):",
                  f"  {d.read_gb_s():g} GB/s toward the die (reads), {d.write_gb_s():g} GB/s from it (writes) per "
                  f"link: {d.read_bytes_per_clock} / {d.write_bytes_per_clock} B per fabric clock x "
                  f"{d.fabric_clock_ghz:g} GHz (a SKU's core_die_links say how many links join each die)",
                  f"  fabric clock: {d.fabric_clock_note}", f"  dies per SKU: {d.dies_rule}", src(d.sources)]
    lines.append("core limits:")
    core = _fields(p.core)
    lines += [f"  {core}" if core else "  no public figure (numasim's default is used)", src(p.core.sources)]
    # measured figures an entry may lack: (heading, the entry's record, what a calibration does without it)
    from numasim.timing.catalog.calibration import coherence_donor

    donor = coherence_donor(p)
    c2c_without = (
        "no public measurement in this entry (transfers are timed as the level or memory that serves them)"
        if donor is None or donor.coherence is None else
        f"no public measurement in this entry; a catalog calibration borrows {donor.name}'s (the nearest measured "
        f"platform of the vendor and socket link): {_fields(donor.coherence, ('sources', 'measured_on'))}"
    )  # fmt: skip
    for heading, entry, without in (
        ("idle DRAM latency", p.latency,
         "no public measurement in this entry (a catalog calibration borrows another platform's, and says so)"),
        ("bandwidth efficiency", p.efficiency,
         "no public measurement in this entry (a catalog calibration uses the catalog-wide median, and says so)"),
        ("one core's stream depth (lines prefetched ahead)", p.stream,
         "no one-core streaming measurement in this entry (numasim's default depth, 16 lines, stands in, said so)"),
        ("cache-to-cache transfers (HITM)", p.coherence, c2c_without),
        ("write-allocate evasion", p.write_allocate, "none known (every store miss reads its line: write cost factor 2)"),
    ):
        lines.append(f"{heading}:")
        lines += [f"  {without}"] if entry is None else [f"  {_fields(entry)}", src(entry.sources)]
        if heading == "idle DRAM latency":
            lines += _latency_lines(p)
    lines += _cxl_lines(p)
    lines.append(f"SKUs ({len(p.skus)}):")
    for s in p.skus:
        mark = "*" if found.sku is not None and s.model == found.sku.model else " "
        lines.append(f" {mark}{s.model}: {_fields(s, ('sources', 'model'))} [{', '.join(s.sources)}]")
    lines.append("sources:")
    for ref in p.source_list:
        where = f" <{ref.url}>" if ref.url else ""
        lines.append(f"  [{ref.id}] {ref.title}{where}")
        lines.append(f"      gave: {ref.gave}")
    if p.notes:
        lines.append(f"notes: {p.notes}")
    return lines


def _latency_lines(p: Any) -> list[str]:
    """Whose latency figures a catalog calibration borrows where the entry has none, and what a sibling cluster
    adds where the (own or borrowed) source measured two modes (derived, said so)."""
    from numasim.timing.catalog import load_catalog
    from numasim.timing.catalog.calibration import (
        latency_donors,
        remote_donor,
        remote_from_coherence,
        sibling_route,
    )

    out = []
    local, remote = latency_donors(p)
    if local is not None and local.latency is not None:
        by_mode = "".join(f", {m} {v:g} ns" for m, v in local.latency.local_ns_by_mode.items())
        mode = f" ({local.latency.mode}{by_mode})" if local.latency.mode else ""
        if local.latency.sockets is not None:
            others = "".join(f", {k}: {v:g} ns" for k, v in sorted(local.latency.local_ns_by_sockets.items()))
            mode += f" (on {local.latency.sockets} sockets{others})"
        out.append(f"  borrows: local {local.latency.local_ns:g} ns{mode} from {local.name}")
    if remote is not None and remote.latency is not None and remote.latency.remote_ns is not None:
        delta = remote.latency.remote_ns - remote.latency.local_ns
        out.append(f"  borrows: remote - local {delta:.1f} ns from {remote.name} ({remote.latency.measured_on})")
    from_tiers = remote_from_coherence(p, None)
    if from_tiers is not None and from_tiers[2].name != p.name:
        out.append(f"  borrows: remote - local {from_tiers[0]:.1f} ns derived from {from_tiers[2].name}'s cache-to-cache "
                   "tiers (no platform of its vendor has a remote latency to lend)")
    elif from_tiers is not None:
        out.append(f"  derived: remote - local {from_tiers[0]:.1f} ns from its cache-to-cache tiers (a line from another "
                   "socket less one from within the socket; no platform of its vendor has a remote latency to lend)")
    # a remote - local difference measured on one socket count holds on that count only: its own on other counts
    # borrows, and another platform's lends to machines of that count alone
    own = p.latency if p.latency is not None and p.latency.remote_ns is not None else None
    if p.single_socket:  # no remote socket to borrow a difference for
        own = None
    elif own is not None and own.sockets is not None and remote is None:
        alt = remote_donor(p, None)
        if alt is not None and alt.latency is not None and alt.latency.remote_ns is not None:
            delta = alt.latency.remote_ns - alt.latency.local_ns
            out.append(f"  on other than {own.sockets} sockets: remote - local {delta:.1f} ns borrowed from "
                       f"{alt.name} ({alt.latency.measured_on})")
    if own is None and not p.single_socket:
        counts = sorted({q.latency.sockets for q in load_catalog()
                         if q.latency is not None and q.latency.remote_ns is not None and q.latency.sockets})
        for n in counts:
            alt = None if remote_from_coherence(p, n) is not None else remote_donor(p, n)
            if alt is not None and alt is not remote and alt.latency is not None and alt.latency.remote_ns is not None:
                delta = alt.latency.remote_ns - alt.latency.local_ns
                out.append(f"  on {n} sockets: remote - local {delta:.1f} ns borrowed from {alt.name}")
    source = p.latency if p.latency is not None else (local.latency if local is not None else None)
    finest = max((m for m in p.numa_modes), key=lambda m: m.nodes_per_socket, default=None)
    found = None if finest is None or source is None else sibling_route(source, finest.name)
    if found is not None:
        whose = f" (borrowed from {local.name})" if p.latency is None and local is not None else ""
        out.append(f"  derived: a sibling cluster's memory adds {found[0]:.1f} ns on average{whose}, {found[1]}")
    return out


def _device_line(d: Any, default: str) -> str:
    from numasim.timing.catalog.cxl import load_cxl_catalog

    cat = load_cxl_catalog()
    if d.added_latency_ns is not None:
        added = f"+{d.added_latency_ns:g} ns"
    elif d.idle_latency_ns is not None:
        added = f"{d.idle_latency_ns:g} ns total measured on {d.measured_platform}"
    else:
        added = f"+{_default_added(cat, short=True)}"
    est = f"; estimates: {', '.join(d.estimates)}" if d.estimates else ""
    mark = " (default)" if d.name == default else ""
    return (f"  {d.name}{mark}: CXL {d.cxl_version} x{d.lanes} ({cat.link(d.lanes).payload_gb_s:.1f} GB/s payload per "
            f"direction), {d.channels}x {d.ddr}-{d.mt_s}, latency {added} [{', '.join(d.sources)}]{est}")


def _default_added(cat: CxlCatalog, short: bool = False) -> str:
    """What a device with no latency figure of its own adds, and whence."""
    from numasim.timing.catalog.cxl_timing import measured_added_latency

    got = measured_added_latency(cat)
    if got is None:
        return f"{cat.latency.default_added_ns:g} ns (the catalog's estimate: no device is measured)"
    if short:
        return f"{got[0]:.1f} ns (no figure of its own: the measured devices' median)"
    return f"{got[0]:.1f} ns (median of the measured devices: {', '.join(d.name for d in cat.devices if d.idle_latency_ns)})"


def _cxl_lines(p: Platform) -> list[str]:
    from numasim.timing.catalog.cxl import load_cxl_catalog

    if p.cxl is None:
        return ["CXL memory:", "  not supported by this platform in the catalog (a CXL node on it is an error)"]
    cat = load_cxl_catalog()
    lines = ["CXL memory:", f"  {_fields(p.cxl)}", f"    source: {', '.join(p.cxl.sources) or '-'}",
             "  expanders in the catalog's CXL section (numasim catalog cxl):"]
    lines += ["  " + _device_line(d, cat.default_device) for d in cat.devices]
    return lines


@catalog_app.command("cxl")
def cxl_cmd(as_json: Annotated[bool, typer.Option("--json", help="Print the CXL section as JSON.")] = False) -> None:
    """The CXL section: link widths and their payload bandwidth, Type-3 expanders, the added-latency default."""
    from numasim.timing.catalog.cxl import load_cxl_catalog

    cat = load_cxl_catalog()
    if as_json:
        typer.echo(json.dumps(cat.model_dump(mode="json", by_alias=True, exclude_none=True), indent=2))
        return
    typer.echo("CXL links (PCIe 5.0 PHY, 32 GT/s per lane):")
    for ln in cat.links:
        typer.echo(f"  x{ln.lanes}: {ln.raw_gb_s:.2f} GB/s per direction after 128b/130b, {ln.payload_gb_s:.2f} GB/s "
                   f"of line payload [{', '.join(ln.sources)}]; estimates: {', '.join(ln.estimates) or 'none'}")
    typer.echo(f"added latency over local DRAM of a device with no figure of its own: {_default_added(cat)}")
    typer.echo(f"  {cat.latency.derivation} [{', '.join(cat.latency.sources)}]")
    typer.echo("expanders:")
    for d in cat.devices:
        typer.echo(_device_line(d, cat.default_device))
    typer.echo(f"default device: {cat.default_device}: {cat.default_device_why}")
    from numasim.timing.catalog import load_catalog

    hosts = [f"{p.name} ({'/'.join(p.cxl.versions)})" for p in load_catalog() if p.cxl is not None]
    typer.echo(f"hosts with CXL memory support: {', '.join(hosts)}")
    typer.echo("sources:")
    for ref in cat.source_list:
        typer.echo(f"  [{ref.id}] {ref.title} <{ref.url}>")
        typer.echo(f"      gave: {ref.gave}")


@catalog_app.command("show")
def show_cmd(
    name: Annotated[str, typer.Argument(help="A catalog name (intel-skylake-sp), a model (Gold 6240) or a CPU string.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the entry as JSON.")] = False,
) -> None:
    """Every field of one platform with its source; a CPU string also marks its SKU."""
    from numasim.timing.catalog import match_cpu

    found = match_cpu(name)
    if as_json:
        data = found.platform.model_dump(mode="json", by_alias=True, exclude_none=True)
        data["matched"] = {"query": found.query, "how": found.how, "sku": found.sku.model if found.sku else None}
        typer.echo(json.dumps(data, indent=2))
        return
    for line in _show_text(found):
        typer.echo(line)


@catalog_app.command("calibrate")
def calibrate_cmd(
    machine: Annotated[str, typer.Argument(help="A shipped machine's name or a machine file.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the calibration JSON.")],
    sku: Annotated[
        str | None, typer.Option("--sku", help="The processor (default: the machine's cpu_model), e.g. 'Gold 6240'.")
    ] = None,
    cxl_device: Annotated[
        str | None,
        typer.Option("--cxl-device", help="The CXL expander behind the machine's CXL nodes (`numasim catalog cxl`; "
                     "default: the catalog's default device, said in each prior)."),
    ] = None,
    turbo: Annotated[
        str, typer.Option("--turbo", metavar="on|off", help="Whether the box runs its busy cores at the all-core turbo "
                          "(default on, the firmware's default) or at base: the clock mlc's delays and cache "
                          "latencies in cycles count.")
    ] = "on",
    core_clock_ghz: Annotated[
        float | None,
        typer.Option("--core-clock-ghz", metavar="GHZ", help="The clock the box's busy cores run at, when you know "
                     "it (turbostat's Bzy_MHz under load, /proc/cpuinfo): used instead of the catalog's all-core turbo "
                     "or base (and of --turbo); mlc's delays and the cache latencies in cycles count it."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing output file.")] = False,
) -> None:
    """Write a calibration made of catalog priors only (method "catalog"), for a machine never measured."""
    from numasim.timing.catalog import catalog_calibration
    from numasim.timing.model import apply_calibration, save_calibration
    from numasim.topology.io import load_machine
    from numasim.topology.routing import latency_table_ns

    if output.exists() and not force:
        raise typer.BadParameter(f"{output} exists; add --force to replace it", param_hint="'-o' / '--output'")
    if turbo not in ("on", "off"):
        raise typer.BadParameter(f"{turbo!r}: expected on or off", param_hint="'--turbo'")
    m = load_machine(machine)
    cal = catalog_calibration(m, sku=sku, cxl_device=cxl_device, turbo=turbo == "on", core_clock_ghz=core_clock_ghz)
    save_calibration(cal, output)
    p = cal.provenance
    typer.echo(f"catalog calibration {cal.id} of {m.name} from {p.platform} (priors only, no measurement)")
    typer.echo(f"  {len(p.priors)} parameters, each listed as a prior with its source (see the JSON)")
    clock = next(q for q in p.priors if q.parameter == "core.core_clock_ghz")
    typer.echo(f"  core clock {clock.value:g} GHz: {clock.source.split(' [', 1)[0].split(': ', 1)[-1]}")
    if cal.core.write_allocate_evasion > 0:
        typer.echo(f"  write-allocate evasion {cal.core.write_allocate_evasion:g}: full-line writes skip their reads "
                   "for ownership as lines queue at a controller (SpecI2M)")
    cxl_links = {(lt.src, lt.dst): lt for lt in cal.links}
    latency: np.ndarray | None = None
    for c in cal.controllers:
        node = m.node(c.node)
        if node.memory_kind.value == "cxl":
            attach = next(lk.a if lk.b == c.node else lk.b for lk in m.links
                          if lk.kind.value == "cxl" and c.node in (lk.a, lk.b))
            link = cxl_links[(attach, c.node)]
            if latency is None:
                latency = latency_table_ns(apply_calibration(m, cal))
            # what a cpu sees: from the nearest node with cpus (the attach point may be a switch, an I/O die)
            col = m.node_ids.index(c.node)
            rows = [i for i, n in enumerate(m.nodes) if n.has_cpus]
            near = min(rows, key=lambda i: latency[i, col])  # type: ignore[index]
            behind = f"node {attach}" if isinstance(attach, int) else attach
            way = latency[near, col] - c.latency_ns - link.latency_ns  # type: ignore[index]
            to_it = f" + {way:.1f} to reach its link" if way > 0.05 else ""
            typer.echo(f"  node {c.node} (CXL, behind {behind}): {latency[near, col]:.1f} ns from node "
                       f"{m.nodes[near].id} (its DRAM {c.latency_ns:.1f} + {link.latency_ns:.1f} over the CXL link"
                       f"{to_it}), read "
                       f"{min(c.read_bandwidth_gb_s, link.bandwidth_gb_s):.1f} GB/s (device "
                       f"{c.read_bandwidth_gb_s:.1f}, link {link.bandwidth_gb_s:.1f})")
            continue
        typer.echo(f"  node {c.node}: local latency {c.latency_ns:.1f} ns, read {c.read_bandwidth_gb_s:.1f} GB/s")
    typer.echo(f"wrote {output}")
