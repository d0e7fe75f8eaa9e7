"""Solve each platform's stream depth on its kerncraft file's one-core load, and compare with the catalog's.

The catalog's ``[stream] prefetch_lines`` (numasim/timing/catalog/data/*.toml) is the depth at which numasim's replay
of one core's likwid-bench load comes closest to the measured bandwidth
(:func:`numasim.calibrate.scaling.solve_stream_depth`). A change to the engine or to another prior of those
platforms can move it; ``tests/validation/test_suite.py`` checks that it has not, and this prints the table::

    .venv/bin/python experiments/validation/stream_depth.py
"""

from __future__ import annotations

from pathlib import Path

from numasim.calibrate.parsers.kerncraft import parse_kerncraft
from numasim.calibrate.scaling import kerncraft_calibration, solve_stream_depth
from numasim.errors import NumasimError

KERNCRAFT = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "kerncraft"

for f in sorted(KERNCRAFT.glob("*.yml")):
    try:
        r = parse_kerncraft(f)
        cal = kerncraft_calibration(r)
        depth, measured, replayed = solve_stream_depth(r, cal)
    except NumasimError as exc:
        print(f"{f.name:36s} not solved: {exc}")
        continue
    print(f"{f.name:36s} {cal.provenance.platform!s:24s} catalog {cal.core.prefetch_distance_lines:3d}  solved {depth:3d}"
          f"  ({measured:.2f} GB/s measured, {replayed:.2f} replayed)")
