"""The output of ``numasim probe``: a JSON file of per node-pair latency and bandwidth measured on a host."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from numasim.calibrate.parsers._text import NodeMatrix, read_source
from numasim.errors import FormatError

__all__ = ["ProbeResult", "parse_probe", "parse_probe_text", "looks_like_probe", "PROBE_FORMAT"]

PROBE_FORMAT = "numasim-probe"


class ProbeResult(BaseModel):
    """Measurements of one host; ``None`` cells were not measured (e.g. no numactl to place remote memory)."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["numasim-probe"] = "numasim-probe"
    version: int = 1
    host: str
    kernel: str = ""
    created: str = ""
    nodes: list[int]
    placement: Literal["numactl", "local-only"]
    latency_ns: list[list[float | None]]
    bandwidth_gb_s: list[list[float | None]]
    working_set_bytes: int
    repeats: int = 1
    notes: list[str] = []

    def _matrix(self, values: list[list[float | None]], unit: str) -> NodeMatrix:
        arr = np.array([[np.nan if v is None else v for v in row] for row in values], dtype=float)
        return NodeMatrix(rows=list(self.nodes), cols=list(self.nodes), values=arr, unit=unit)

    @property
    def source(self) -> str:
        return self.host

    @property
    def tool_version(self) -> str:
        return f"{PROBE_FORMAT} v{self.version}"

    @property
    def latency_matrix(self) -> NodeMatrix:
        return self._matrix(self.latency_ns, "ns")

    @property
    def bandwidth_matrix(self) -> NodeMatrix:
        """In MB/s, like mlc, so both feed the same fitter."""
        m = self._matrix(self.bandwidth_gb_s, "MB/s")
        return NodeMatrix(m.rows, m.cols, m.values * 1000.0, "MB/s")


def looks_like_probe(text: str) -> bool:
    return f'"format": "{PROBE_FORMAT}"' in text[:400] or f'"format":"{PROBE_FORMAT}"' in text[:400]


def parse_probe_text(text: str, source: str = "<text>") -> ProbeResult:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(source, f"not JSON: {exc.msg}", exc.lineno) from None
    try:
        res = ProbeResult.model_validate(data)
    except ValidationError as exc:
        from numasim.topology.io.toml_format import format_validation_error

        raise FormatError(source, format_validation_error(exc)) from None
    n = len(res.nodes)
    for name in ("latency_ns", "bandwidth_gb_s"):
        table = getattr(res, name)
        if len(table) != n or any(len(r) != n for r in table):
            raise FormatError(source, f"{name} must be {n} x {n} for nodes {res.nodes}")
    return res


def parse_probe(path: str | Path) -> ProbeResult:
    source, text = read_source(path)
    return parse_probe_text(text, source)
