"""Fit, validate and ship the calibrations of the machines from the source documents and real mlc runs.

For every machine: fit on its measurement files (``tests/data/measurements/``), save
``topologies/<machine>.cal.json``, validate in-sample (engine replay of the latency matrix, closed form for the
rest) and on held-out data, and write ``experiments/calibration-<machine>/`` (README.md with the numbers,
summary.json, PNG figures).

Run from the repository root::

    .venv/bin/python experiments/calibration-shipped/run.py            # every machine
    .venv/bin/python experiments/calibration-shipped/run.py skylake-8180-2s
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

from numasim.calibrate.curves import fit_curve_shape
from numasim.calibrate.measurements import Measurement, load_measurements
from numasim.calibrate.parsers import MlcResult, NodeMatrix
from numasim.calibrate.pipeline import calibrate
from numasim.calibrate.plots import plot_report, plot_table
from numasim.calibrate.predict import predict_bandwidth_matrix, predict_latency_matrix
from numasim.calibrate.result import CellResidual
from numasim.calibrate.validate import TableValidation, ValidationReport, validate
from numasim.timing.model import Calibration, save_calibration, shaped_curve
from numasim.topology.io import load_machine

ROOT = Path(__file__).resolve().parents[2]
DATA = Path("tests/data/measurements")
CREATED = "2026-11-22"
IVY = DATA / "mlc" / "kuleuven-thinking-2s-ivybridge-E5-2680v2.md"
SKX = DATA / "mlc" / "fdio-csit-2s-skylake-plat8180.md"

SPECS: dict[str, dict[str, object]] = {
    "seed-001-e5-2680v2": {
        "files": [IVY],
        "fit_on": None,
        "heldout": "mlc",
        "other_mlc": SKX,
        "other_machine": "skylake-8180-2s",
        "explain": "No target is missed (the loaded-latency table, both columns of the virtual mlc run at the measured "
        "injection delays, is predicted within {cross_engine:.1f} % by the engine with the curve shape fitted on the "
        "8180 table, the 8180's {other_mlp} outstanding misses per thread and an ASSUMED 2.5 GHz core clock, mlc's default run "
        "printing no core clocks; its latency column in closed form at the measured bandwidths: {cross_closed:.1f} %). "
        "Caveats: the 2-node latency fit is exactly determined (4 cells, 4 "
        "parameters: 2 controllers, 2 link directions), so its analytic in-sample residual is zero by construction; "
        "the engine replay differs by the loaded-latency curve charging the pointer chase's own traffic. The "
        "leave-one-cell-out check is the informative one: a removed remote cell is predicted from the other "
        "direction (symmetric-link assumption), a removed local cell from the other controller (equal-controller "
        "assumption). Article 001's dd numbers on this cpu (read 4.1 / 2.9 GB/s local / remote) are not used: dd "
        "to /dev/shm measures the kernel's copy path, which the model does not represent.",
        "about": "2x Xeon E5-2680 v2 (the cpu of source article 001's 40-cpu machine); Intel mlc v3.1a default run, "
        "KU Leuven VSC documentation (shared/data/mlc).",
    },
    "skylake-8180-2s": {
        "files": [SKX],
        "fit_on": None,
        "heldout": "mlc",
        "other_mlc": IVY,
        "other_machine": "seed-001-e5-2680v2",
        "explain": "No target is missed. The loaded-latency table, both columns of the virtual mlc run at the measured "
        "injection delays with the curve shape fitted on the Ivy Bridge table and its {other_mlp} outstanding misses "
        "per thread: {cross_engine:.1f} % MAPE (its latency column in closed form at the measured bandwidths: "
        "{cross_closed:.1f} %). The latency column errs most in the {n_sat} saturated rows (mlc injection delays "
        "{sat_delays}, {sat_gb_s} GB/s): {sat_mape:.0f} % there against {unsat_mape:.1f} % on the {n_unsat} rows below "
        "saturation. There the virtual mlc's latency is Little's law over what its threads keep in flight (111 load "
        "threads x outstanding misses x 64 B / the controllers' bandwidth): the Ivy Bridge's {other_mlp} per thread "
        "hold 889 lines, the real machine 953; and the row at delay 100 sits on the knee, which the model places at a smaller "
        "delay than the machine. The shipped calibration (curve and 9 outstanding misses fitted on this table) brings "
        "the engine to {own_engine:.1f} %. Also: the "
        "firmware SLIT (21) disagrees with the measured ratio (131.1 / 81.4 = 1.61, i.e. 16): see the warnings.",
        "about": "2x Xeon Platinum 8180; Intel mlc v3.5 separate runs, FD.io CSIT calibration data (shared/data/mlc).",
    },
    "seed-003-2node": {
        "files": [DATA / "seed-003-stride-tables.txt"],
        "fit_on": ["latency"],
        "heldout": "stride",
        "explain": "No target is missed, but the regime is narrow. Only the stride-64 row beyond the last-level "
        "cache is in the model's reach (one miss per access, 10 misses in flight: latency / 10 per access); the "
        "fit has 2 cells for 2 parameters (one controller latency shared by both nodes, one link), so the only "
        "real test is the 32 MiB column. Not modelled: the s32 row at 128 MiB (10.37 / 13.77 ns measured; the "
        "per-line model would give half the s64 time per access, about 4.5 / 6.5 ns: the loop is not purely "
        "miss-bound), and the random row, which the article prints in 2.4 ns steps and equal local and remote at "
        "128 MiB (52.8 ns), so it carries no NUMA information. The absolute latencies (89 ns local, +40 ns "
        "remote) rest on the assumed 10 misses in flight (CoreTiming.max_outstanding_misses); the remote/local "
        "ratio (1.45) does not.",
        "about": "2-node machine of source article 003; its stride x working-set per-access time table, local "
        "(--membind=0) and remote (--membind=1).",
    },
    "seed-002-opteron-4s": {
        "files": [DATA / "seed-002-drepper-hop-ratios.txt"],
        "fit_on": ["latency"],
        "assume_local_latency_ns": 95.0,
        "heldout": "hop",
        "explain": "No target is missed. A per-link additive model cannot give +9 % for one hop and +30 % for "
        "two (the second hop would cost more than twice the first); the machine file therefore lets a route "
        "pay a relay latency through the intermediate socket's crossbar, and the fit (one controller latency, "
        "one HyperTransport link latency, one relay latency: the ratios say nothing per link) reproduces AMD's "
        "read ratios exactly: 3 distinct values, 3 parameters, so the in-sample 0 % is by construction. Held "
        "out, the worst cell is Drepper's measured 1-hop read slowdown (0.80 of local bandwidth): the model "
        "predicts local / 1-hop latency (a single core is latency-bound, Little's law with a fixed number of "
        "misses in flight), i.e. 0.92; Drepper himself notes his 20 % exceeds AMD's 9 %. (The engine's virtual "
        "mlc, experiments/002-hop-ratios, streams from both cores and finds the HyperTransport link binding: "
        "0.84.) Writes are predicted "
        "as write_latency_factor (from the 0-hop write) x the read cost; what a store costs in bandwidth is two "
        "lines, its read for ownership and its write-back (write_cost_factor 2).",
        "about": "Drepper's 4-socket Opteron (source article 002): AMD's hop-cost ratios and Drepper's measured "
        "1-hop read slowdown. Ratios only: the local read latency is ASSUMED to be 95 ns (McCalpin's measured "
        "open-page latency of 4-socket K8 Opterons, the platform catalog's K8 figure; not this machine's own); "
        "every fitted latency scales with that assumption.",
    },
    "seed-000-4node": {
        "files": [DATA / "seed-000-perftest.txt"],
        "fit_on": ["device"],
        "heldout": "device",
        "explain": "No target is missed. The idle latency matrix target does not apply: the article has no CPU "
        "memory measurement, so DRAM latency and bandwidth are the machine file's nominal numbers (stated above), "
        "not a fit. The in-sample remote bandwidth error (worst at 1 MiB: 116.6 Gb/s measured, 133.3 modelled) "
        "is the ramp of the remote DMA with message size, which the model (a fixed latency plus size / bottleneck "
        "bandwidth) does not have. The NIC's attach latency cannot be isolated (perftest latency includes the "
        "network round trip) and keeps the machine file's value.",
        "about": "4-node (2 sockets x 2 dies) machine of source article 000; ib_send_bw / ib_send_lat of its "
        "200 Gb/s NIC with local buffers and with --membind=1. No CPU memory measurement exists: DRAM "
        "latency/bandwidth stay the machine file's nominal numbers (80 ns local, +8 ns other die, +60 ns "
        "other socket, 70 GB/s per node).",
    },
}


def _blank(m: NodeMatrix, row: int, col: int) -> NodeMatrix:
    v = m.values.copy()
    if row in m.rows and col in m.cols:
        v[m.rows.index(row), m.cols.index(col)] = np.nan
    return NodeMatrix(m.rows, m.cols, v, m.unit)


def _without_cell(meas: Measurement, table: str, row: int, col: int) -> Measurement:
    d: MlcResult = meas.data
    if table == "latency":
        new = dataclasses.replace(
            d,
            latency_matrices=[_blank(x, row, col) for x in d.latency_matrices],
            idle_latency_ns=[] if (row, col) == (0, 0) else list(d.idle_latency_ns),
        )
    else:
        new = dataclasses.replace(d, bandwidth_matrices=[_blank(x, row, col) for x in d.bandwidth_matrices])
    return dataclasses.replace(meas, data=new)


def _loo(machine, meas: Measurement, table: str) -> TableValidation:  # type: ignore[no-untyped-def]
    """Leave one cell out: refit without it, predict it."""
    d: MlcResult = meas.data
    src = d.latency_matrix if table == "latency" else d.bandwidth_matrix
    assert src is not None
    cells = []
    for i, j, v in src.cells():
        held = _without_cell(meas, table, i, j)
        fit_on = ["latency"] if table == "latency" else ["latency", "peak_bandwidth", "bandwidth_matrix"]
        cal = calibrate(machine, [held], fit_on=fit_on, created=CREATED).calibration
        one = NodeMatrix([i], [j], np.array([[v]]), src.unit)
        pred = (predict_latency_matrix if table == "latency" else predict_bandwidth_matrix)(machine, cal, one)
        name = "latency_matrix" if table == "latency" else "bandwidth_matrix"
        cells.append(CellResidual(name, str(i), str(j), v, float(pred.values[0, 0]), src.unit))
    return TableValidation(f"{'latency' if table == 'latency' else 'bandwidth'}_matrix", str(meas.path), cells)


def ot_self(ms: list[Measurement]):  # type: ignore[no-untyped-def]
    """The loaded-latency table of the machine's own mlc run."""
    return ms[0].data.loaded_latency[0]  # type: ignore[union-attr]


