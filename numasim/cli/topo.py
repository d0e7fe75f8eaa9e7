"""``numasim topo``: look at machines: list the shipped ones, show one as a tree, print what ``numactl --hardware``
would print on it, convert between formats, draw it, and print its distance and latency tables.

``MACHINE`` is always a shipped machine's name or a path in any format :func:`numasim.topology.io.load_machine`
reads (our TOML, ``numactl --hardware`` text, a sysfs node tree, hwloc XML, ``lscpu`` output, a kerncraft machine
file). Files are written atomically and
never overwritten without ``--force``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import typer

from numasim.fileio import save_figure
from numasim.topology.model import Machine
from numasim.units import format_size

__all__ = ["register", "topo_app"]

topo_app = typer.Typer(
    name="topo",
    help="Inspect machines: list, show, hardware (numactl --hardware), import, draw, distances, latency, reconfigure.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_MACHINE_HELP = ("A shipped machine's name (see 'numasim topo list') or a machine file (TOML, numactl text, sysfs, hwloc "
                 "XML, lscpu text, kerncraft YAML).")
_STYLES = ("2.0.18", "2.0.19")
_FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


def register(app: typer.Typer) -> None:
    """Add the ``topo`` command group to ``app`` (once, however often it is called)."""
    if any(group.name == "topo" for group in app.registered_groups):
        return
    app.add_typer(topo_app, name="topo")


def _load(spec: str) -> Machine:
    from numasim.topology.io import load_machine

    return load_machine(spec)


def _source(spec: str) -> Path | None:
    """The user's machine file ``spec`` names, ``None`` for a shipped machine (whose calibration lies beside it)."""
    from numasim.topology.io import machine_source

    return machine_source(spec)


def _echo_block(text: str) -> None:
    typer.echo(text, nl=not text.endswith("\n"))


def _check_output(path: Path, force: bool) -> None:
    if path.exists() and not force:
        raise typer.BadParameter(f"{path} exists; add --force to replace it", param_hint="'-o' / '--output'")
    if not path.parent.exists():
        raise typer.BadParameter(f"directory {path.parent} does not exist", param_hint="'-o' / '--output'")


def _check_figure_output(path: Path, force: bool) -> None:
    if path.suffix.lower() not in _FIGURE_SUFFIXES:
        raise typer.BadParameter(
            f"{path}: cannot tell the figure format; use one of {', '.join(_FIGURE_SUFFIXES)}",
            param_hint="'-o' / '--output'",
        )
    _check_output(path, force)




def _timed(spec: str, machine: Machine) -> tuple[Machine, str]:
    """The machine with the timing its results use, and where those numbers come from, said explicitly.

    A machine that names a calibration shows the calibrated numbers (a missing or broken calibration is an
    error, as for any timing); one that names none shows the machine file's numbers, labelled nominal.
    """
    from numasim.timing.model import apply_calibration
    from numasim.timing.resolve import resolve_calibration

    if not machine.calibration:
        from numasim.timing.catalog.machine import catalog_borrowed, catalog_timed_by

        entry = catalog_timed_by(machine)
        if entry is not None:
            lent = catalog_borrowed(machine)
            return machine, (f"the machine file's numbers, the platform catalog's priors for {entry} (it names no "
                             "calibration; nothing of this box measured)"
                             + (f"; borrowed from other platforms: {lent}" if lent else ""))
        return machine, "the machine file's nominal numbers (it names no calibration; not fitted to measurements)"
    cal = resolve_calibration(machine, machine_path=_source(spec))
    origin = f"calibration {cal.id} ({cal.provenance.method})"
    if cal.provenance.priors:
        origin += f", {len(cal.provenance.priors)} parameter(s) not constrained by its measurements"
    return apply_calibration(machine, cal), origin


