"""Which calibration a machine's timing depends on: the dependency rules.

1. An explicit calibration (``--calibration cal.json``) wins; it must be for the same machine name.
   ``--nominal`` (``nominal=True``) asks for the machine file's own numbers on purpose, ``--catalog``
   (``catalog=True``) for the platform catalog's priors of the machine's processor (no measurement at all,
   :func:`numasim.timing.catalog.catalog_calibration`); the three exclude each other.
2. Otherwise the machine file names its calibration (``calibration = "seed-001-e5-2680v2.cal.json"`` in its
   TOML); a relative name is looked up next to the machine file, then among the shipped topologies.
3. Otherwise it is an error that says how to make one. Timing is never silently nominal: use
   :func:`numasim.timing.model.nominal_calibration` on purpose for that.

These are the only rules: the command line, the workload runner and the virtual tools all call
:func:`resolve_calibration`.
"""

from __future__ import annotations

from pathlib import Path

from numasim.errors import CalibrationError
from numasim.timing.model import Calibration, load_calibration, nominal_calibration
from numasim.topology.model import Machine

__all__ = ["resolve_calibration", "calibration_candidates", "how_to_calibrate"]


def how_to_calibrate(machine: Machine) -> str:
    """The end of every "no calibration" message: how to make one, or how to time nominally on purpose (or, for
    a machine the platform catalog wrote, from the catalog's priors)."""
    from numasim.timing.catalog.machine import catalog_timed_by

    catalog = (f"; or pass --catalog to time it from the platform catalog's priors for {timed_by} (nothing of the "
               "box measured)") if (timed_by := catalog_timed_by(machine)) is not None else ""
    return (
        f"calibrate it from measurements: `numasim calibrate --machine {machine.name} mlc.txt -o "
        f"{machine.name}.cal.json`, then add `calibration = \"{machine.name}.cal.json\"` to the machine file "
        f"or pass --calibration; or pass --nominal to time it with the machine file's nominal numbers on purpose{catalog}"
    )


def calibration_candidates(machine: Machine, machine_path: str | Path | None = None) -> list[Path]:
    """Where the calibration the machine names would be found, in search order."""
    if not machine.calibration:
        return []
    name = Path(machine.calibration)
    if name.is_absolute():
        return [name]
    out = []
    if machine_path is not None:
        out.append(Path(machine_path).resolve().parent / name)
    from numasim.topology.library import shipped_dir

    out.append(shipped_dir() / name)
    out.append(Path.cwd() / name)
    return list(dict.fromkeys(out))


def resolve_calibration(
    machine: Machine,
    explicit: str | Path | Calibration | None = None,
    *,
    nominal: bool = False,
    catalog: bool = False,
    machine_path: str | Path | None = None,
) -> Calibration:
    """The calibration timing results on ``machine`` depend on (rules in the module docstring).

    Examples
    --------
    >>> from numasim.topology.builders import glueless
    >>> try:
    ...     resolve_calibration(glueless(2))
    ... except CalibrationError as e:
    ...     print(str(e).split(";")[0])
    machine glueless-2s-full names no calibration
    """
    chosen = [what for what, on in (("a calibration", explicit is not None), ("--nominal", nominal),
                                     ("--catalog", catalog)) if on]
    if len(chosen) > 1:
        raise CalibrationError(f"give one of a calibration, --nominal or --catalog, not {' and '.join(chosen)}")
    if nominal:
        return nominal_calibration(machine, notes="requested explicitly (--nominal)")
    if catalog:
        from numasim.timing.catalog import catalog_calibration

        return catalog_calibration(machine)
    if isinstance(explicit, Calibration):
        cal = explicit
        where = "the given calibration"
    elif explicit is not None:
        p = Path(explicit)
        if not p.is_file():
            raise CalibrationError(f"calibration file {p} does not exist; {how_to_calibrate(machine)}")
        cal = load_calibration(p)
        where = str(p)
    else:
        if not machine.calibration:
            raise CalibrationError(f"machine {machine.name} names no calibration; {how_to_calibrate(machine)}")
        tried = calibration_candidates(machine, machine_path)
        found = next((p for p in tried if p.is_file()), None)
        if found is None:
            raise CalibrationError(
                f"machine {machine.name} names calibration {machine.calibration!r}, but it is not at "
                f"{', '.join(str(p) for p in tried)}; {how_to_calibrate(machine)}"
            )
        cal = load_calibration(found)
        where = str(found)
    if cal.machine != machine.name:
        raise CalibrationError(
            f"{where}: calibration {cal.id} is for machine {cal.machine!r}, not {machine.name!r}"
        )
    return cal
