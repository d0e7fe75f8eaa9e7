"""``numasim kernel zonelists|zoneinfo|buddyinfo MACHINE``: the simulated kernel's boot log and /proc views."""

from __future__ import annotations

from typing import Annotated

import typer

from numasim.cli.kernel import _apply_after_checked, build_kernel

__all__ = ["register", "kernel_app"]

kernel_app = typer.Typer(
    name="kernel",
    help="The simulated kernel's boot log and /proc views (zonelists, zoneinfo, buddyinfo).",
    no_args_is_help=True,
    add_completion=False,
)


def register(app: typer.Typer) -> None:
    app.add_typer(kernel_app, name="kernel")


MachineArg = Annotated[
    str, typer.Argument(help="Shipped machine name or machine file (TOML, numactl text, ...).")
]
VersionOpt = Annotated[str, typer.Option("--kernel-version", help="Kernel version to model (6.1 .. 6.12).")]
ThpOpt = Annotated[
    str,
    typer.Option(
        "--thp", metavar="always|madvise|never",
        help="Transparent hugepages at boot: never keeps min_free_kbytes as computed (khugepaged does not raise it).",
    ),
]
SysctlOpt = Annotated[
    list[str] | None,
    typer.Option("--sysctl", metavar="NAME=VALUE", help="Write a kernel knob before boot (repeatable, in order)."),
]
AfterOpt = Annotated[
    list[str] | None,
    typer.Option("--after", help='Run "numactl ARGS -- PROG ARGS" first (repeatable).'),
]
BuddyinfoOpt = Annotated[
    str | None,
    typer.Option("--buddyinfo", metavar="FILE", help="A measured /proc/buddyinfo: boot each zone's free memory "
                 "as fragmented as it shows."),
]


@kernel_app.command("zonelists")
def zonelists(
    machine: MachineArg, kernel_version: VersionOpt = "6.12", thp: ThpOpt = "madvise", sysctl: SysctlOpt = None
) -> None:
    """Print the zonelist fallback order of every node, as the kernel logs it at boot."""
    kernel = build_kernel(machine, kernel_version, thp, sysctl)
    typer.echo("\n".join(line.rstrip("\n") for line in kernel.pm.boot_log()))


@kernel_app.command("zoneinfo")
def zoneinfo(
    machine: MachineArg, after: AfterOpt = None, kernel_version: VersionOpt = "6.12", thp: ThpOpt = "madvise",
    sysctl: SysctlOpt = None, buddyinfo_file: BuddyinfoOpt = None,
) -> None:
    """Print /proc/zoneinfo of the simulated kernel (after running the --after commands)."""
    from numasim.kernel.procfs import format_zoneinfo, zone_views

    kernel = build_kernel(machine, kernel_version, thp, sysctl, buddyinfo=buddyinfo_file)
    _apply_after_checked(kernel, after or [])
    typer.echo(format_zoneinfo(zone_views(kernel)), nl=False)


@kernel_app.command("buddyinfo")
def buddyinfo(
    machine: MachineArg, after: AfterOpt = None, kernel_version: VersionOpt = "6.12", thp: ThpOpt = "madvise",
    sysctl: SysctlOpt = None, buddyinfo_file: BuddyinfoOpt = None,
) -> None:
    """Print /proc/buddyinfo of the simulated kernel (after running the --after commands)."""
    from numasim.kernel.procfs import format_buddyinfo, zone_views

    kernel = build_kernel(machine, kernel_version, thp, sysctl, buddyinfo=buddyinfo_file)
    _apply_after_checked(kernel, after or [])
    typer.echo(format_buddyinfo(zone_views(kernel)), nl=False)
