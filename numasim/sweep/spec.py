"""The sweep file: which runs a what-if experiment is made of, as a pydantic model read from TOML.

A sweep is a grid (every combination of the values listed under ``[grid]``) and/or a list of explicit runs
(``[[runs]]``), each run one ``numasim run``: a machine, a workload or a trace, a policy, kernel knobs, a seed.
``[defaults]`` fills what a grid point or a run leaves out; ``repeats`` runs each point with that many seeds.

Keys of a run (in ``[defaults]``, ``[grid]`` as lists, or ``[[runs]]``):

* ``machine`` (required): a shipped machine name or a machine file;
* ``workload`` or ``trace`` (exactly one): a file;
* ``calibration``: ``"nominal"``, ``"catalog"`` or a calibration file (default: the one the machine names);
* ``policy``: ``MODE[:NODES[:FLAGS]]`` or a plug-in, with parameters as ``name:key=value,...``;
* ``mode`` (``epoch`` or ``exact``), ``seed``, ``thp``, ``sysctl`` (a table of ``NAME = VALUE``), ``daemon`` (a list
  of ``--daemon`` specs), ``tlb`` (bool), ``cpus`` (a trace's cpus), ``label`` (free text for the table);
* ``"workload.PATH"``: replaces one field of the workload file before it is read, ``PATH`` a dotted path into
  its TOML (``"workload.threads"``, ``"workload.phases.0.accesses"``, ``"workload.allocations.0.policy"``):
  thread counts and placements are swept this way.

File paths are relative to the sweep file. Errors name the field and the value.

Examples
--------
>>> spec = loads_sweep('''
... name = "demo"
... [defaults]
... machine = "seed-003-2node"
... workload = "w.toml"
... [grid]
... policy = ["local", "interleave:all"]
... "workload.threads" = [[{count = 1, node = 0}], [{count = 2, node = 0}]]
... ''')
>>> [(r["policy"], r["workload.threads"][0]["count"]) for r in spec.expand()]
[('local', 1), ('local', 2), ('interleave:all', 1), ('interleave:all', 2)]
>>> len({run_id(r) for r in spec.expand()})
4
"""

from __future__ import annotations

import hashlib
import itertools
import json
import tomllib
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from numasim.errors import NumasimError

__all__ = ["SweepSpec", "SweepError", "RUN_KEYS", "load_sweep", "loads_sweep", "run_id", "run_ids", "set_path"]


class SweepError(NumasimError):
    """A sweep file that cannot be run, or a results directory that cannot be written."""


RUN_KEYS = frozenset(
    {"machine", "workload", "trace", "calibration", "policy", "mode", "seed", "thp", "sysctl", "daemon", "tlb",
     "cpus", "label"}
)  # fmt: skip
"""The keys a run may have, besides ``workload.PATH`` overrides."""

_SCALAR_CHECKS: dict[str, tuple[type | tuple[type, ...], str]] = {
    "machine": (str, "a machine name or file"),
    "workload": (str, "a workload file"),
    "trace": (str, "a trace file"),
    "calibration": (str, '"nominal", "catalog" or a calibration file'),
    "policy": (str, "a policy string"),
    "mode": (str, '"epoch" or "exact"'),
    "seed": (int, "an integer >= 0"),
    "thp": (str, '"always", "madvise" or "never"'),
    "sysctl": (dict, "a table of NAME = VALUE"),
    "daemon": (list, "a list of daemon specs"),
    "tlb": (bool, "true or false"),
    "cpus": (str, 'a cpu list such as "0,24"'),
    "label": (str, "text"),
}


def _check_key(key: str, where: str) -> None:
    if key in RUN_KEYS:
        return
    if key.startswith("workload.") and len(key) > len("workload.") and all(key.split(".")[1:]):
        return
    known = ", ".join(sorted(RUN_KEYS))
    raise ValueError(f"{where}: unknown key {key!r} (known: {known}, or workload.PATH)")


def _check_value(key: str, value: Any, where: str) -> None:
    if key.startswith("workload."):
        return
    kind, what = _SCALAR_CHECKS[key]
    if isinstance(value, bool) and kind is int:
        raise ValueError(f"{where}.{key} = {value!r}: expected {what}")
    if not isinstance(value, kind):
        raise ValueError(f"{where}.{key} = {value!r}: expected {what}")
    if key == "seed" and isinstance(value, int) and value < 0:
        raise ValueError(f"{where}.seed = {value}: expected {what}")
    if key == "mode" and value not in ("epoch", "exact"):
        raise ValueError(f"{where}.mode = {value!r}: expected {what}")
    if key == "thp" and value not in ("always", "madvise", "never"):
        raise ValueError(f"{where}.thp = {value!r}: expected {what}")
    if key == "daemon" and isinstance(value, list) and not all(isinstance(d, str) for d in value):
        raise ValueError(f"{where}.daemon = {value!r}: expected {what}")


