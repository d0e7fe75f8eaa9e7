"""What-if experiments at scale: a sweep file, its runs on a process pool or Dask, one table, figures, a report.

>>> from numasim.sweep import loads_sweep
>>> spec = loads_sweep('name = "x"\\n[defaults]\\nmachine = "seed-003-2node"\\nworkload = "w.toml"\\n'
...                    '[grid]\\nseed = [1, 2]')
>>> [r["seed"] for r in spec.expand()]
[1, 2]
"""

from numasim.sweep.report import save_figures, write_report
from numasim.sweep.runner import results_table, run
from numasim.sweep.spec import SweepError, SweepSpec, load_sweep, loads_sweep

__all__ = [
    "SweepSpec",
    "SweepError",
    "load_sweep",
    "loads_sweep",
    "run",
    "results_table",
    "save_figures",
    "write_report",
]
