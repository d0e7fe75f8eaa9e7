"""Fuzz: measurement files (Intel mlc, STREAM, a kerncraft machine file), mutated from valid ones, through
``calibrate``; a calibration is written whole or not at all."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from _fuzz import assert_clean, cli, fuzz_settings, mutated
from hypothesis import given

MLC = Path("/work/shared/data/mlc/kuleuven-thinking-2s-ivybridge-E5-2680v2.md")
_counter = itertools.count()

# STREAM 5.10's report layout with round, physically possible rates for a 2-socket server (a test input,
# not a measurement).
STREAM = """-------------------------------------------------------------
STREAM version $Revision: 5.10 $
-------------------------------------------------------------
This system uses 8 bytes per array element.
-------------------------------------------------------------
Array size = 10000000 (elements), Offset = 0 (elements)
Memory per array = 76.3 MiB (= 0.1 GiB).
Total memory required = 228.9 MiB (= 0.2 GiB).
Each kernel will be executed 10 times.
-------------------------------------------------------------
Number of Threads requested = 24
Number of Threads counted = 24
-------------------------------------------------------------
Function    Best Rate MB/s  Avg time     Min time     Max time
Copy:           80000.0     0.002010     0.002000     0.002030
Scale:          79000.0     0.002030     0.002025     0.002050
Add:            85000.0     0.002830     0.002824     0.002850
Triad:          85500.0     0.002810     0.002807     0.002830
-------------------------------------------------------------
Solution Validates: avg error less than 1.000000e-13 on all three arrays
-------------------------------------------------------------
"""

# kerncraft's machine-file layout with round, physically possible bandwidths (a test input, not a measurement).
KERNCRAFT = """model name: Intel(R) Xeon(R) CPU E5-2680 v2 @ 2.80GHz
clock: 2.8 GHz
sockets: 2
cores per socket: 10
threads per core: 2
NUMA domains per socket: 1
cores per NUMA domain: 10
benchmarks:
  measurements:
    L3:
      1:
        cores: [1, 2, 3]
        results:
          copy: [30.0 GB/s, 60.0 GB/s, 88.0 GB/s]
          triad: [32.0 GB/s, 63.0 GB/s, 93.0 GB/s]
    MEM:
      1:
        cores: [1, 2, 3, 4]
        results:
          copy: [9.0 GB/s, 17.0 GB/s, 24.0 GB/s, 28.0 GB/s]
          load: [10.0 GB/s, 19.0 GB/s, 27.0 GB/s, 33.0 GB/s]
          triad: [9.5 GB/s, 18.0 GB/s, 25.0 GB/s, 30.0 GB/s]
"""


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-measurements")


@pytest.mark.parametrize(("kind", "suffix", "fit_on"), [("mlc", ".md", "latency"), ("mlc", ".md", None),
                                                        ("stream", ".txt", None), ("kerncraft", ".yml", None)])
def test_mutated_measurements(work: Path, kind: str, suffix: str, fit_on: str | None) -> None:
    if kind == "mlc" and not MLC.is_file():
        pytest.skip(f"{MLC} is not here")
    base = {"mlc": MLC.read_text() if MLC.is_file() else "", "stream": STREAM, "kerncraft": KERNCRAFT}[kind]

    @fuzz_settings({"mlc": 20 if fit_on else 4, "stream": 20, "kerncraft": 10}[kind])
    @given(mutated(base))
    def check(text: str) -> None:
        path = work / f"{kind}{next(_counter)}{suffix}"
        path.write_text(text)
        out = work / f"c{next(_counter)}.json"
        o = cli("calibrate", str(path), "-m", "seed-001-e5-2680v2", "-o", str(out),
                *(["--fit-on", fit_on] if fit_on else []))
        assert_clean(o, names=(path.name,))
        assert (o.code == 0) == out.is_file()

    check()
