"""Validation: predict held-out measured tables from a calibrated machine and report the error per table.

Two methods, and every table says which one produced it (``method``), so a number is never mistaken for the other:

* **engine**: mlc's tables (latency and bandwidth matrices, peak injection bandwidths, loaded latency) are
  measured by running the virtual mlc users run (:func:`numasim.calibrate.replay.virtual_mlc`: the tool on a fresh
  simulated kernel, its printed output parsed like the real one), so validation checks exactly that tool;
* **analytic** (:mod:`numasim.calibrate.predict`): the same latency/bandwidth/curve model in closed form; for the
  loaded-latency table, the latency at each row's *measured* bandwidth.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from numasim.calibrate.measurements import Measurement
from numasim.calibrate.parsers import (
    HmatResult,
    HopRatioResult,
    KerncraftResult,
    LatMemRdResult,
    LoadedLatencyTable,
    MlcResult,
    NodeMatrix,
    PerftestResult,
    ProbeResult,
    StrideTableResult,
)
from numasim.calibrate.parsers.mlc import node_latency_matrices
from numasim.calibrate.pipeline import SATURATED_ROW_SHARE, _hmat_matrix
from numasim.calibrate.predict import (
    calibrated,
    predict_bandwidth_matrix,
    predict_device_bandwidth_gb_s,
    predict_lat_mem_rd,
    predict_latency_matrix,
    predict_loaded_latency,
    predict_peak_mix,
    predict_stride_time_ns,
)
from numasim.calibrate.result import CellResidual, mape_pct
from numasim.errors import CalibrationError
from numasim.timing.model import Calibration, apply_calibration
from numasim.topology.model import Machine
from numasim.topology.routing import latency_table_ns

__all__ = [
    "VALIDATION_TABLES",
    "TableValidation",
    "ValidationReport",
    "validate",
    "ANALYTIC_METHOD",
    "ENGINE_METHOD",
]

VALIDATION_TABLES = (
    "latency_matrix",
    "bandwidth_matrix",
    "peak_bandwidth",
    "loaded_latency",
    "stride_latency",
    "lat_mem_rd",
    "device_bandwidth",
    "device_latency",
    "hop_ratios",
    "c2c_latency",
    "bandwidth_scaling",
)
ANALYTIC_METHOD = "analytic (closed-form evaluation of the engine's latency/bandwidth/curve model)"


ENGINE_METHOD = "engine: the virtual mlc (numasim.tools.mlc) run on a fresh simulated kernel, its output parsed"
ENGINE_LL_METHOD = (
    "engine: the virtual mlc --loaded_latency at the measured injection delays (numasim.tools.mlc; with -e where "
    "the run says mlc could not turn the prefetchers off), its printed latency and bandwidth columns"
)
ENGINE_BW_METHOD = ENGINE_METHOD
ENGINE_SCALING_METHOD = (
    "engine: each likwid-bench kernel (copy by the virtual STREAM) on the first n cores of socket 0, one thread a "
    "core, arrays first touched by their threads (numasim.calibrate.scaling)"
)


@dataclass
class TableValidation:
    table: str
    source: str
    cells: list[CellResidual]
    method: str = ANALYTIC_METHOD

    @property
    def mape_pct(self) -> float:
        return mape_pct(self.cells)

    @property
    def worst(self) -> CellResidual | None:
        return max(self.cells, key=lambda c: abs(c.error_pct)) if self.cells else None


@dataclass
class ValidationReport:
    machine: str
    calibration_id: str
    method: str = ANALYTIC_METHOD
    tables: list[TableValidation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def table(self, name: str) -> TableValidation:
        for t in self.tables:
            if t.table == name:
                return t
        raise KeyError(f"no validated table {name!r} (have {[t.table for t in self.tables]})")

    def summary(self) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for t in self.tables:
            w = t.worst
            out.append(
                {
                    "table": t.table,
                    "source": t.source,
                    "method": "engine" if t.method.startswith("engine") else "analytic",
                    "cells": len(t.cells),
                    "mape_pct": round(t.mape_pct, 3),
                    "worst": None
                    if w is None
                    else {"row": w.row, "col": w.col, "measured": w.measured, "simulated": round(w.model, 4), "error_pct": round(w.error_pct, 3)},
                }
            )
        return out


def _matrix_cells(table: str, measured: NodeMatrix, model: NodeMatrix, unit: str) -> list[CellResidual]:
    cells = []
    for i, r in enumerate(measured.rows):
        for j, c in enumerate(measured.cols):
            v = float(measured.values[i, j])
            if math.isfinite(v):
                cells.append(CellResidual(table, str(r), str(c), v, float(model.values[i, j]), unit))
    return cells


def _like(simulated: NodeMatrix | None, measured: NodeMatrix) -> NodeMatrix:
    """The simulated matrix's cells at the measured matrix's rows and columns (nan where it has none)."""
    out = np.full((len(measured.rows), len(measured.cols)), np.nan)
    if simulated is not None:
        for a, i in enumerate(measured.rows):
            for b, j in enumerate(measured.cols):
                if i in simulated.rows and j in simulated.cols:
                    out[a, b] = simulated.cell(i, j)
    return NodeMatrix(list(measured.rows), list(measured.cols), out, measured.unit)


def _loaded_cells(
    machine: Machine, calibration: Calibration, t: LoadedLatencyTable, engine: bool, prefetchers_on: bool = False
) -> list[CellResidual]:
    """Loaded-latency cells, row = the injection delay. Engine: the virtual mlc at the measured delays, both
    columns (``latency`` in ns, ``bandwidth`` in MB/s), with ``-e`` where the run's prefetchers were on
    (``prefetchers_on``: mlc could not turn them off). Analytic: the latency at each row's measured bandwidth,
    the prefetched lines in flight too where they were on."""
    from numasim.calibrate.replay import virtual_mlc

    rows = [f"{int(dl):05d}" for dl in t.inject_delay]
    if not engine:
        saturated = t.bandwidth_mb_s >= SATURATED_ROW_SHARE * float(np.max(t.bandwidth_mb_s))
        pred = predict_loaded_latency(machine, calibration, t.bandwidth_gb_s, saturated=saturated,
                                      prefetchers_on=prefetchers_on)
        return [CellResidual("loaded_latency", r, "latency", float(v), float(p), "ns")
                for r, v, p in zip(rows, t.latency_ns, pred, strict=True)]
    argv = ["--loaded_latency", *(["-e"] if prefetchers_on else [])]
    sim = virtual_mlc(machine, calibration, argv, delays=[int(x) for x in t.inject_delay]).loaded_latency
    if not sim:
        raise CalibrationError("validate: the virtual mlc printed no loaded-latency table")
    s = sim[0]
    cells = [CellResidual("loaded_latency", r, "latency", float(v), float(p), "ns")
             for r, v, p in zip(rows, t.latency_ns, s.latency_ns, strict=True)]
    cells += [CellResidual("loaded_latency", r, "bandwidth", float(v), float(p), "MB/s")
              for r, v, p in zip(rows, t.bandwidth_mb_s, s.bandwidth_mb_s, strict=True)]
    return cells


def _c2c_cells(machine: Machine, calibration: Calibration, measured: MlcResult, engine: bool) -> list[CellResidual]:
    """The HITM cells of an mlc ``--c2c_latency`` run against the model's: the local one, and each writer x reader
    node of the remote tables by where the lines were homed. ``engine``: the virtual mlc's; else the closed form
    (the calibration's coherence figures, or, without them, what serves the read: the last cache level on the
    socket, memory at the line's home across it). (The HIT row, a read of a line another core holds clean, is
    not compared: numasim times it as the hit in the level the cores share, with no snoop.)"""
    if engine:
        from numasim.calibrate.replay import virtual_mlc

        sim = virtual_mlc(machine, calibration, ["--c2c_latency"])
        local = sim.c2c_local_ns["Local Socket L2->L2 HITM"]

        def remote(homed: str, w: int, r: int) -> float | None:
            model = sim.c2c_remote_ns[f"Remote Socket L2->L2 HITM ({homed} homed)"]
            return model.cell(w, r) if w in model.rows and r in model.cols else None
    else:
        m = calibrated(machine, calibration)
        lat = latency_table_ns(m)
        ids = m.node_ids
        c = calibration.coherence
        llc = max((x.latency_ns for x in calibration.caches), default=float(np.nanmin(np.diag(lat))))
        local = c.local_hitm_ns if c is not None else llc
        if c is not None and c.socket_hitm_ns is not None and calibration.caches:
            # mlc's local pair may lie in two core complexes (an EPYC of one core a complex)
            from numasim.engine.caches import coherence_domains
            from numasim.tools.mlc import c2c_local_pair

            pair = c2c_local_pair(m)
            if pair is not None:
                a, b = coherence_domains(m, calibration, pair)
                local = c.local_hitm_ns if a == b else c.socket_hitm_ns

        sockets = {n.id: n.socket for n in m.nodes}

        def remote(homed: str, w: int, r: int) -> float | None:
            if w not in ids or r not in ids:
                return None
            if c is not None and sockets[w] is not None and sockets[w] == sockets[r]:
                # two nodes of one socket: an SNC cluster's share of its L3 moves a line at the socket's local
                # cost; two NPS nodes of an EPYC hold different core complexes (the socket figure, where it has one)
                return c.socket_hitm_ns or c.local_hitm_ns
            if c is not None and c.remote_hitm_ns is not None:
                return c.remote_hitm_home_reader_ns if homed == "reader" and c.remote_hitm_home_reader_ns else c.remote_hitm_ns
            home = w if homed == "writer" else r
            return float(lat[ids.index(r), ids.index(home)])

    cells = []
    for key, value in measured.c2c_local_ns.items():
        if "HITM" in key:
            cells.append(CellResidual("c2c_latency", "local", "HITM", value, local, "ns"))
    for key, table in measured.c2c_remote_ns.items():
        homed = "writer" if "(writer homed)" in key else "reader" if "(reader homed)" in key else None
        if "HITM" not in key or homed is None:
            continue
        if table.row_axis == "socket":
            # old mlc numbers sockets: its threads ran on a socket's first cpus, so the node of its first cpu
            table = _socket_table_by_node(machine, table)
        for w, r, value in table.cells():
            p = remote(homed, w, r) if w != r else None
            if p is not None:
                cells.append(CellResidual("c2c_latency", f"{w}->{r}", f"HITM {homed} homed", value, p, "ns"))
    return cells


def _socket_table_by_node(machine: Machine, table: NodeMatrix) -> NodeMatrix:
    """A cache-to-cache table numbered by sockets (old mlc: ``Writer Socket`` rows, ``Reader Socket`` columns) as
    one numbered by nodes: each socket's node holding its first cpu."""
    first: dict[int, int] = {}
    for cpu in sorted(machine.cpu_to_node):
        node = machine.node(machine.cpu_to_node[cpu])
        if node.socket is not None:
            first.setdefault(node.socket, node.id)
    if not first:  # a machine file that names no sockets: the ids are taken as nodes, as mlc 3.x prints them
        return table
    missing = [x for x in {*table.rows, *table.cols} if x not in first]
    if missing:
        raise CalibrationError(f"c2c table: sockets {sorted(missing)} are not the machine's (it has "
                               f"{sorted(first)}): a run of another box?")
    return NodeMatrix([first[x] for x in table.rows], [first[x] for x in table.cols], table.values, table.unit)