def _table(title: str, ids: list[int], rows: np.ndarray, fmt: str) -> list[str]:
    cells = [[("-" if not np.isfinite(v) else format(v, fmt)) for v in row] for row in rows]
    width = max([len(str(i)) for i in ids] + [len(c) for row in cells for c in row]) + 2
    lines = [title, "node".rjust(6) + "".join(str(i).rjust(width) for i in ids)]
    lines += [f"{i:>5}:" + "".join(c.rjust(width) for c in row) for i, row in zip(ids, cells, strict=True)]
    return lines


@topo_app.command("list")
def list_cmd() -> None:
    """One line per shipped machine: name, nodes, cpus, memory, calibration, source.

    The calibration column is the calibration file the machine names (with "(missing)" when it is not there),
    or "uncalibrated": such a machine is timed only with --calibration or, on purpose, --nominal.
    """
    from numasim.topology.library import list_shipped

    items = list_shipped()
    if not items:
        typer.echo("no shipped machines found", err=True)
        raise typer.Exit(1)
    width = max(len(s.name) for s in items)
    cals = [
        (s.calibration if s.calibration_exists else f"{s.calibration} (missing)") if s.calibration
        else "uncalibrated"
        for s in items
    ]
    cal_width = max(len(c) for c in cals)
    for s, cal in zip(items, cals, strict=True):
        typer.echo(
            f"{s.name:<{width}}  {s.nodes:>3} nodes  {s.cpus:>4} cpus  {format_size(s.memory_bytes):>10}  "
            f"{cal:<{cal_width}}  {s.source}"
        )


@topo_app.command("show")
def show_cmd(machine: str = typer.Argument(..., metavar="MACHINE", help=_MACHINE_HELP)) -> None:
    """The machine as an lstopo-like tree, then its caches, links and switches."""
    from numasim.topology.render import render_tree

    m, origin = _timed(machine, _load(machine))
    head, _, rest = render_tree(m).partition("\n")
    typer.echo(f"{head}\nTiming: {origin}\n{rest}" if rest else f"{head}\nTiming: {origin}")


@topo_app.command("hardware")
def hardware_cmd(
    machine: str = typer.Argument(..., metavar="MACHINE", help=_MACHINE_HELP),
    style: str | None = typer.Option(
        None, "--style", help="numactl version whose distance-table layout to print (2.0.18 or 2.0.19; default: "
        "that of the numactl text the machine was read from, else 2.0.19)."
    ),
) -> None:
    """Exactly what 'numactl --hardware' prints on this machine."""
    from numasim.topology.io.numactl import numactl_hardware_for

    if style is not None and style not in _STYLES:
        raise typer.BadParameter(f"{style!r}: expected one of {', '.join(_STYLES)}", param_hint="'--style'")
    _echo_block(numactl_hardware_for(_load(machine), style=style))  # type: ignore[arg-type]


