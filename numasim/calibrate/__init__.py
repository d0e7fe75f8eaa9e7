"""Calibration and validation: parse real measurements, fit the link and controller models, save a
:class:`Calibration` with provenance, and check it against held-out measurements.

Names are imported on first use (the fitters pull in scipy), so ``import numasim.calibrate`` stays cheap.
The functions ``validate`` and ``probe`` live in the submodules of the same names
(``from numasim.calibrate.validate import validate``), which a package attribute would shadow; so does
``holdout`` (``from numasim.calibrate.holdout import holdout``).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "Calibration",
    "LoadedLatencyCurve",
    "default_curve",
    "nominal_calibration",
    "apply_calibration",
    "load_calibration",
    "save_calibration",
    "detect_measurement_format",
    "parse_measurement",
    "load_measurements",
    "calibrate",
    "CalibrationReport",
    "fit_latency",
    "fit_bandwidth",
    "fit_loaded_latency_curve",
    "fit_cache_levels",
    "ValidationReport",
    "HoldoutReport",
    "nominal_priors",
    "resolve_calibration",
]

_WHERE = {
    "Calibration": "model",
    "LoadedLatencyCurve": "model",
    "default_curve": "model",
    "nominal_calibration": "model",
    "apply_calibration": "model",
    "load_calibration": "model",
    "save_calibration": "model",
    "detect_measurement_format": "parsers",
    "parse_measurement": "parsers",
    "load_measurements": "measurements",
    "calibrate": "pipeline",
    "CalibrationReport": "pipeline",
    "fit_latency": "fit",
    "fit_bandwidth": "fit",
    "fit_loaded_latency_curve": "curves",
    "fit_cache_levels": "curves",
    "ValidationReport": "validate",
    "HoldoutReport": "holdout",
    "nominal_priors": "priors",
    "resolve_calibration": "resolve",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        where = _WHERE[name]
        package = "numasim.timing" if where in ("model", "resolve") else "numasim.calibrate"
        return getattr(importlib.import_module(f"{package}.{where}"), name)
    raise AttributeError(f"module 'numasim.calibrate' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
