"""Running a sweep: a process pool by default, or Dask distributed, with workspaces, resume and progress.

Where the runs go:

* no option: a local process pool with one process per cpu (``concurrent.futures``);
* ``workers=N``: a Dask ``LocalCluster`` of N single-threaded worker processes started for the sweep;
* ``scheduler="tcp://HOST:8786"``: a running Dask cluster (``dask scheduler`` and ``dask worker`` started by the
  user; the workers need numasim installed and the sweep's files at the same paths).

Dask is the engine for users who outgrow one machine: it places tasks, restarts them on another worker when a
worker dies, and needs no code of ours for either. Each run writes its own workspace (:mod:`numasim.sweep.execute`)
as it finishes, so an interrupted sweep (Ctrl-C, a killed worker, a lost cluster) keeps every run that finished and
``resume=True`` runs only the others. At the end every run's row goes into one table, ``results.parquet`` and
``results.csv`` (one row per run, every parameter and every metric), and the figures are drawn.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numasim.allocator import tune_allocator
from numasim.fileio import atomic_path, atomic_write_text
from numasim.sweep.execute import ROW_FILE, execute, params_of
from numasim.sweep.spec import SweepError, SweepSpec, load_sweep, run_ids

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["run", "results_table", "Progress"]

SPEC_FILE = "sweep.json"


class Progress:
    """Runs done / total and the time left, on stderr: rewritten in place on a terminal, a line per tenth of the
    runs otherwise."""

    def __init__(self, total: int, enabled: bool = True, stream: Any = None) -> None:
        self.total, self.enabled = total, enabled
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.perf_counter()
        self.done = self.failed = 0
        self._last_tenth = -1

    def update(self, row: dict[str, Any]) -> None:
        self.done += 1
        self.failed += row.get("status") != "ok"
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.started
        left = elapsed / self.done * (self.total - self.done)
        text = (f"runs {self.done}/{self.total} done" + (f" ({self.failed} failed)" if self.failed else "")
                + f", {_duration(elapsed)} so far, about {_duration(left)} left")  # fmt: skip
        if self.tty:
            self.stream.write("\r" + text.ljust(78))
            if self.done == self.total:
                self.stream.write("\n")
        elif self.done * 10 // max(self.total, 1) != self._last_tenth or self.done == self.total:
            self._last_tenth = self.done * 10 // max(self.total, 1)
            self.stream.write(text + "\n")
        self.stream.flush()


def _duration(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


def _prepare(spec: SweepSpec, out: Path, resume: bool) -> None:
    spec_json = json.dumps(spec.model_dump(), indent=1, sort_keys=True, default=str)
    existing = out / SPEC_FILE
    if existing.exists():
        if not resume:
            raise SweepError(f"{out}: holds a sweep already; add --resume to finish it, or choose another directory")
        if json.loads(existing.read_text(encoding="utf-8")) != json.loads(spec_json):
            raise SweepError(f"{out}: holds another sweep (its {SPEC_FILE} differs from this spec); "
                             "--resume continues the same sweep only")  # fmt: skip
    elif out.exists() and any(out.iterdir()):
        raise SweepError(f"{out}: exists and is not a sweep's results directory (choose a new or empty one)")
    out.mkdir(parents=True, exist_ok=True)
    (out / "runs").mkdir(exist_ok=True)
    atomic_write_text(existing, spec_json)


def _finished(ws: Path) -> bool:
    try:
        return json.loads((ws / ROW_FILE).read_text(encoding="utf-8")).get("status") == "ok"
    except (OSError, ValueError):
        return False


def run(
    spec: SweepSpec | str | Path,
    out_dir: str | Path | None = None,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    processes: int | None = None,
    resume: bool = False,
    progress: bool = False,
    figures: bool = True,
) -> pd.DataFrame:
    """Run every run of ``spec`` (a :class:`SweepSpec` or a sweep file) and return the results table: one row
    per run (``status`` ``"ok"`` or ``"failed"`` with its ``error``), every parameter and every metric. Its
    ``attrs`` say where it was written (``directory``; None for a temporary one) and how many runs were run
    (``ran``) or found finished by ``resume`` (``skipped``).

    Parameters
    ----------
    out_dir : path, optional
        The results directory (created; must be new or empty unless ``resume``). None: a temporary directory,
        removed afterwards (the table is returned).
    workers, scheduler : optional
        Run on Dask: a ``LocalCluster`` of ``workers`` processes, or the cluster at ``scheduler``.
    processes : int, optional
        Size of the default local process pool (default: one per cpu).
    resume : bool
        Continue the sweep in ``out_dir``: runs whose workspace holds a successful row are not run again (failed
        ones are).
    progress : bool
        Show runs done / total and the time left on stderr.

    Examples
    --------
    >>> from pathlib import Path
    >>> import numasim.sweep as sweep
    >>> spec = sweep.load_sweep(Path(sweep.__file__).parents[2] / "examples" / "sweeps" / "tiny.toml")
    >>> table = sweep.run(spec, processes=1, figures=False)
    >>> list(table["policy"]), list(table["status"])
    (['local', 'interleave:all'], ['ok', 'ok'])
    """
    if isinstance(spec, str | Path):
        spec = load_sweep(spec)
    if workers is not None and scheduler is not None:
        raise SweepError("give --workers N (a local Dask cluster) or --scheduler ADDRESS (a running one), not both")
    if workers is not None and workers < 1:
        raise SweepError(f"--workers = {workers}: must be >= 1")
    if processes is not None and processes < 1:
        raise SweepError(f"processes = {processes}: must be >= 1")
    temporary = out_dir is None
    # absolute: workers (a Dask worker elsewhere, or in another directory) write their workspaces there
    out = Path(tempfile.mkdtemp(prefix="numasim-sweep-")) if out_dir is None else Path(out_dir).resolve()
    configs = spec.expand()
    try:
        check_runs(spec, configs)  # before the results directory is touched: a bad spec leaves nothing behind
        _prepare(spec, out, resume)
        jobs = []
        skipped = 0
        for i, (config, rid) in enumerate(zip(configs, run_ids(configs), strict=True)):
            ws = out / "runs" / rid
            if resume and _finished(ws):
                skipped += 1
                continue
            jobs.append((i, rid, config, str(Path(spec.base_dir).resolve()), str(ws)))
        bar = Progress(len(jobs), enabled=progress)
        if jobs:
            if workers is not None or scheduler is not None:
                _run_dask(jobs, bar, workers, scheduler)
            else:
                _run_pool(jobs, bar, processes or os.cpu_count() or 1)
        table = results_table(out, configs)
        if figures:
            from numasim.sweep.report import save_figures

            save_figures(table, out / "figures", x=spec.x_parameter())
        table.attrs.update(directory=None if temporary else out, ran=len(jobs), skipped=skipped)
        return table
    finally:
        if temporary:
            shutil.rmtree(out, ignore_errors=True)


def _run_pool(jobs: list[tuple[Any, ...]], bar: Progress, n: int) -> None:
    """The default: a local process pool. A worker process that dies breaks the pool and every run it still held;
    those runs are then tried again one at a time, each in a process of its own, so that only a run that itself
    kills its process counts as failed."""
    broken = _pool_round(jobs, bar, n, last=False)
    for job in broken:
        _pool_round([job], bar, 1, last=True)


def _pool_round(jobs: list[tuple[Any, ...]], bar: Progress, n: int, *, last: bool) -> list[tuple[Any, ...]]:
    """Run ``jobs`` on one pool of ``n`` processes; returns the jobs a broken pool lost (recorded as failed when
    ``last``)."""
    lost: list[tuple[Any, ...]] = []
    pool = ProcessPoolExecutor(max_workers=min(n, len(jobs)), initializer=tune_allocator)
    try:
        futures: dict[Future[dict[str, Any]], tuple[Any, ...]] = {pool.submit(execute, *job): job for job in jobs}
        not_done: Iterable[Future[dict[str, Any]]] = set(futures)
        while not_done:
            done, not_done = wait(not_done, return_when=FIRST_COMPLETED)
            for f in done:
                job = futures[f]
                try:
                    row = f.result()
                except BrokenProcessPool:
                    if not last:
                        lost.append(job)
                        continue
                    row = _failed(job, "the worker process running it died")
                bar.update(row)
    finally:
        # on Ctrl-C (or any error) the runs not started are cancelled, not run; finished ones are on disk
        pool.shutdown(wait=True, cancel_futures=True)
    return sorted(lost, key=lambda job: job[0])


def _failed(job: tuple[Any, ...], why: str) -> dict[str, Any]:
    index, rid, config, _, workspace = job
    ws = Path(workspace)
    ws.mkdir(parents=True, exist_ok=True)
    row = {"index": index, "run_id": rid, **params_of(config), "status": "failed", "error": why}
    atomic_write_text(ws / "error.json", json.dumps({"error": why}, indent=1))
    atomic_write_text(ws / ROW_FILE, json.dumps(row, indent=1, default=str))
    return row


def _run_dask(jobs: list[tuple[Any, ...]], bar: Progress, workers: int | None, scheduler: str | None) -> None:
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:  # pragma: no cover - a dependency of numasim
        raise SweepError("--workers/--scheduler need Dask distributed (pip install 'dask[distributed]')") from None
    import dask

    cluster = None
    # Dask's statistical profiler samples every worker thread every 10 ms; a sweep does not need the profile
    settings = dask.config.set({"distributed.worker.profile.enabled": False})
    try:
        if scheduler is not None:
            try:
                client = Client(scheduler, timeout="10s")
            except OSError as exc:
                raise SweepError(f"--scheduler {scheduler}: cannot reach a Dask scheduler there ({exc})") from None
        else:
            # one single-threaded worker process per worker (each under a nanny, which restarts it if it dies)
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
            client = Client(cluster)
        with client:
            # keys name the results directory too: two sweeps of the same runs on one cluster stay apart
            tag = hashlib.sha256(str(Path(jobs[0][4]).parent).encode()).hexdigest()[:8]
            futures = [client.submit(execute, *job, key=f"numasim-run-{tag}-{job[1]}", pure=False) for job in jobs]
            by_key = {f.key: job for f, job in zip(futures, jobs, strict=True)}
            for f in as_completed(futures):
                try:
                    row = f.result()
                except Exception as exc:  # noqa: BLE001 - a worker lost for good: recorded, the sweep goes on
                    row = _failed(by_key[f.key], f"the Dask task failed: {exc}")
                bar.update(row)
    finally:
        if cluster is not None:
            cluster.close()
        settings.__exit__(None, None, None)


def _one_type(column: pd.Series) -> pd.Series:
    """One type per column, as Parquet needs: a column of numbers (missing = NaN) stays as it is; booleans with
    gaps become pandas' nullable boolean; anything else becomes text, missing values staying missing (None)."""
    import pandas as pd

    if column.dtype != object:
        return column
    present = [v for v in column if not (v is None or (isinstance(v, float) and v != v))]
    if present and all(isinstance(v, bool) for v in present):
        return column.astype("boolean")

    def text(v: Any) -> str | None:
        if v is None or (isinstance(v, float) and v != v):
            return None
        if isinstance(v, dict | list):
            return json.dumps(v, sort_keys=True)
        return v if isinstance(v, str) else str(v)

    return pd.Series([text(v) for v in column], index=column.index, dtype=object)