@topo_app.command("import")
def import_cmd(
    source: str = typer.Argument(..., metavar="FILE", help="numactl --hardware text, sysfs node tree, hwloc XML, lscpu output, kerncraft machine file (YAML) or TOML."),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write (.toml; .xml hwloc; .txt numactl)."),
    force: bool = typer.Option(False, "--force", help="Replace OUTPUT if it exists."),
    cpu: str | None = typer.Option(
        None, "--cpu", help="The processor (\"Intel Xeon Gold 6240\", lscpu's Model name): timing numbers from the "
        "platform catalog. Picked up from hwloc XML, lscpu output, a kerncraft file, or lscpu text in or beside numactl "
        "text or a sysfs tree, when not given."
    ),
    cxl: int = typer.Option(0, "--cxl", min=0, help="Add this many CXL memory expanders (cpu-less nodes), timed from "
                            "the catalog's CXL section; needs a processor the catalog knows."),
    cxl_device: str | None = typer.Option(None, "--cxl-device", help="The expander model (`numasim catalog cxl`); "
                                          "default: the catalog's default device, said in the file."),
    cxl_socket: int = typer.Option(0, "--cxl-socket", min=0, help="Socket whose first node the expanders attach to."),
    cxl_size_gib: int = typer.Option(128, "--cxl-size-gib", min=1, help="Memory of each expander, GiB."),
) -> None:
    """Read a machine in any known format and write it as our TOML (or another format, by suffix).

    When the processor is known (``--cpu``, or named by the source), links, controllers and caches come from
    the platform catalog instead of the importer's placeholders, and the file names the processor, so that
    ``--catalog`` times it with the catalog's core limits and clock too (a machine file has no place for them)."""
    from numasim.errors import NumasimError
    from numasim.timing.catalog import catalog_machine
    from numasim.topology.io import detect_format, save_machine

    _check_output(output, force)
    machine = _load(source)
    loose = {n.id for n in machine.nodes if n.has_memory and not n.has_cpus and n.memory_kind.value == "dram"}
    # our TOML (a file, or a shipped machine's name) already says what its numbers are: a format conversion
    src = _source(source)
    src_format = detect_format(src) if src is not None else "toml"
    ours = src_format == "toml"

    def timed_by_catalog(cpu_model: str | None) -> Machine:
        return catalog_machine(machine, cpu_model, cxl_device=cxl_device, cxl_expanders=cxl, cxl_socket=cxl_socket,
                               cxl_size_bytes=cxl_size_gib * 2**30)

    if (cxl or cxl_device is not None) and cpu is None and not machine.cpu_model:
        raise typer.BadParameter("CXL expanders are timed from the catalog: name the processor with --cpu",
                                 param_hint="'--cxl'")
    if (cxl or cxl_device is not None) and cpu is None:
        cpu = machine.cpu_model  # the user asked for catalog timing of CXL memory: an unusable cpu is an error
    how = "nominal placeholder timing (no processor named: pass --cpu for catalog priors)"
    if ours and cpu is None:
        # a format conversion: our TOML already says what its numbers are; numactl's text has no place for them
        # (hwloc XML keeps the controllers' as memattrs, a sysfs tree as HMAT attributes)
        from numasim.topology.io.detect import format_for_suffix

        how = ("numactl text holds no timing: the file's numbers are not in it"
               if format_for_suffix(output) == "numactl" else "timing numbers as in the file")
    elif cpu is not None:
        machine = timed_by_catalog(cpu)  # the user asked: an unknown processor is an error
        how = f"timing from the platform catalog for {cpu!r}"
    elif machine.cpu_model:
        try:
            machine = timed_by_catalog(None)
            how = f"timing from the platform catalog for {machine.cpu_model!r} (named by {Path(source).name})"
        except NumasimError as exc:
            how = f"nominal placeholder timing: {machine.cpu_model!r} is not usable from the catalog ({exc})"
    save_machine(machine, output)
    cxl_nodes = [n.id for n in machine.nodes if n.memory_kind.value == "cxl"]
    if cxl_nodes:
        how += f"; CXL memory nodes {cxl_nodes}"
        taken = [i for i in cxl_nodes if i in loose]
        if taken:
            how += (f" ({'node' if len(taken) == 1 else 'nodes'} {', '.join(map(str, taken))}: memory without cpus, "
                    "taken for CXL expanders behind the socket nearest by the firmware's distances; the file's "
                    "description says which device times them, --cxl-device names another)")
    typer.echo(f"wrote {output}: {machine.name}, {len(machine.nodes)} nodes, {len(machine.cpus)} cpus; {how}")
    from numasim.topology.render import memory_side_cache_note

    if note := memory_side_cache_note(machine):  # a timing the importer cannot give: said where the user looks
        typer.echo(f"warning: {note}", err=True)
    if note := _larger_than_a_socket(machine):
        typer.echo(f"warning: {note}", err=True)
    if src_format == "lscpu":  # an assumption the user must see, not only the file (every node gets the same size)
        typer.echo(f"warning: lscpu gives no memory sizes: {machine.nodes[0].memory_bytes / 2**30:g} GiB a node "
                   "assumed (import numactl --hardware, which has them, or edit the nodes' memory_bytes)", err=True)