def _with_curve(cal: Calibration, shape: tuple[float, float, float], mlp: int) -> Calibration:
    """``cal`` with the curve shape and the outstanding misses (which set the saturated plateau) of another machine."""
    ctrls = [c.model_copy(update={"curve": shaped_curve(c.latency_ns, *shape)}) for c in cal.controllers]
    body = cal.model_dump(exclude={"id", "controllers"})
    body["core"]["max_outstanding_misses"] = mlp
    return Calibration.model_validate({**body, "controllers": [c.model_dump() for c in ctrls]})


def _row(name: str, t: TableValidation, kind: str, target: float | None) -> dict[str, object]:
    w = t.worst
    return {
        "check": name,
        "kind": kind,
        "table": t.table,
        "method": "engine" if t.method.startswith("engine") else "analytic",
        "cells": len(t.cells),
        "mape_pct": round(t.mape_pct, 3),
        "worst": None if w is None else f"{w.row} -> {w.col}: {w.measured:.4g} vs {w.model:.4g} ({w.error_pct:+.2f} %)",
        "target_pct": target,
        "met": None if target is None else bool(t.mape_pct <= target),
    }


def run(name: str) -> dict[str, object]:
    spec = SPECS[name]
    machine = load_machine(name)
    ms = load_measurements(list(spec["files"]))  # type: ignore[call-overload]
    report = calibrate(
        machine,
        ms,
        fit_on=spec["fit_on"],  # type: ignore[arg-type]
        created=CREATED,
        assume_local_latency_ns=spec.get("assume_local_latency_ns"),  # type: ignore[arg-type]
    )
    cal = report.calibration
    save_calibration(cal, ROOT / "topologies" / f"{name}.cal.json")
    out = ROOT / "experiments" / f"calibration-{name}"
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.png"):
        old.unlink()
    rows: list[dict[str, object]] = []
    figures: list[str] = []
    notes: list[str] = []
    # in-sample
    fitted_tables = {
        "latency": ["latency_matrix", "hop_ratios", "stride_latency"],
        "peak_bandwidth": ["peak_bandwidth"],
        "bandwidth_matrix": ["bandwidth_matrix"],
        "loaded_latency": ["loaded_latency"],
        "device": ["device_bandwidth"],
    }
    wanted = sorted({t for k in (spec["fit_on"] or fitted_tables) for t in fitted_tables.get(k, [])})  # type: ignore[union-attr]
    insample = validate(machine, cal, ms, wanted, method="auto")
    if spec["heldout"] == "hop":
        # only the read ratios were fitted (write 0 only sets write_latency_factor)
        for t in insample.tables:
            t.cells = [c for c in t.cells if c.row == "read" or (c.row == "write" and c.col == "0 hops")]
    if spec["heldout"] == "stride":
        for t in insample.tables:
            t.cells = [c for c in t.cells if c.col.endswith(f"{128 << 20} B")]
    names = [t.table for t in insample.tables]
    for t in insample.tables:
        target = 3.0 if t.table in ("latency_matrix", "hop_ratios", "stride_latency") else None
        label = f"fit: {t.table}" + (f" ({t.cells[0].row})" if names.count(t.table) > 1 and t.cells else "")
        rows.append(_row(label, t, "in-sample", target))
    figures += [p.name for p in plot_report(insample, out, prefix="fit-")]
    # held-out
    held = ValidationReport(machine=name, calibration_id=cal.id)
    facts: dict[str, object] = {
        "own_engine": next((float(r["mape_pct"]) for r in rows if r["check"] == "fit: loaded_latency" and r["method"] == "engine"), float("nan"))  # type: ignore[arg-type]
    }
    if spec["heldout"] == "mlc":
        meas = ms[0]
        held.tables.append(_loo(machine, meas, "latency"))
        held.tables.append(_loo(machine, meas, "bandwidth"))
        no_curve = calibrate(machine, ms, fit_on=["latency", "peak_bandwidth", "bandwidth_matrix"], created=CREATED).calibration
        other = load_measurements([spec["other_mlc"]])[0].data  # type: ignore[list-item]
        ot = other.loaded_latency[0]
        other_idle = float(np.mean([other.latency_matrix.cell(i, i) for i in other.latency_matrix.rows]))
        other_peak = other.peak_injection_mb_s["all_reads"] / 1000.0
        shape, _ = fit_curve_shape(ot.bandwidth_gb_s, ot.latency_ns, idle_latency_ns=other_idle, peak_gb_s=other_peak)
        # the other machine's outstanding misses per thread, fitted by Little's law on its saturated rows
        other_mlp = calibrate(load_machine(str(spec["other_machine"])), load_measurements([spec["other_mlc"]]),  # type: ignore[list-item]
                              created=CREATED).calibration.core.max_outstanding_misses
        facts["other_mlp"] = other_mlp
        shaped = _with_curve(no_curve, shape, other_mlp)
        cross = validate(machine, shaped, ms, ["loaded_latency"], method="auto").tables[0]
        cross_analytic = validate(machine, shaped, ms, ["loaded_latency"], method="analytic").tables[0]
        held.tables.append(cross)
        held.tables.append(cross_analytic)
        # numbers the explanation quotes (latency column): saturated rows are those within 3 % of the table's
        # top bandwidth
        lat_cells = [c for c in cross.cells if c.col == "latency"]
        measured_bw = dict(zip((f"{int(x):05d}" for x in ot_self(ms).inject_delay), ot_self(ms).bandwidth_mb_s, strict=True))
        bw = np.array([measured_bw[c.row] for c in lat_cells])
        err = np.array([abs(c.error_pct) for c in lat_cells])
        sat = bw >= 0.97 * bw.max()
        delays = sorted(int(c.row) for c, x in zip(lat_cells, sat, strict=True) if x)
        facts.update(
            cross_engine=cross.mape_pct, cross_closed=cross_analytic.mape_pct, n_sat=int(sat.sum()),
            n_unsat=int((~sat).sum()), sat_mape=float(err[sat].mean()), unsat_mape=float(err[~sat].mean()),
            sat_delays=f"{delays[0]}-{delays[-1]}", sat_gb_s=f"{bw[sat].min() / 1000:.0f}-{bw[sat].max() / 1000:.0f}",
        )
        default_ll = validate(machine, no_curve, ms, ["loaded_latency"], method="auto").tables[0]
        notes.append(
            f"loaded-latency curve shape fitted on the other machine's mlc table ({Path(str(spec['other_mlc'])).name}): "
            f"a = {shape[0]:.3f}, b = {shape[1]:.4f}, cap = {shape[2]:.2f}; numasim's default_curve (shape fitted on "
            f"the 8180 table) gives {default_ll.mape_pct:.2f} % MAPE here"
            + (" (not held out for this machine: it was fitted on this very table)" if name == "skylake-8180-2s" else "")
        )
        labels = [
            "leave-one-cell-out: latency_matrix",
            "leave-one-cell-out: bandwidth_matrix",
            "cross-machine curve and outstanding misses: loaded_latency (engine)",
            "cross-machine curve and outstanding misses: loaded_latency (closed form)",
        ]
        for t, nm in zip(held.tables, labels, strict=True):
            rows.append(_row(nm, t, "held-out", 10.0))
    elif spec["heldout"] == "stride":
        t = validate(machine, cal, ms, ["stride_latency"], method="analytic").tables[0]
        t.cells = [c for c in t.cells if c.col.endswith(f"{32 << 20} B")]
        held.tables.append(t)
        rows.append(_row("held-out working set 32 MiB: stride_latency", t, "held-out", 10.0))
    elif spec["heldout"] == "hop":
        t = validate(machine, cal, ms, ["hop_ratios"], method="analytic").tables[0]
        t.cells = [c for c in t.cells if not (c.row == "read" or (c.row == "write" and c.col == "0 hops"))]
        held.tables.append(t)
        rows.append(_row("held-out write and bandwidth ratios: hop_ratios", t, "held-out", 10.0))
    elif spec["heldout"] == "device":
        t = validate(machine, cal, ms, ["device_latency"], method="analytic").tables[0]
        held.tables.append(t)
        rows.append(_row("held-out large-message send latency: device_latency", t, "held-out", 10.0))
    for k, t in enumerate(held.tables):
        how = "engine" if t.method.startswith("engine") else "closed form"
        suffix = "" if k == 0 or held.tables[k - 1].table != t.table else "-closed-form"
        p = plot_table(t, out / f"heldout-{t.table}{suffix}.png", title=f"held out: {t.table} ({how}), MAPE {t.mape_pct:.2f} %")
        figures.append(p.name)
    summary = {
        "machine": name,
        "calibration_id": cal.id,
        "calibration_file": f"topologies/{name}.cal.json",
        "sources": [{"path": s.path, "sha256": s.sha256, "tool": s.tool, "tool_version": s.tool_version} for s in cal.provenance.sources],
        "fitted_on": report.tables_used,
        "checks": rows,
        "assumptions": list(dict.fromkeys(report.result.assumptions)),
        "warnings": list(dict.fromkeys(report.result.warnings)),
        "notes": notes,
        "figures": sorted(figures),
        "regenerate": f".venv/bin/python experiments/calibration-shipped/run.py {name}",
    }
    tmp = out / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2) + "\n")
    tmp.replace(out / "summary.json")
    # the explanation quotes this run's numbers
    _readme(out, {**spec, "explain": str(spec.get("explain") or "").format(**facts)}, summary, cal)
    return summary


