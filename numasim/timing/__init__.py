"""The timing model: every parameter the engine reads, as data below the engine.

:mod:`numasim.timing.model` holds the :class:`~numasim.timing.model.Calibration` (controllers, links, caches,
core limits, loaded-latency curves, with provenance); :mod:`numasim.timing.resolve` the one set of rules that
decides which calibration a machine's timing depends on; :mod:`numasim.timing.transfer` carries a calibration
across an SNC/CoD/NPS mode change. Fitting and validation (:mod:`numasim.calibrate`),
which replay the engine, sit above it; the engine (:mod:`numasim.engine`) reads it.
"""

from numasim.timing.model import (
    CacheTiming,
    Calibration,
    CoherenceTiming,
    ControllerTiming,
    CoreTiming,
    LinkTiming,
    LoadedLatencyCurve,
    Provenance,
    apply_calibration,
    default_curve,
    load_calibration,
    nominal_calibration,
    save_calibration,
)
from numasim.timing.resolve import resolve_calibration
from numasim.timing.transfer import TransferredCalibration, transfer_calibration

__all__ = [
    "CacheTiming",
    "Calibration",
    "CoherenceTiming",
    "ControllerTiming",
    "CoreTiming",
    "LinkTiming",
    "LoadedLatencyCurve",
    "Provenance",
    "apply_calibration",
    "default_curve",
    "load_calibration",
    "nominal_calibration",
    "resolve_calibration",
    "save_calibration",
    "TransferredCalibration",
    "transfer_calibration",
]