def _larger_than_a_socket(machine: Machine) -> str | None:
    """A node with more cpus than a socket of the named processor has threads: a wrong ``--cpu`` (or a firmware
    that interleaves sockets into one node, which the catalog's socket layout does not model)."""
    from numasim.timing.catalog import match_cpu
    from numasim.timing.catalog.machine import catalog_timed_by

    if not machine.cpu_model or catalog_timed_by(machine) is None:
        return None

    sku = match_cpu(machine.cpu_model).sku
    big = max(machine.nodes, key=lambda n: len(n.cpus))
    if sku is None or len(big.cpus) <= sku.threads:
        return None
    return (f"node {big.id} has {len(big.cpus)} cpus, more than a socket of {sku.model} has threads ({sku.threads}): "
            "is the processor right? (a node that spans sockets, as under a firmware's socket interleaving, is timed "
            "as one socket)")


@topo_app.command("draw")
def draw_cmd(
    machine: str = typer.Argument(..., metavar="MACHINE", help=_MACHINE_HELP),
    output: Path = typer.Option(..., "-o", "--output", help="Figure file: .png, .svg or .pdf."),
    layout: str = typer.Option("kamada-kawai", "--layout", help="kamada-kawai (deterministic) or spring."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of the spring layout."),
    force: bool = typer.Option(False, "--force", help="Replace OUTPUT if it exists."),
) -> None:
    """Draw the link graph: nodes, switches, links labelled with latency and bandwidth."""
    from numasim.topology.plots import draw_topology

    if layout not in ("kamada-kawai", "spring"):
        raise typer.BadParameter(f"{layout!r}: expected kamada-kawai or spring", param_hint="'--layout'")
    _check_figure_output(output, force)
    m, origin = _timed(machine, _load(machine))
    save_figure(draw_topology(m, kind=layout, seed=seed, timing_source=origin), output)
    typer.echo(f"wrote {output} (timing: {origin})")


@topo_app.command("distances")
def distances_cmd(
    machine: str = typer.Argument(..., metavar="MACHINE", help=_MACHINE_HELP),
    timing: bool = typer.Option(False, "--timing", help="Distances derived from link timing, not the firmware SLIT."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Also write a heatmap (.png, .svg, .pdf)."),
    force: bool = typer.Option(False, "--force", help="Replace OUTPUT if it exists."),
) -> None:
    """The node distance table (firmware SLIT by default), and optionally its heatmap."""
    from numasim.topology.distances import slit, timing_distances

    if output is not None:
        _check_figure_output(output, force)
    m = _load(machine)
    uses_timing = timing or m.firmware_slit is None
    origin = ""
    if uses_timing:
        m, origin = _timed(machine, m)
    if timing:
        table, title = timing_distances(m), f"SLIT derived from link timing; {origin}"
    elif m.firmware_slit is not None:
        table, title = slit(m), "firmware SLIT (what the kernel sees)"
    else:
        table, title = slit(m), f"SLIT (no firmware table in the machine file: derived from link timing; {origin})"
    for line in _table(f"{m.name}: {title}", m.node_ids, np.array(table, dtype=float), ".0f"):
        typer.echo(line)
    if output is not None:
        from numasim.topology.plots import slit_heatmap

        save_figure(slit_heatmap(m, which="timing" if timing else "firmware"), output)
        typer.echo(f"wrote {output}")


@topo_app.command("latency")
def latency_cmd(machine: str = typer.Argument(..., metavar="MACHINE", help=_MACHINE_HELP)) -> None:
    """Initiator x target idle latency (ns), bottleneck bandwidth (GB/s) and hop counts."""
    from numasim.topology.routing import bandwidth_table_gb_s, hop_table, latency_table_ns, routing

    # Show what timing results on this machine use: the fitted numbers, not the file's provisional ones.
    m, origin = _timed(machine, _load(machine))
    r = routing(m)
    ids = m.node_ids
    typer.echo(f"{m.name}: rows = initiator node (cpus), columns = target node (memory); timing from {origin}")
    blocks = [
        _table("idle latency (ns)", ids, latency_table_ns(m, r), ".1f"),
        _table("bandwidth (GB/s, bottleneck of controller and links)", ids, bandwidth_table_gb_s(m, r), ".1f"),
        _table("hops (links on the route)", ids, hop_table(m, r).astype(float), ".0f"),
    ]
    for k, block in enumerate(blocks):
        if k:
            typer.echo("")
        for line in block:
            typer.echo(line)
    cpuless = [n.id for n in m.nodes if not n.has_cpus]
    if cpuless:
        typer.echo(f"\nnode(s) {', '.join(map(str, cpuless))} have no cpus: their rows are what a device there would see")


def _requested_mode(snc: str | None, nps: str | None, cod: str | None) -> tuple[str, str]:
    given = [(family, value) for family, value in (("snc", snc), ("nps", nps), ("cod", cod)) if value is not None]
    if len(given) != 1:
        raise typer.BadParameter("give exactly one of --snc off|2|3|4, --nps 1|2|4, --cod on|off", param_hint="'--snc'")
    return given[0]


def _catalog_reconfigure_defaults(
    m: Machine, channels: int | None, die_bw: float | None, prior_source: str
) -> tuple[int | None, float | None, str]:
    """Channels per socket and die-to-die bandwidth from the platform catalog when the machine names its
    processor and the options leave them open (the channels only check that the new mode divides them); the
    recorded prior source says when the die-to-die bandwidth came from there."""
    if m.cpu_model is None or (channels is not None and die_bw is not None):
        return channels, die_bw, prior_source
    from numasim.errors import NumasimError
    from numasim.timing.catalog import match_cpu

    try:
        found = match_cpu(m.cpu_model)
    except NumasimError:
        return channels, die_bw, prior_source
    used = []
    if channels is None:
        channels = (found.sku.channels if found.sku and found.sku.channels else None) or (
            found.platform.memory.channels_per_socket
        )
    per_socket = [sum(1 for n in m.nodes if n.socket == s) for s in {n.socket for n in m.nodes}]
    # Only a split of one-node sockets lacks an on-die link; a clustered machine has its own (measured) one.
    ic = found.platform.interconnect
    if die_bw is None and max(per_socket) == 1 and ic is not None and ic.die_to_die_bandwidth_gb_s is not None:
        die_bw = ic.die_to_die_bandwidth_gb_s
        used.append(f"die-to-die {die_bw:g} GB/s")
    if used:
        what = f"platform catalog {found.label}: " + ", ".join(used)
        prior_source = f"{prior_source}; {what}" if prior_source else what
    return channels, die_bw, prior_source


@topo_app.command("reconfigure")
def reconfigure_cmd(
    machine: str = typer.Argument(..., metavar="MACHINE", help=_MACHINE_HELP),
    output: Path = typer.Option(..., "-o", "--output", help="The machine in the new mode (.toml)."),
    snc: str | None = typer.Option(None, "--snc", help="Intel sub-NUMA clustering: off, 2, 3 or 4."),
    nps: str | None = typer.Option(None, "--nps", help="AMD nodes per socket: 1, 2 or 4."),
    cod: str | None = typer.Option(None, "--cod", help="Cluster-on-Die (Haswell-EP/Broadwell-EP): on or off."),
    calibration: Path | None = typer.Option(
        None, "--calibration", help="Calibration to carry across (default: the one the machine names, if any)."
    ),
    calibration_out: Path | None = typer.Option(
        None, "--calibration-out", help="Where the transferred calibration goes (default: OUTPUT with .cal.json)."
    ),
    die_latency_ns: float | None = typer.Option(
        None, "--die-latency-ns", help="Splitting: near-to-far on-die latency (ns), a prior when the source has none."
    ),
    die_bandwidth_gb_s: float | None = typer.Option(
        None, "--die-bandwidth-gb-s", help="Splitting: bandwidth of a cluster's on-die link (GB/s), likewise."
    ),
    prior_source: str = typer.Option("", "--prior-source", help="Where the on-die numbers come from (recorded)."),
    threads_per_core: int | None = typer.Option(
        None, "--threads-per-core", min=1, help="Splitting one socket whose cpus are one run of numbers."
    ),
    channels_per_socket: int | None = typer.Option(
        None, "--channels-per-socket", min=1, help="Check that the DRAM channels divide among the new nodes."
    ),
    force: bool = typer.Option(False, "--force", help="Replace the outputs if they exist."),
) -> None:
    """The same hardware in another SNC/NPS/CoD mode, with its calibration carried across.

    Writes the machine (naming its new calibration) and the transferred calibration together: both or neither.
    Without a calibration (none given, none named by the machine) only the machine is written, its nominal
    numbers carried by the same rules.
    """
    import os

    from numasim.fileio import atomic_write_texts
    from numasim.timing.model import nominal_calibration
    from numasim.timing.resolve import resolve_calibration
    from numasim.timing.transfer import transfer_calibration
    from numasim.topology.cluster_mode import parse_mode
    from numasim.topology.io.toml_format import dumps_machine

    family, value = _requested_mode(snc, nps, cod)
    target = parse_mode(family, value)
    if output.suffix.lower() != ".toml":
        raise typer.BadParameter(f"{output}: the machine is written as TOML; name it .toml", param_hint="'-o' / '--output'")
    _check_output(output, force)
    m = _load(machine)
    machine_path = _source(machine)
    timed_by_cal = calibration is not None or m.calibration is not None
    cal = resolve_calibration(m, calibration, machine_path=machine_path) if timed_by_cal else nominal_calibration(m)
    channels_per_socket, die_bandwidth_gb_s, prior_source = _catalog_reconfigure_defaults(
        m, channels_per_socket, die_bandwidth_gb_s, prior_source
    )
    moved = transfer_calibration(
        m, cal, target, die_latency_ns=die_latency_ns, die_bandwidth_gb_s=die_bandwidth_gb_s,
        prior_source=prior_source, threads_per_core=threads_per_core, channels_per_socket=channels_per_socket,
    )
    rc = moved.reconfiguration
    files: dict[Path, str] = {}
    if timed_by_cal:
        cal_path = calibration_out or output.with_name(output.name[: -len(output.suffix)] + ".cal.json")
        if cal_path.resolve() == output.resolve():
            raise typer.BadParameter("the calibration cannot overwrite the machine", param_hint="'--calibration-out'")
        _check_output(cal_path, force)
        name = os.path.relpath(cal_path.resolve(), output.resolve().parent)
        # The machine file keeps the structure with the transferred numbers; it names its calibration.
        files[output] = dumps_machine(moved.machine.model_copy(update={"calibration": name}))
        files[cal_path] = moved.calibration.model_dump_json(indent=2) + "\n"
    else:
        files[output] = dumps_machine(moved.machine.model_copy(update={"calibration": None}))
    atomic_write_texts(files)
    new = moved.machine
    typer.echo(
        f"wrote {output}: {new.name}, {rc.source_mode.label} -> {rc.target_mode.label}, "
        f"{len(new.nodes)} nodes, {len(new.cpus)} cpus"
    )
    if timed_by_cal:
        typer.echo(f"wrote {cal_path}: calibration {moved.calibration.id} (transferred from {cal.id})")
    else:
        typer.echo("no calibration to carry: the machine's nominal numbers were transferred (uncalibrated)")
    for prior in moved.calibration.provenance.priors[len(cal.provenance.priors):]:
        typer.echo(f"prior: {prior.parameter} = {prior.value:g} {prior.unit} ({prior.source})")