def _hop_cells(machine: Machine, calibration: Calibration, d: HopRatioResult) -> list[CellResidual]:
    """Predicted ratios: read(h) = mean latency over pairs h hops apart / mean local latency; write(h) =
    core.write_latency x read(h); read_bandwidth(h) = local / h-hop latency (a single core is latency-bound:
    Little's law with a fixed number of misses in flight)."""
    from numasim.topology.routing import latency_table_ns, routing

    m = apply_calibration(machine, calibration)
    lat = latency_table_ns(m)
    r = routing(m)
    ids = m.node_ids
    by_hops: dict[int, list[float]] = {}
    for a, i in enumerate(ids):
        for b, j in enumerate(ids):
            if math.isfinite(lat[a, b]):
                by_hops.setdefault(r.hops(i, j), []).append(float(lat[a, b]))
    local = float(np.mean(by_hops[0]))
    cells = []
    for q, table in d.ratios.items():
        for h, v in sorted(table.items()):
            if h not in by_hops:
                continue
            read = float(np.mean(by_hops[h])) / local
            model = read if q == "read" else read * calibration.core.write_latency if q == "write" else 1.0 / read
            cells.append(CellResidual("hop_ratios", q, f"{h} hops", v, model, "ratio"))
    return cells


def _scaling_table(machine: Machine, calibration: Calibration, d: KerncraftResult, src: str) -> tuple[list[CellResidual], list[str]]:
    """Every memory-level kernel series of a kerncraft file replayed at every measured core count, and notes on
    what was left out. The machine must have the file's socket layout: the cores are filled node by node."""
    from numasim.calibrate.scaling import compare_scaling

    socket0 = [n for n in machine.nodes if n.socket in (0, None) and n.cpus]
    cpus = sum(len(n.cpus) for n in socket0)
    want = d.cores_per_socket * d.threads_per_core
    if cpus != want or len(socket0) != d.numa_domains_per_socket:
        raise CalibrationError(
            f"{src}: the file describes a socket of {d.numa_domains_per_socket} NUMA domains and "
            f"{d.cores_per_socket} cores x {d.threads_per_core} threads ({want} cpus); socket 0 of {machine.name} "
            f"has {len(socket0)} nodes and {cpus} cpus: validate on the machine `numasim topo import {src}` builds"
        )
    cells: list[CellResidual] = []
    notes: list[str] = []
    name = Path(src).name
    for kernel, series in sorted(d.scaling.get("MEM", {}).items()):
        if kernel != "copy" and kernel not in d.kernels:
            notes.append(f"bandwidth_scaling {name}: kernel {kernel!r} not replayed: the file does not say its "
                         "streams (benchmarks: kernels:)")
            continue
        c = compare_scaling(machine, calibration, series, threads_per_core=d.threads_per_core,
                            streams=d.kernels.get(kernel))
        kc = [CellResidual("bandwidth_scaling", f"{n} core{'s' if n != 1 else ''}", kernel, float(m), float(x), "GB/s")
              for n, m, x in zip(c.cores.tolist(), c.measured_gb_s, c.simulated_gb_s, strict=True)]
        notes.append(f"bandwidth_scaling {name}: {kernel} MAPE {mape_pct(kc):.1f} % over {len(kc)} core counts")
        cells += kc
    # A prior read off likwid-bench runs (the catalog's efficiencies, the write cost) may come from this very
    # file: say which, so that no one takes those cells for a held-out test without looking.
    cited = sorted({re.sub(r"\[\d+\]", "", p.parameter) for p in calibration.provenance.priors
                    if "kerncraft" in p.source.lower()})
    if cited:
        notes.append(f"bandwidth_scaling {name}: priors citing kerncraft's likwid-bench files: {', '.join(cited)}; "
                     "cells resting on one read off this file are not held out")
    cached = sorted(level for level in d.scaling if level != "MEM")
    if cached:
        notes.append(f"bandwidth_scaling {name}: levels {', '.join(cached)} not validated (in-cache bandwidth is not "
                     "modelled: caches are timed by latency)")
    return cells, notes


