"""CXL memory in the platform catalog: the links (CXL 1.1/2.0 over PCIe 5.0) and Type-3 memory expanders.

A CXL Type-3 expander is a cpu-less NUMA node behind a CXL port of one socket. What the timing model needs of it:

* the **link**: payload bandwidth per direction, derived from the PCIe 5.0 PHY and the CXL 68-byte flit
  (:class:`CxlLinkSpec`, :attr:`CxlLinkSpec.payload_gb_s` shows the arithmetic);
* the **device**: its DRAM (kind, channels, MT/s) and the latency it adds over local DRAM
  (:class:`CxlDevice`), each number with a public source, or listed in ``estimates`` when it is our
  engineering estimate (never passed off as a figure someone published).

The data is one TOML file, ``data/cxl/devices.toml`` (package data, like the platforms). Which host platforms
support CXL, and which version, is in each platform's entry (:class:`~numasim.timing.catalog.model.CxlSupport`).

Examples
--------
>>> cat = load_cxl_catalog()
>>> link = cat.link(16)
>>> round(link.raw_gb_s, 2), round(link.payload_gb_s, 1)
(63.02, 52.7)
>>> cat.default().name
'micron-cz120'
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from numasim.errors import CalibrationError
from numasim.timing.catalog.model import Source

__all__ = ["CxlLinkSpec", "CxlDevice", "CxlLatency", "CxlCatalog", "load_cxl_catalog", "parse_cxl_toml"]

PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
PositiveInt = Annotated[int, Field(gt=0)]
Fraction = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class _Sourced(_Model):
    sources: list[str] = Field(default_factory=list)
    """Ids of the catalog's :class:`~numasim.timing.catalog.model.Source` records these numbers come from."""
    estimates: list[str] = Field(default_factory=list)
    """Fields whose value is numasim's engineering estimate, not a published figure (each says so when used)."""

    def _numeric_fields(self) -> list[str]:
        return [k for k, v in self.__dict__.items() if isinstance(v, int | float) and not isinstance(v, bool)]


class CxlLinkSpec(_Sourced):
    """One CXL 1.1/2.0 link width over the PCIe 5.0 PHY, and how its payload bandwidth follows.

    ``payload_gb_s = gt_s x lanes / 8 x encoding x flit x slots``: the PHY's line rate, its 128b/130b
    encoding, the 68-byte CXL.cachemem flit (64 bytes of slots + 2-byte protocol id + 2-byte CRC), and the
    share of the flit's four 16-byte slots that carries data rather than message headers.
    """

    lanes: Literal[4, 8, 16]
    gt_s: PositiveFloat
    """Transfer rate per lane (PCIe 5.0: 32 GT/s)."""
    encoding_efficiency: Fraction
    """128b/130b line code: 128/130."""
    flit_efficiency: Fraction
    """Slot bytes per flit on the wire: 64 of 68 (2-byte protocol id and 2-byte CRC per flit)."""
    slot_efficiency: Fraction
    """Share of slots carrying line data rather than headers (a 64-byte line fills 4 data slots; its
    response header shares a header slot with others)."""
    derivation: Annotated[str, Field(min_length=1)]

    @property
    def raw_gb_s(self) -> float:
        """Per direction, after the line code, before flit framing (GB/s)."""
        return self.gt_s * self.lanes / 8.0 * self.encoding_efficiency

    @property
    def payload_gb_s(self) -> float:
        """Cache-line payload per direction (GB/s): what a stream of reads (or of writes) can move."""
        return self.raw_gb_s * self.flit_efficiency * self.slot_efficiency


class CxlLatency(_Sourced):
    """The design figures for what CXL adds over local DRAM, and the added latency assumed for a device with no
    figure of its own when no device in the catalog is measured either (a measured device's figure comes first:
    :func:`~numasim.timing.catalog.cxl_timing.cxl_figures`)."""

    default_added_ns: PositiveFloat
    derivation: Annotated[str, Field(min_length=1)]


