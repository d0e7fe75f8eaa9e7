"""One run of a sweep: resolve its configuration, simulate, and keep the result in the run's workspace.

A run's workspace (``RESULTS/runs/<run id>/``) holds ``config.json`` (the run as the sweep file gave it, plus the
resolved files), then either ``result.json`` (the whole result, as ``numasim run -o`` writes it) and ``row.json``
(its line of the results table), or ``error.json`` (what failed). Each file is written atomically, ``row.json``
last: a run counts as finished when its ``row.json`` is there, so a sweep killed half way loses no finished run.

:func:`execute` is what a worker calls (a process of the pool or a Dask worker); it never raises for a run that
fails, it records the failure and returns its row.
"""

from __future__ import annotations

import json
import os
import time
import tomllib
import traceback
from pathlib import Path
from typing import Any

from numasim.fileio import atomic_write_text
from numasim.sweep.spec import resolve_path

__all__ = ["execute", "metrics_of", "ROW_FILE", "ERROR_FILE"]

ROW_FILE = "row.json"
ERROR_FILE = "error.json"


def _workload(config: dict[str, Any], base_dir: Path) -> Any:
    from numasim.sweep.spec import SweepError, set_path
    from numasim.workload.spec import _from_data

    path = resolve_path(config["workload"], base_dir)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SweepError(f"workload = {config['workload']!r}: no such file ({path})") from None
    except tomllib.TOMLDecodeError as exc:
        raise SweepError(f"{path}: not valid TOML: {exc}") from None
    # broader paths first, so that a narrower override (workload.phases.0.passes) wins over a broader one
    # (workload.phases) wherever each was given
    for key in sorted((k for k in config if k.startswith("workload.")), key=lambda k: k.count(".")):
        set_path(data, key.removeprefix("workload."), config[key])
    return _from_data(data, str(path))


def _file_spec(spec: str | None, base_dir: Path) -> str | None:
    """A policy or daemon given as ``FILE.py[:KEY=VALUE,...]``, its file relative to the sweep file; names as
    they are."""
    if spec is None:
        return None
    name, sep, params = spec.partition(":")
    if not name.endswith(".py"):
        return spec
    return str(resolve_path(name, base_dir)) + sep + params


def _machine(name: str, base_dir: Path) -> tuple[Any, Any]:
    from numasim.topology.io import load_machine, machine_source

    local = resolve_path(name, base_dir)
    spec = str(local) if local.exists() else name  # a file beside the sweep, else a shipped machine name
    return load_machine(spec), machine_source(spec)


def run_config(config: dict[str, Any], base_dir: Path) -> Any:
    """Simulate one run of a sweep; returns the :class:`~numasim.workload.run.RunOutcome`."""
    from numasim.engine.tlb import TlbSpec
    from numasim.kernel.config import KernelConfig
    from numasim.timing.resolve import resolve_calibration
    from numasim.topology.cpulist import parse_cpulist
    from numasim.workload.run import run_trace, run_workload

    machine, machine_path = _machine(config["machine"], base_dir)
    cal_name = config.get("calibration")
    explicit = None if cal_name in (None, "nominal", "catalog") else resolve_path(cal_name, base_dir)
    cal = resolve_calibration(machine, explicit, nominal=cal_name == "nominal", catalog=cal_name == "catalog",
                              machine_path=machine_path)  # fmt: skip
    sysctls = [(str(k), str(v)) for k, v in (config.get("sysctl") or {}).items()]
    common: dict[str, Any] = dict(
        policy=_file_spec(config.get("policy"), base_dir), mode=config.get("mode", "epoch"), seed=int(config.get("seed", 0)),
        kernel_config=KernelConfig(thp_mode=config.get("thp", "madvise")), sysctls=sysctls,
        daemons=tuple(str(_file_spec(d, base_dir)) for d in config.get("daemon") or ()), tlb=TlbSpec() if config.get("tlb") else None,
    )  # fmt: skip
    if "workload" in config:
        return run_workload(machine, _workload(config, base_dir), cal, **common)
    cpus = parse_cpulist(config["cpus"]) if config.get("cpus") else None
    return run_trace(machine, resolve_path(config["trace"], base_dir), cal, cpus=cpus, **common)