def check_runs(spec: SweepSpec, configs: list[dict[str, Any]]) -> None:
    """Before anything runs: every machine loads, every file a run names exists, every workload (with its
    ``workload.PATH`` overrides) is a valid workload. Raises :class:`SweepError` naming the run and the value."""
    from numasim.errors import NumasimError
    from numasim.sweep.execute import _machine, _workload

    base = Path(spec.base_dir).resolve()
    checked: set[str] = set()
    for i, config in enumerate(configs):
        where = f"run {i + 1}"
        try:
            key = "machine:" + config["machine"]
            if key not in checked:
                _machine(config["machine"], base)
                checked.add(key)
            for name in ("trace", "calibration"):
                value = config.get(name)
                if value is not None and not (name == "calibration" and value in ("nominal", "catalog")):
                    if not spec.path(value).is_file():
                        raise SweepError(f"{name} = {value!r}: no such file ({spec.path(value)})")
            if "workload" in config:
                key = json.dumps({k: v for k, v in config.items() if k.startswith("workload")}, sort_keys=True)
                if key not in checked:
                    _workload(config, base)
                    checked.add(key)
        except NumasimError as exc:
            raise SweepError(f"{where}: {exc}") from None


def results_table(out: str | Path, configs: list[dict[str, Any]] | None = None) -> pd.DataFrame:
    """Every run's row of a results directory as one table (sorted by the run's position in the sweep), also
    written to ``results.parquet`` and ``results.csv`` there. Runs that never finished are rows with status
    ``"missing"`` when ``configs`` (the sweep's runs) is given."""
    import pandas as pd

    out = Path(out)
    rows = []
    seen = set()
    for row_file in sorted((out / "runs").glob(f"*/{ROW_FILE}")):
        row = json.loads(row_file.read_text(encoding="utf-8"))
        rows.append(row)
        seen.add(row["run_id"])
    for i, rid in enumerate(run_ids(configs or [])):
        if rid not in seen:
            rows.append({"index": i, "run_id": rid, **params_of((configs or [])[i]), "status": "missing",
                         "error": "not run yet"})  # fmt: skip
    table = pd.DataFrame(rows)
    if len(table):
        table = table.sort_values("index", kind="stable").reset_index(drop=True)
    for col in table.columns:
        table[col] = _one_type(table[col])
    with atomic_path(out / "results.parquet") as tmp:
        table.to_parquet(tmp, index=False)
    with atomic_path(out / "results.csv") as tmp:
        table.to_csv(tmp, index=False)
    return table