class CxlDevice(_Sourced):
    """A CXL Type-3 memory expander: its link, its DRAM, and its added latency, with sources."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")]
    """The catalog key, e.g. ``"micron-cz120"``."""
    title: Annotated[str, Field(min_length=1)]
    cxl_version: Literal["1.1", "2.0"]
    lanes: Literal[4, 8, 16]
    ddr: Literal["DDR4", "DDR5"]
    channels: PositiveInt
    mt_s: PositiveInt
    added_latency_ns: PositiveFloat | None = None
    """Idle load latency over local DRAM from a core of the attach socket; None: no public figure (the catalog
    default is used, and said so)."""
    idle_latency_ns: PositiveFloat | None = None
    """A published *total* idle latency of this device (when no added figure is given), measured on
    ``measured_on``; the added latency is then this minus the host's local prior."""
    read_bandwidth_gb_s: PositiveFloat | None = None
    """A published all-read bandwidth of one device (mlc "ALL Reads"); caps the DRAM-derived figure."""
    measured_on: str = ""
    measured_platform: str | None = None
    """The catalog platform ``idle_latency_ns`` was measured on: its local prior is what the device adds to."""
    vendor_bandwidth_gb_s: PositiveFloat | None = None
    """The vendor's headline bandwidth (often a read/write mix, both link directions): shown, not used."""
    note: str = ""

    @model_validator(mode="after")
    def _check(self) -> Self:
        unknown = [e for e in self.estimates if e not in type(self).model_fields]
        if unknown:
            raise ValueError(f"device {self.name}: estimates names {unknown}, not fields of a device")
        if (self.idle_latency_ns is not None or self.read_bandwidth_gb_s is not None) and not self.measured_on:
            raise ValueError(f"device {self.name}: a measured latency or bandwidth needs measured_on")
        if self.idle_latency_ns is not None and self.measured_platform is None:
            raise ValueError(f"device {self.name}: idle_latency_ns needs measured_platform (whose local latency it adds to)")
        return self

    @property
    def dram_peak_gb_s(self) -> float:
        """Channels x MT/s x 8 B (a DDR channel is 64 bits wide)."""
        return self.channels * self.mt_s * 8 / 1000.0


class CxlCatalog(_Model):
    """The whole CXL section: link widths, the latency default, devices, the default device, sources."""

    default_device: str
    default_device_why: Annotated[str, Field(min_length=1)]
    latency: CxlLatency
    links: list[CxlLinkSpec]
    devices: list[CxlDevice]
    source_list: list[Source] = Field(alias="source", default_factory=list)

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, populate_by_name=True)

    @model_validator(mode="after")
    def _check(self) -> Self:
        ids = [s.id for s in self.source_list]
        if len(set(ids)) != len(ids):
            raise ValueError(f"source: duplicate id in {ids}")
        groups: list[tuple[str, _Sourced]] = [("latency", self.latency)]
        groups += [(f"links[x{ln.lanes}]", ln) for ln in self.links]
        groups += [(f"devices[{d.name}]", d) for d in self.devices]
        for where, group in groups:
            missing = [s for s in group.sources if s not in ids]
            if missing:
                raise ValueError(f"{where}.sources: {missing} are not ids of the CXL sources {sorted(ids)}")
            unsourced = [k for k in group._numeric_fields() if k not in group.estimates]
            if unsourced and not group.sources:
                raise ValueError(f"{where}: numbers {unsourced} have neither sources nor an estimates label")
        names = [d.name for d in self.devices]
        if len(set(names)) != len(names):
            raise ValueError(f"devices: duplicate name in {names}")
        if self.default_device not in names:
            raise ValueError(f"default_device = {self.default_device!r}: not one of the devices {names}")
        lanes = [ln.lanes for ln in self.links]
        if len(set(lanes)) != len(lanes):
            raise ValueError(f"links: duplicate width in {lanes}")
        for d in self.devices:
            if d.lanes not in lanes:
                raise ValueError(f"devices[{d.name}].lanes = {d.lanes}: no link of that width (links: {lanes})")
        return self

    def device(self, name: str) -> CxlDevice:
        """The device called ``name`` (an error lists the known ones)."""
        for d in self.devices:
            if d.name == name:
                return d
        known = ", ".join(d.name for d in self.devices)
        raise CalibrationError(f"cxl device {name!r} is not in the catalog; known: {known}")

    def default(self) -> CxlDevice:
        """The device a machine that names none is timed with (:attr:`default_device_why` says why)."""
        return self.device(self.default_device)

    def link(self, lanes: int) -> CxlLinkSpec:
        for ln in self.links:
            if ln.lanes == lanes:
                return ln
        raise CalibrationError(f"no CXL link of x{lanes} in the catalog")

    def cite(self, ids: list[str]) -> str:
        """``"title (url)"; ...`` for a group's source ids."""
        by_id = {s.id: s for s in self.source_list}
        return "; ".join(f"{by_id[i].title} ({by_id[i].url})" if by_id[i].url else by_id[i].title for i in ids)


def parse_cxl_toml(text: str, source: str = "<text>") -> CxlCatalog:
    """The CXL section from the text of its TOML file (``source`` names it in errors)."""
    from numasim.timing.catalog.loader import parse_toml_model

    return parse_toml_model(CxlCatalog, text, source)


@functools.cache
def load_cxl_catalog() -> CxlCatalog:
    """The shipped CXL section (read once per process)."""
    path = resources.files("numasim.timing.catalog") / "data" / "cxl" / "devices.toml"
    return parse_cxl_toml(path.read_text(encoding="utf-8"), "catalog/data/cxl/devices.toml")
