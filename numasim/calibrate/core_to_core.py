"""Core-to-core transfer latencies of public machines, and what a calibration makes of them.

A core-to-core ping-pong (two pinned threads taking turns to flip one shared flag with compare-and-swap) times
one move of a line the other core holds modified per half round trip: the transfer mlc's ``--c2c_latency`` calls
a HITM, and what :class:`~numasim.timing.model.CoherenceTiming` times. A measurement file
(``tests/data/measurements/core_to_core``) keeps, per machine, the median of each tier of cpu pairs:

* ``local``: two cores of one last-level cache instance (a socket's L3 on Intel, a core complex's on AMD);
* ``socket``: two cores of one socket, of different instances, the flag homed on that socket;
* ``socket_home_away``: the same, the flag homed on the other socket (the request visits it);
* ``remote``: two cores of different sockets (each round trip moves the line towards its home and away).

:func:`predict_tiers` replays each tier on a machine with the virtual mlc's transfer test (through the engine);
:func:`core_to_core_machine` builds the catalog machine a file's entry is judged on.

Examples
--------
>>> from pathlib import Path
>>> f = load_core_to_core(Path("tests/data/measurements/core_to_core/nviennot-core-to-core-latency.toml"))
>>> m = next(x for x in f.machine if "7R13" in x.label)
>>> sorted(m.tiers()), m.tiers()["socket"].median_ns
(['local', 'remote', 'socket', 'socket_home_away'], 107.6)
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, ValidationError

from numasim.errors import CalibrationError
from numasim.timing.model import Calibration
from numasim.topology.model import Machine

__all__ = [
    "TIERS", "CoreToCoreTier", "CoreToCoreMachine", "CoreToCoreFile", "load_core_to_core", "core_to_core_machine",
    "tier_pairs", "predict_tiers",
]

TIERS = ("local", "socket", "socket_home_away", "remote")
"""The tiers of cpu pairs a file may hold, nearest first (see the module docstring)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CoreToCoreTier(_Strict):
    """One tier's one-way latency over its pairs of cpus."""

    median_ns: PositiveFloat
    pairs: PositiveInt
    p10_ns: PositiveFloat
    p90_ns: PositiveFloat


class CoreToCoreMachine(_Strict):
    """One measured machine: its layout as the source states it and its tiers (those it has)."""

    label: Annotated[str, Field(min_length=1)]
    csv: Annotated[str, Field(min_length=1)]
    """The source's result file (its path in the source repository)."""
    cpu: Annotated[str, Field(min_length=1)]
    """The processor as ``/proc/cpuinfo`` names it (what :func:`numasim.timing.catalog.match_cpu` reads)."""
    sockets: PositiveInt
    cores_per_socket: PositiveInt
    threads_per_core: PositiveInt = 2
    local: CoreToCoreTier
    socket: CoreToCoreTier | None = None
    socket_home_away: CoreToCoreTier | None = None
    remote: CoreToCoreTier | None = None

    def tiers(self) -> dict[str, CoreToCoreTier]:
        """The tiers measured, nearest first."""
        return {t: v for t in TIERS if (v := getattr(self, t)) is not None}


class CoreToCoreFile(_Strict):
    source: Annotated[str, Field(min_length=1)]
    url: Annotated[str, Field(min_length=1)]
    commit: Annotated[str, Field(min_length=1)]
    machine: list[CoreToCoreMachine]


def load_core_to_core(path: Path) -> CoreToCoreFile:
    """Read a core-to-core measurement file; a malformed one is an error naming the field and value."""
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CalibrationError(f"{path}: not a readable TOML core-to-core file ({exc})") from exc
    try:
        return CoreToCoreFile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise CalibrationError(f"{path}: {where} = {first.get('input')!r}: {first['msg']}") from exc


def core_to_core_machine(entry: CoreToCoreMachine) -> Machine:
    """The entry's layout (one NUMA node a socket: the sources do not say more) timed with its processor's
    catalog priors, as the validation suite builds its public mlc machines."""
    from numasim.calibrate.public_mlc import PublicMlcCase, public_machine

    slug = "c2c-" + "".join(ch if ch.isalnum() else "-" for ch in entry.cpu.lower()).strip("-")
    return public_machine(PublicMlcCase(entry.label, slug, entry.cpu, entry.sockets, 1, entry.cores_per_socket,
                                        entry.threads_per_core))  # fmt: skip


def tier_pairs(machine: Machine, calibration: Calibration) -> dict[str, list[tuple[int, int, int]]]:
    """Per tier the machine has, the transfers that time it: (writer cpu, reader cpu, home node) each; a tier's
    latency is their mean (``remote``: one homed at the writer, one at the reader, as a ping-pong's round trip).

    Two cores, never two threads of one core; ``local`` needs a coherence domain of two cores
    (:func:`numasim.engine.caches.coherence_domains`), ``socket`` a socket of two domains, ``remote`` two sockets.
    """
    from numasim.engine.caches import coherence_domains
    from numasim.engine.cores import core_of_cpus

    cpus = sorted(machine.cpu_to_node)
    core = core_of_cpus(cpus, calibration.core.threads_per_core)
    llc = dict(zip(cpus, coherence_domains(machine, calibration, cpus), strict=True))

    def socket(cpu: int) -> int | None:
        return machine.node(machine.cpu_to_node[cpu]).socket

    def memory(sock: int | None) -> int:
        return next(n.id for n in machine.nodes if n.controller is not None and n.socket == sock)

    w = cpus[0]
    home = machine.cpu_to_node[w]
    out: dict[str, list[tuple[int, int, int]]] = {}
    mate = next((c for c in cpus if llc[c] == llc[w] and core[c] != core[w]), None)
    if mate is not None:
        out["local"] = [(w, mate, home)]
    other = next((c for c in cpus if socket(c) == socket(w) and llc[c] != llc[w]), None)
    far = next((c for c in cpus if socket(c) != socket(w)), None)
    if other is not None:
        out["socket"] = [(w, other, memory(socket(w)))]
        if far is not None:
            out["socket_home_away"] = [(w, other, memory(socket(far)))]
    if far is not None:
        out["remote"] = [(w, far, home), (far, w, home)]
    return out


def predict_tiers(machine: Machine, calibration: Calibration, seed: int = 0) -> dict[str, float]:
    """What the calibration makes of each tier (ns), through the engine: the virtual mlc's transfer test
    (:func:`numasim.tools.mlc.c2c_transfer_ns`) on each of :func:`tier_pairs`, averaged per tier."""
    from numasim.tools.context import tool_context
    from numasim.tools.mlc import c2c_transfer_ns

    ctx = tool_context(machine, calibration, seed=seed)
    return {
        tier: sum(c2c_transfer_ns(ctx, w, r, home) for w, r, home in pairs) / len(pairs)
        for tier, pairs in tier_pairs(machine, calibration).items()
    }
