"""Typed results of a fit: parameters with uncertainty, residual per measured cell, warnings and assumptions."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["FittedParameter", "CellResidual", "FitResult", "mape_pct"]


@dataclass(frozen=True)
class FittedParameter:
    """One fitted number. ``stderr`` is ``nan`` when the data cannot say; ``identifiable`` is False when the
    measurements could not pin the parameter and an assumption (named in ``note``) decided it."""

    name: str
    value: float
    unit: str
    stderr: float = math.nan
    identifiable: bool = True
    note: str = ""


@dataclass(frozen=True)
class CellResidual:
    """A measured cell beside the model's value for it."""

    table: str
    row: str
    col: str
    measured: float
    model: float
    unit: str = ""

    @property
    def error_pct(self) -> float:
        """Signed relative error of the model, in percent of the measurement."""
        return 100.0 * (self.model - self.measured) / self.measured


def mape_pct(cells: list[CellResidual]) -> float:
    """Mean absolute percentage error over cells (``nan`` for none)."""
    if not cells:
        return math.nan
    return sum(abs(c.error_pct) for c in cells) / len(cells)


@dataclass
class FitResult:
    """What a fitter found and how sure it is."""

    parameters: list[FittedParameter] = field(default_factory=list)
    residuals: list[CellResidual] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)

    def extend(self, other: FitResult) -> None:
        self.parameters += other.parameters
        self.residuals += other.residuals
        self.warnings += other.warnings
        self.assumptions += other.assumptions

    def tables(self) -> list[str]:
        return sorted({c.table for c in self.residuals})

    def mape_pct(self, table: str | None = None) -> float:
        return mape_pct([c for c in self.residuals if table is None or c.table == table])

    def worst(self, table: str | None = None) -> CellResidual | None:
        cells = [c for c in self.residuals if table is None or c.table == table]
        return max(cells, key=lambda c: abs(c.error_pct)) if cells else None

    def parameter(self, name: str) -> FittedParameter:
        for p in self.parameters:
            if p.name == name:
                return p
        raise KeyError(name)