class SweepSpec(BaseModel):
    """A sweep file (see the module docstring). ``base_dir`` is where relative file paths start."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(min_length=1)]
    description: str = ""
    repeats: Annotated[int, Field(ge=1, le=10_000)] = 1
    """Each point runs this many times, with seeds ``seed``, ``seed + 1``, ... (``seed`` default 0)."""
    defaults: dict[str, Any] = Field(default_factory=dict)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    runs: list[dict[str, Any]] = Field(default_factory=list)
    x: str | None = None
    """The parameter the report's figures put on the x axis (default: the first grid key other than ``seed`` whose
    values are numbers, else ``threads``, the run's thread count)."""
    base_dir: str = "."

    @field_validator("defaults")
    @classmethod
    def _defaults(cls, value: dict[str, Any]) -> dict[str, Any]:
        for k, v in value.items():
            _check_key(k, "defaults")
            _check_value(k, v, "defaults")
        return value

    @field_validator("grid")
    @classmethod
    def _grid(cls, value: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for k, values in value.items():
            _check_key(k, "grid")
            if not values:
                raise ValueError(f"grid.{k} = []: a grid key needs at least one value")
            for v in values:
                _check_value(k, v, "grid")
        return value

    @field_validator("runs")
    @classmethod
    def _runs(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, run in enumerate(value):
            for k, v in run.items():
                _check_key(k, f"runs.{i}")
                _check_value(k, v, f"runs.{i}")
        return value

    @model_validator(mode="after")
    def _complete(self) -> SweepSpec:
        points = self._points()
        if not points:
            raise ValueError("the sweep has no runs: give a [grid], [[runs]], or both")
        for i, p in enumerate(points):
            where = f"run {i + 1} ({_describe(p)})"
            if "machine" not in p:
                raise ValueError(f"{where}: no machine (set it in [defaults], [grid] or the run)")
            if ("workload" in p) == ("trace" in p):
                raise ValueError(f"{where}: give exactly one of workload and trace")
            if "trace" in p and any(k.startswith("workload.") for k in p):
                raise ValueError(f"{where}: workload.PATH overrides need a workload, not a trace")
            if "cpus" in p and "workload" in p:
                raise ValueError(f"{where}: cpus applies to a trace (a workload's threads name their cpus)")
        return self

    def _points(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if self.grid:
            keys = list(self.grid)
            for combo in itertools.product(*(self.grid[k] for k in keys)):
                out.append({**self.defaults, **dict(zip(keys, combo, strict=True))})
        out += [{**self.defaults, **run} for run in self.runs]
        return out

    def expand(self) -> list[dict[str, Any]]:
        """Every run of the sweep, in order: grid points (last key varying fastest), then ``runs``; each point
        ``repeats`` times with consecutive seeds."""
        out = []
        for p in self._points():
            seed = int(p.get("seed", 0))
            for r in range(self.repeats):
                out.append({**p, "seed": seed + r})
        return out

    def path(self, name: str) -> Path:
        """A file the sweep names, relative to the sweep file."""
        return resolve_path(name, Path(self.base_dir))

    def x_parameter(self) -> str:
        if self.x is not None:
            return self.x
        for k, values in self.grid.items():
            if k != "seed" and len(values) > 1 and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
                return k
        return "threads"


def _describe(point: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in point.items() if not isinstance(v, list | dict))[:200]


def resolve_path(name: str, base_dir: Path) -> Path:
    """A file a sweep names: as given when absolute, else relative to the sweep file's directory ``base_dir``."""
    p = Path(name)
    return p if p.is_absolute() else base_dir / p


def run_id(config: dict[str, Any]) -> str:
    """A run's identity: the first 12 hex digits of the SHA-256 of its configuration (same config, same id)."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def run_ids(configs: list[dict[str, Any]]) -> list[str]:
    """The id of each run of a sweep, in order: :func:`run_id`, and for the second and later copies of one
    configuration (a run listed twice) ``-2``, ``-3``, ... after it, so that no two runs share a workspace.

    >>> run_ids([{"seed": 1}, {"seed": 2}, {"seed": 1}])[2].endswith("-2")
    True
    """
    seen: dict[str, int] = {}
    out = []
    for config in configs:
        rid = run_id(config)
        seen[rid] = seen.get(rid, 0) + 1
        out.append(rid if seen[rid] == 1 else f"{rid}-{seen[rid]}")
    return out


def set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Replace the field at ``dotted`` (``"threads"``, ``"phases.0.accesses"``) of a TOML document in place.

    >>> d = {"phases": [{"accesses": 10}]}
    >>> set_path(d, "phases.0.accesses", 20); d
    {'phases': [{'accesses': 20}]}
    """
    parts = dotted.split(".")
    node: Any = data
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise SweepError(f"workload.{dotted}: {part!r} is not an index of a list of {len(node)}")
            if last:
                node[int(part)] = value
            else:
                node = node[int(part)]
        elif isinstance(node, dict):
            if last:
                node[part] = value
            elif part not in node:
                raise SweepError(f"workload.{dotted}: the workload has no field {'.'.join(parts[: i + 1])!r}")
            else:
                node = node[part]
        else:
            raise SweepError(f"workload.{dotted}: {'.'.join(parts[:i])!r} is a value, not a table or a list")


def loads_sweep(text: str, source: str = "<sweep>", base_dir: str | Path = ".") -> SweepSpec:
    """Parse a sweep from TOML text; errors name the source, the field and the value."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SweepError(f"{source}: not valid TOML: {exc}") from None
    data["base_dir"] = str(base_dir)
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as exc:
        msgs = []
        for e in exc.errors():
            loc = ".".join(str(p) for p in e["loc"])
            msg = e["msg"].removeprefix("Value error, ")
            msgs.append(msg if not loc or msg.startswith(loc.split(".")[0]) else f"{loc}: {msg}")
        raise SweepError(f"{source}: " + "; ".join(msgs)) from None


def load_sweep(path: str | Path) -> SweepSpec:
    """Read a sweep file (relative paths in it start at its directory)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SweepError(f"{p}: no such file") from None
    return loads_sweep(text, str(p), p.parent.resolve())