def _readme(out: Path, spec: dict[str, object], s: dict[str, object], cal: Calibration) -> None:
    lines = [
        f"# Calibration of `{s['machine']}`",
        "",
        str(spec["about"]),
        "",
        f"Shipped calibration: `{s['calibration_file']}` (id `{s['calibration_id']}`), fitted on: "
        f"{', '.join(s['fitted_on'])}.",  # type: ignore[arg-type]
        "",
        "Regenerate (from the repository root; deterministic, byte-identical output):",
        "",
        "```",
        str(s["regenerate"]),
        f".venv/bin/numasim calibrate --machine {s['machine']} {' '.join(str(f) for f in spec['files'])} "  # type: ignore[attr-defined]
        + (f"--fit-on {','.join(spec['fit_on'])} " if spec["fit_on"] else "")  # type: ignore[arg-type]
        + (f"--assume-local-latency-ns {spec['assume_local_latency_ns']:g} " if spec.get("assume_local_latency_ns") else "")
        + f"--created {CREATED} -o topologies/{s['machine']}.cal.json",
        f".venv/bin/numasim validate --machine {s['machine']} --calibration topologies/{s['machine']}.cal.json "
        f"{' '.join(str(f) for f in spec['files'])} -o /tmp/report --plots",  # type: ignore[attr-defined]
        "```",
        "",
        "## Results",
        "",
        "| check | kind | method | cells | MAPE % | target % | met | worst cell (measured vs simulated) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in s["checks"]:  # type: ignore[attr-defined]
        met = "n/a" if r["met"] is None else ("yes" if r["met"] else "**no**")
        tgt = "-" if r["target_pct"] is None else f"{r['target_pct']:g}"
        lines.append(f"| {r['check']} | {r['kind']} | {r['method']} | {r['cells']} | {r['mape_pct']} | {tgt} | {met} | {r['worst']} |")
    lines += ["", "Methods: *engine* = the virtual mlc users run (`numasim.tools.mlc`, epoch fidelity) on a fresh "
              "simulated kernel, its printed output parsed like the real one (loaded latency: latency and bandwidth "
              "columns at the measured injection delays); *analytic* = the same latency/bandwidth/curve model "
              "evaluated in closed form (loaded latency: the latency at each row's measured bandwidth).", ""]
    if s["notes"]:
        lines += ["## Notes", ""] + [f"- {n}" for n in s["notes"]] + [""]  # type: ignore[operator]
    extra = spec.get("explain")
    if extra:
        lines += ["## Where a target is missed, and why", "", str(extra), ""]
    lines += ["## Assumptions the fit made", ""] + [f"- {a}" for a in s["assumptions"]] + [""]  # type: ignore[operator]
    if s["warnings"]:
        lines += ["## Warnings", ""] + [f"- {w}" for w in s["warnings"]] + [""]  # type: ignore[operator]
    lines += ["## Fitted parameters", "", "| parameter | value | stderr |", "|---|---|---|"]
    for c in cal.controllers:
        lines.append(f"| controller {c.node} latency_ns | {c.latency_ns:.4g} | {cal.uncertainty.get(f'controllers[{c.node}].latency_ns', float('nan')):.3g} |")
        lines.append(f"| controller {c.node} read / write GB/s | {c.read_bandwidth_gb_s:.4g} / {c.write_bandwidth_gb_s:.4g} | |")
    for lt in cal.links:
        lines.append(f"| link {lt.src}->{lt.dst} latency_ns / GB/s | {lt.latency_ns:.4g} / {lt.bandwidth_gb_s:.4g} | {cal.uncertainty.get(f'links[{lt.src}->{lt.dst}].latency_ns', float('nan')):.3g} |")
    for rl in cal.relays:
        lines.append(f"| relay through node {rl.node} latency_ns | {rl.latency_ns:.4g} | {cal.uncertainty.get(f'relays[{rl.node}].latency_ns', float('nan')):.3g} |")
    for d in cal.devices:
        lines.append(f"| device {d.name} attach GB/s | {d.attach_bandwidth_gb_s:.4g} | |")
    lines.append(f"| core max_outstanding_misses / write_cost_factor / write latency | {cal.core.max_outstanding_misses} / {cal.core.write_cost_factor:.4g} / {cal.core.write_latency:.4g} | |")
    lines += ["", "## Sources", ""] + [f"- `{x['path']}` ({x['tool']} {x['tool_version'] or ''}, sha256 `{x['sha256'][:16]}…`)" for x in s["sources"]]  # type: ignore[index, union-attr]
    lines += ["", "## Figures", ""] + [f"![{f}]({f})" for f in s["figures"]]  # type: ignore[union-attr]
    tmp = out / "README.md.tmp"
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(out / "README.md")


def main(argv: list[str]) -> int:
    import os

    os.chdir(ROOT)
    names = argv or list(SPECS)
    summaries = []
    for n in names:
        s = run(n)
        summaries.append(s)
        for r in s["checks"]:  # type: ignore[attr-defined]
            print(f"{n:22} {r['check']:55} {r['mape_pct']:>8} %  target {r['target_pct']}  met {r['met']}")
    if not argv:
        _index(summaries)
    return 0


def _index(summaries: list[dict[str, object]]) -> None:
    lines = [
        "# Shipped calibrations",
        "",
        "`run.py` fits every shipped calibration (`topologies/<machine>.cal.json`) from the measurement files in",
        "`tests/data/measurements/` and writes one validation report per machine (`experiments/calibration-<machine>/`).",
        "",
        "```",
        ".venv/bin/python experiments/calibration-shipped/run.py",
        "```",
        "",
        "Targets: the idle-latency table a calibration was fitted on reproduced within 3 % MAPE (in-sample); a",
        "held-out table within 10 % MAPE.",
        "",
        "| machine | check | kind | method | cells | MAPE % | target % | met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        for r in s["checks"]:  # type: ignore[attr-defined]
            met = "n/a" if r["met"] is None else ("yes" if r["met"] else "**no**")
            tgt = "-" if r["target_pct"] is None else f"{r['target_pct']:g}"
            lines.append(
                f"| [{s['machine']}](../calibration-{s['machine']}/README.md) | {r['check']} | {r['kind']} | "
                f"{r['method']} | {r['cells']} | {r['mape_pct']} | {tgt} | {met} |"
            )
    lines += [
        "",
        "The `seed-000-4node` calibration has no in-sample latency check: its article measured only the NIC, so",
        "its DRAM timing stays nominal (said in its provenance and README).",
    ]
    p = Path(__file__).resolve().parent / "README.md"
    tmp = p.with_name("README.md.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(p)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