def metrics_of(outcome: Any) -> dict[str, Any]:
    """The run's line of the results table: run time, throughput, latencies, locality, pages and accesses per
    node, request latency percentiles and the kernel's migration counters when the run has them."""
    r = outcome.result
    nodes = r.nodes
    mem = sum(n.memory_accesses for n in nodes)
    local = sum(n.local_accesses for n in nodes)
    remote = sum(n.remote_accesses for n in nodes)
    row: dict[str, Any] = {
        "threads": len(outcome.threads),
        "calibration_id": r.calibration_id,
        "run_time_ms": r.run_time_ns / 1e6,
        "accesses": r.accesses,
        "accesses_per_us": r.accesses / r.run_time_ns * 1e3 if r.run_time_ns > 0 else float("nan"),
        "memory_latency_mean_ns": (
            sum(n.memory_latency_mean_ns * n.memory_accesses for n in nodes if n.memory_accesses) / mem
            if mem else float("nan")
        ),
        "load_to_use_mean_ns": (
            sum(n.load_to_use_mean_ns * n.accesses for n in nodes if n.accesses) / r.accesses
            if r.accesses else float("nan")
        ),
        "memory_accesses": mem,
        "local_fraction": local / (local + remote) if local + remote else float("nan"),
        "failed_pages": outcome.placement.failed_pages,
    }
    for n in nodes:
        row[f"pages_node{n.node}"] = n.pages_resident
        row[f"accesses_node{n.node}"] = n.accesses
    if r.requests:
        for key in ("p50_ns", "p99_ns", "max_ns"):
            if key in r.requests:
                row[f"request_{key}"] = r.requests[key]
    if r.kernel:
        vm = r.kernel.get("vmstat", {})
        for key in ("numa_pages_migrated", "numa_hint_faults", "pgmigrate_success", "pgpromote_success"):
            if key in vm:
                row[key] = vm[key]
    return row


def params_of(config: dict[str, Any]) -> dict[str, Any]:
    # the table's parameter columns: scalars as they are, tables and lists as compact JSON
    out = {}
    for k, v in config.items():
        out[k] = json.dumps(v, sort_keys=True, separators=(",", ":")) if isinstance(v, dict | list) else v
    return out


def execute(index: int, rid: str, config: dict[str, Any], base_dir: str, workspace: str) -> dict[str, Any]:
    """Run one sweep run and record it in ``workspace``; returns its row (``status`` ``"ok"`` or ``"failed"``)."""
    from numasim.report.run_report import write_result_json

    # the sweep runs many simulations side by side: each keeps to one thread (the same results, no oversubscription)
    os.environ.setdefault("NUMASIM_ENGINE_THREADS", "1")
    ws = Path(workspace)
    ws.mkdir(parents=True, exist_ok=True)
    atomic_write_text(ws / "config.json", json.dumps({"index": index, "run_id": rid, "config": config}, indent=1))
    started = time.perf_counter()
    row: dict[str, Any] = {"index": index, "run_id": rid, **params_of(config)}
    try:
        outcome = run_config(config, Path(base_dir))
        write_result_json(outcome, ws / "result.json")
        row.update(status="ok", error="", **metrics_of(outcome))
        if (ws / ERROR_FILE).exists():
            (ws / ERROR_FILE).unlink()  # a failure of an earlier attempt, now done
    except Exception as exc:  # noqa: BLE001 - a failed run is recorded, the sweep goes on
        message = str(exc) or type(exc).__name__
        atomic_write_text(ws / ERROR_FILE, json.dumps({
            "error": message, "type": type(exc).__name__, "traceback": traceback.format_exc(),
        }, indent=1))  # fmt: skip
        row.update(status="failed", error=message.splitlines()[0][:500])
    row["wall_s"] = time.perf_counter() - started
    atomic_write_text(ws / ROW_FILE, json.dumps(row, indent=1, default=str))
    return row
