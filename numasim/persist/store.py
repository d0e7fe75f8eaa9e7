"""Named persistent machines: one directory each, one command at a time.

A machine ``NAME`` lives in ``ROOT/NAME/``: ``machine.json`` (how it was booted: the machine and the boot
options, so that ``reset`` can boot it again), ``kernel.state`` (:mod:`numasim.persist.state`), ``lock``, and
its /sys and /proc views, ``fs`` (:mod:`numasim.persist.views`), written again whenever the state is.
``ROOT`` is ``$NUMASIM_STATE_DIR``, else ``$XDG_STATE_HOME/numasim/machines``, else
``~/.local/state/numasim/machines``. A command on a machine holds an exclusive ``flock`` on its ``lock`` file
from loading the state to writing it back (atomically: a temporary file renamed over the old one), so concurrent
commands run one after the other and a killed command leaves the previous state.

Examples
--------
>>> import tempfile
>>> store = MachineStore(tempfile.mkdtemp())
>>> m = store.start("box", BootOptions(machine="seed-003-2node"))
>>> with store.session("box") as kernel:
...     _ = kernel.spawn("sleep")
>>> with store.session("box") as kernel:
...     sorted(t.comm for t in kernel.tasks.values())
['sleep']
>>> [s.name for s in store.list()]
['box']
>>> store.stop("box"); store.list()
[]
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from numasim.errors import MachineStateError
from numasim.fileio import atomic_write_bytes, atomic_write_text
from numasim.persist import live
from numasim.persist.state import dump_kernel, load_kernel
from numasim.persist.views import VIEWS_LINK, views_root, write_views

if TYPE_CHECKING:
    from numasim.kernel.kernel import Kernel

__all__ = ["BootOptions", "StoredMachine", "MachineStore", "default_root", "resolve_machine_argument",
           "store_for_environment", "ENV_MACHINE", "ENV_STATE_DIR"]

ENV_MACHINE = "NUMASIM_MACHINE"
"""Names the persistent machine that ``numasim numactl`` / ``numastat`` act on."""
ENV_STATE_DIR = "NUMASIM_STATE_DIR"
"""Overrides where persistent machines live."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class BootOptions(BaseModel):
    """How a persistent machine boots (``machine.json``): the machine and the kernel's boot options."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: int = 1
    machine: str = Field(description="A shipped machine name, or the absolute path of a machine file.")
    kernel_version: str = "6.12"
    thp: str = "madvise"
    sysctl: tuple[str, ...] = ()
    page_cache: tuple[str, ...] = ()
    kswapd: bool = False
    buddyinfo: str | None = Field(default=None, description="The text of a measured /proc/buddyinfo.")

    def boot(self) -> Kernel:
        """A freshly booted kernel with these options (errors name the option, as the command line's do)."""
        from numasim.kernel.buddy import parse_buddyinfo
        from numasim.kernel.config import KernelConfig, parse_page_cache_arg
        from numasim.kernel.kernel import Kernel
        from numasim.kernel.sysctl import parse_sysctl_arg
        from numasim.kernel.version import check_modelled
        from numasim.topology.io import load_machine

        check_modelled(self.kernel_version)
        if self.thp not in ("always", "madvise", "never"):
            raise MachineStateError(f"--thp {self.thp!r}: expected always, madvise or never")
        cache = dict(parse_page_cache_arg(text) for text in self.page_cache)
        config = KernelConfig(
            version=self.kernel_version, thp_mode=self.thp, kswapd_enabled=self.kswapd,
            reclaimable_page_cache_bytes=cache or None,
            buddyinfo=parse_buddyinfo(self.buddyinfo, "--buddyinfo") if self.buddyinfo is not None else None,
        )  # fmt: skip
        config = config.with_sysctls([parse_sysctl_arg(text) for text in self.sysctl])
        return Kernel(load_machine(self.machine), config)


class StoredMachine(BaseModel):
    """One persistent machine as :meth:`MachineStore.list` reports it."""

    model_config = ConfigDict(frozen=True)

    name: str
    directory: Path
    options: BootOptions


def default_root() -> Path:
    """Where persistent machines live (module docstring)."""
    if os.environ.get(ENV_STATE_DIR):
        return Path(os.environ[ENV_STATE_DIR]).resolve()  # absolute: shims and `machine env` run anywhere
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return (Path(base) / "numasim" / "machines").resolve()


class MachineStore:
    """The persistent machines under ``root`` (default :func:`default_root`)."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_root()

    def directory(self, name: str) -> Path:
        if not _NAME.fullmatch(name):
            raise MachineStateError(
                f"machine name {name!r}: use letters, digits, '.', '_' and '-' (at most 64, not starting with "
                "'.', '_' or '-')"
            )
        return self.root / name

    def options(self, name: str) -> BootOptions:
        """How machine ``name`` was started."""
        return self._options(name)

    def _options(self, name: str) -> BootOptions:
        path = self.directory(name) / "machine.json"
        if not path.parent.is_dir():
            raise MachineStateError(
                f"machine {name} is not started (no {path.parent}); start it with "
                f"`numasim machine start MACHINE --name {name}`"
            )
        try:
            return BootOptions.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise MachineStateError(
                f"{path}: unreadable ({exc.__class__.__name__}); `numasim machine stop {name}` and start it again"
            ) from None

    def start(self, name: str, options: BootOptions) -> StoredMachine:
        """Boot a kernel and save it as machine ``name``; an existing machine of that name is an error."""
        directory = self.directory(name)
        kernel = options.boot()  # boot errors before anything is written
        directory.mkdir(parents=True, exist_ok=True)  # a directory without machine.json is a leftover: reuse it
        with open(directory / "lock", "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if (directory / "machine.json").exists():
                    raise MachineStateError(
                        f"machine {name} is already started ({directory}); `numasim machine stop {name}` first, or "
                        f"`numasim machine reset {name}` to reboot it"
                    )
                # the state first, machine.json last: a machine is started once machine.json is there
                atomic_write_bytes(directory / "kernel.state", dump_kernel(kernel))
                write_views(directory, kernel)
                atomic_write_text(directory / "machine.json", options.model_dump_json(indent=1) + "\n")
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        return StoredMachine(name=name, directory=directory, options=options)

    @contextmanager
    def _locked(self, name: str) -> Iterator[Path]:
        directory = self.directory(name)
        self._options(name)  # a clear error for a machine that is not started
        with open(directory / "lock", "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if not (directory / "machine.json").exists():  # stopped while we waited
                    raise MachineStateError(f"machine {name} was stopped")
                yield directory
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    @contextmanager
    def session(self, name: str, *, save: bool = True) -> Iterator[Kernel]:
        """The machine's kernel, locked for this command; saved back (``save``) when the block ends without an
        exception (an exception leaves the state as it was). A reader (``list``, a plain ``numastat``) passes
        ``save=False``."""
        with self._locked(name) as directory:
            path = directory / "kernel.state"
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise MachineStateError(f"{path}: {exc.strerror}; `numasim machine reset {name}` boots it afresh") from None
            kernel = load_kernel(data, str(path), f"`numasim machine reset {name}` boots it afresh")
            reaped = live.reap(directory, kernel)  # programs whose shim was killed: their memory goes first
            yield kernel
            if save or reaped:
                atomic_write_bytes(path, dump_kernel(kernel))
                write_views(directory, kernel)

    def reset(self, name: str) -> StoredMachine:
        """Boot machine ``name`` afresh with the options it was started with (its old state is dropped)."""
        options = self._options(name)
        kernel = options.boot()
        with self._locked(name) as directory:
            atomic_write_bytes(directory / "kernel.state", dump_kernel(kernel))
            (directory / live.FILE_NAME).unlink(missing_ok=True)  # its processes went with the old kernel
            write_views(directory, kernel)
        return StoredMachine(name=name, directory=self.directory(name), options=options)

    def views(self, name: str) -> Path:
        """The current generation of machine ``name``'s /sys and /proc views (written first if a machine started
        by an older numasim has none)."""
        directory = self.directory(name)
        if not (directory / VIEWS_LINK).exists():
            with self.session(name, save=False) as kernel:
                write_views(directory, kernel)
        return views_root(directory)

    def stop(self, name: str) -> None:
        """Stop machine ``name``: its state is removed (also when machine.json or the state is unreadable)."""
        directory = self.directory(name)
        if not (directory / "machine.json").exists():
            raise MachineStateError(f"machine {name} is not started (no {directory / 'machine.json'})")
        with open(directory / "lock", "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:  # machine.json first: from then on the machine is stopped, whatever is left behind
                for leftover in ("machine.json", "kernel.state"):
                    (directory / leftover).unlink(missing_ok=True)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        shutil.rmtree(directory, ignore_errors=True)  # a command still holding the lock file may keep the directory

    def list(self) -> list[StoredMachine]:
        """Every started machine, by name."""
        if not self.root.is_dir():
            return []
        out = []
        for d in sorted(self.root.iterdir()):
            if d.is_dir() and _NAME.fullmatch(d.name) and (d / "machine.json").exists():
                try:
                    out.append(StoredMachine(name=d.name, directory=d, options=self._options(d.name)))
                except MachineStateError:
                    continue
        return out


def resolve_machine_argument(machine: str) -> str:
    """A shipped machine name as given; a machine file as its absolute path (the state must not depend on the
    directory a later command runs in)."""
    from numasim.topology.io import machine_source

    source = machine_source(machine)  # a path that does not exist, or an unknown name: the usual error
    return machine if source is None else str(source.resolve())


def store_for_environment() -> tuple[MachineStore, str] | None:
    """The store and machine name ``NUMASIM_MACHINE`` selects, or None when it is unset or empty."""
    name = os.environ.get(ENV_MACHINE, "")
    return (MachineStore(), name) if name else None