def validate(
    machine: Machine,
    calibration: Calibration,
    measurements: list[Measurement],
    tables: list[str] | tuple[str, ...] | None = None,
    *,
    method: str = "analytic",
) -> ValidationReport:
    """Predict every requested table the measurements hold and compare cell by cell.

    ``method``: ``"analytic"`` (closed form for every table), ``"engine"`` (run the virtual mlc for mlc's
    tables, i.e. the latency and bandwidth matrices, the peak injection bandwidths and the loaded-latency table,
    whose latency *and* bandwidth columns are compared; closed form for the rest) or ``"auto"`` (engine when it
    is importable). Each table records which one produced it.
    """
    from numasim.calibrate.replay import engine_available, virtual_mlc

    if method not in ("analytic", "engine", "auto"):
        raise CalibrationError(f"method = {method!r}: expected 'analytic', 'engine' or 'auto'")
    use_engine = method == "engine" or (method == "auto" and engine_available())
    if method == "engine" and not engine_available():
        raise CalibrationError("method = 'engine' but numasim.engine.simulate is not available in this build")
    if calibration.machine != machine.name:
        raise CalibrationError(f"calibration {calibration.id} is for machine {calibration.machine!r}, not {machine.name!r}")
    wanted = tuple(tables) if tables else VALIDATION_TABLES
    bad = [t for t in wanted if t not in VALIDATION_TABLES]
    if bad:
        raise CalibrationError(f"--tables {bad}: unknown; known: {', '.join(VALIDATION_TABLES)}")
    rep = ValidationReport(machine=machine.name, calibration_id=calibration.id)
    for m in measurements:
        d, src = m.data, str(m.path)
        lat_mats: list[NodeMatrix] = []
        bw_mats: list[NodeMatrix] = []
        if isinstance(d, MlcResult):
            lat_mats, bw_mats = node_latency_matrices(d, machine.cpu_to_node), list(d.bandwidth_matrices)
            rep.notes += [f"{m.path.name}: {note}" for note in d.notes]
        elif isinstance(d, ProbeResult):
            lat_mats, bw_mats = [d.latency_matrix], [d.bandwidth_matrix]
        elif isinstance(d, HmatResult):
            lm, bm = _hmat_matrix(d, "read_latency_ns", "ns"), _hmat_matrix(d, "read_bandwidth_mb_s", "MB/s")
            lat_mats, bw_mats = [x for x in (lm,) if x], [x for x in (bm,) if x]
        if "latency_matrix" in wanted:
            for lm in lat_mats:
                if use_engine:
                    pred = _like(virtual_mlc(machine, calibration, ["--latency_matrix"]).latency_matrix, lm)
                    how = ENGINE_METHOD
                else:
                    pred = predict_latency_matrix(machine, calibration, lm)
                    how = ANALYTIC_METHOD
                rep.tables.append(
                    TableValidation("latency_matrix", src, _matrix_cells("latency_matrix", lm, pred, "ns"), how)
                )
        if "bandwidth_matrix" in wanted:
            for bm in bw_mats:
                if use_engine:
                    pred = _like(virtual_mlc(machine, calibration, ["--bandwidth_matrix"]).bandwidth_matrix, bm)
                    how = ENGINE_BW_METHOD
                else:
                    pred = predict_bandwidth_matrix(machine, calibration, bm)
                    how = ANALYTIC_METHOD
                rep.tables.append(
                    TableValidation("bandwidth_matrix", src, _matrix_cells("bandwidth_matrix", bm, pred, "MB/s"), how)
                )
        if isinstance(d, MlcResult):
            peak = d.peak_injection_mb_s or d.max_bandwidth_mb_s
            if "peak_bandwidth" in wanted and peak:
                if use_engine:
                    pred_p = virtual_mlc(machine, calibration, ["--peak_injection_bandwidth"]).peak_injection_mb_s
                    how_p = ENGINE_METHOD
                else:
                    pred_p = predict_peak_mix(machine, calibration, list(peak))
                    how_p = ANALYTIC_METHOD
                rep.tables.append(
                    TableValidation(
                        "peak_bandwidth",
                        src,
                        [CellResidual("peak_bandwidth", k, "system", v, pred_p[k], "MB/s") for k, v in peak.items() if k in pred_p],
                        how_p,
                    )
                )
            if "c2c_latency" in wanted and (d.c2c_local_ns or d.c2c_remote_ns):
                rep.tables.append(TableValidation("c2c_latency", src, _c2c_cells(machine, calibration, d, use_engine),
                                                  ENGINE_METHOD if use_engine else ANALYTIC_METHOD))
            if "loaded_latency" in wanted:
                for t in d.loaded_latency:
                    cells = _loaded_cells(machine, calibration, t, use_engine, d.prefetchers_controlled is False)
                    rep.tables.append(TableValidation("loaded_latency", src, cells,
                                                      ENGINE_LL_METHOD if use_engine else ANALYTIC_METHOD))
        if isinstance(d, StrideTableResult) and "stride_latency" in wanted:
            cells = []
            for st in d.tables:
                if st.cpu_node is None or st.mem_node is None or "s64" not in st.latency_ns:
                    continue
                p = predict_stride_time_ns(machine, calibration, st.cpu_node, st.mem_node)
                # only working sets far beyond the last cache level: the model's regime
                big = max((c.size_bytes for c in calibration.caches), default=0)
                for s, v in zip(st.size_bytes, st.latency_ns["s64"], strict=True):
                    if s > big:
                        cells.append(CellResidual("stride_latency", f"cpu{st.cpu_node}/mem{st.mem_node}", f"s64 {int(s)} B", float(v), p, "ns"))
            if cells:
                rep.tables.append(TableValidation("stride_latency", src, cells))
        if isinstance(d, LatMemRdResult) and "lat_mem_rd" in wanted:
            c = d.curve()
            pred_c = predict_lat_mem_rd(machine, calibration, c.size_bytes)
            rep.tables.append(
                TableValidation(
                    "lat_mem_rd",
                    src,
                    [CellResidual("lat_mem_rd", f"{int(s)} B", "latency", float(v), float(p), "ns") for s, v, p in zip(c.size_bytes, c.latency_ns, pred_c, strict=True)],
                )
            )
        if isinstance(d, PerftestResult) and calibration.devices:
            dev = calibration.devices[0].name
            dev_node = next(x.node for x in machine.devices if x.name == dev)
            for pt in d.tables:
                mem = pt.mem_node if pt.mem_node is not None else dev_node
                bw = predict_device_bandwidth_gb_s(machine, calibration, dev, mem)
                if pt.kind == "bw" and "device_bandwidth" in wanted:
                    avg = pt.column("BW_average")
                    large = pt.size_bytes >= 1 << 20
                    rep.tables.append(
                        TableValidation(
                            "device_bandwidth",
                            src,
                            [CellResidual("device_bandwidth", f"mem{mem}", f"{int(s)} B", float(v), bw * 8.0, "Gb/s") for s, v in zip(pt.size_bytes[large], avg[large], strict=True)],
                        )
                    )
                if pt.kind == "lat" and "device_latency" in wanted:
                    # large messages: time = smallest message's latency + size / DMA bandwidth
                    typ = pt.column("t_typical")
                    t0 = float(typ[0])
                    large = pt.size_bytes >= 1 << 20
                    rep.tables.append(
                        TableValidation(
                            "device_latency",
                            src,
                            [CellResidual("device_latency", f"mem{mem}", f"{int(s)} B", float(v), t0 + s / (bw * 1e9) * 1e6, "us") for s, v in zip(pt.size_bytes[large], typ[large], strict=True)],
                        )
                    )
        if isinstance(d, HopRatioResult) and "hop_ratios" in wanted:
            rep.tables.append(TableValidation("hop_ratios", src, _hop_cells(machine, calibration, d)))
        if isinstance(d, KerncraftResult) and "bandwidth_scaling" in wanted:
            if not use_engine:
                rep.notes.append(f"bandwidth_scaling {src}: not validated: it has no closed form, only the engine "
                                 "replays it (--method engine or auto)")
            else:
                cells, notes = _scaling_table(machine, calibration, d, src)
                rep.notes += notes
                if cells:
                    rep.tables.append(TableValidation("bandwidth_scaling", src, cells, ENGINE_SCALING_METHOD))
    if not rep.tables:
        raise CalibrationError(f"none of the measurements holds a table to validate ({', '.join(wanted)})"
                               + "".join(f"; {n}" for n in rep.notes))
    if any(t.method.startswith("engine") for t in rep.tables):
        rep.method = "mixed: the virtual tools' tables by the engine (mlc, STREAM, likwid-bench), other tables analytic"
    rep.notes.append(f"method: {rep.method}")
    return rep


