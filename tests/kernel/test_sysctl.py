"""numasim.kernel.sysctl: the knob table, ordered writes, errors naming the knob, and the places that take them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numasim.cli import main
from numasim.errors import SysctlError, WorkloadError
from numasim.kernel.balancing_config import NumaBalancingConfig
from numasim.kernel.config import KernelConfig
from numasim.kernel.sysctl import KNOBS, knob_for, sysctl_values
from numasim.topology.builders import glueless
from numasim.topology.io import save_machine_toml
from numasim.workload.spec import loads_workload


def test_defaults_are_the_kernel_sources() -> None:
    values = sysctl_values(KernelConfig())
    # kernel/sched/fair.c: scan delay 1000 ms, period 1000..60000 ms, 256 MB, hot threshold 1 s, 65536 MB/s.
    assert values["kernel.numa_balancing_scan_delay_ms"] == "1000"
    assert values["kernel.numa_balancing_scan_period_min_ms"] == "1000"
    assert values["kernel.numa_balancing_scan_period_max_ms"] == "60000"
    assert values["kernel.numa_balancing_scan_size_mb"] == "256"
    assert values["/sys/kernel/debug/sched/numa_balancing/hot_threshold_ms"] == "1000"
    assert values["kernel.numa_balancing_promote_rate_limit_MBps"] == "65536"
    assert values["vm.watermark_scale_factor"] == "10"
    assert values["vm.lowmem_reserve_ratio"] == "256 256 32 0"
    assert values["/sys/kernel/mm/transparent_hugepage/defrag"] == "always defer defer+madvise [madvise] never"
    for knob in KNOBS:  # every table default matches what a fresh KernelConfig reads
        if knob.name in values and knob.field not in ("thp_mode", "thp_defrag"):
            assert values[knob.name] == knob.default, knob.name


def test_old_and_new_names_are_one_knob() -> None:
    old = KernelConfig().with_sysctls({"kernel.numa_balancing_scan_size_mb": "512"})
    new = KernelConfig().with_sysctls({"/sys/kernel/debug/sched/numa_balancing/scan_size_mb": "512"})
    assert old.numa_balancing == new.numa_balancing == NumaBalancingConfig(scan_size_mb=512)
    assert knob_for("/proc/sys/kernel/numa_balancing")[0].name == "kernel.numa_balancing"
    assert knob_for("kernel/numa_balancing")[0].name == "kernel.numa_balancing"


def test_writes_apply_in_order_like_sysctl_w() -> None:
    cfg = KernelConfig().with_sysctls([("vm.watermark_scale_factor", "100"), ("vm.watermark_scale_factor", "20")])
    assert cfg.watermark_scale_factor == 20
    assert cfg.sysctl_writes == (("vm.watermark_scale_factor", "100"), ("vm.watermark_scale_factor", "20"))


def test_article_004_aggressive_scanning() -> None:
    cfg = KernelConfig().with_sysctls({
        "kernel.numa_balancing": 1, "kernel.numa_balancing_scan_delay_ms": 100,
        "kernel.numa_balancing_scan_period_min_ms": 2000, "kernel.numa_balancing_scan_size_mb": 512,
    })
    nb = cfg.numa_balancing
    assert (nb.mode, nb.scan_delay_ms, nb.scan_period_min_ms, nb.scan_size_mb, nb.enabled) == (1, 100, 2000, 512, True)


def test_thp_is_one_knob() -> None:
    never = KernelConfig().with_sysctls({"/sys/kernel/mm/transparent_hugepage/enabled": "never"})
    assert never.thp_mode == "never" and never.thp_enabled is False
    assert KernelConfig(thp_enabled=False).thp_mode == "never"
    back = never.with_sysctls({"/sys/kernel/mm/transparent_hugepage/enabled": "madvise"})
    assert back.thp_enabled is True and back.thp_mode == "madvise"


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("kernel.numa_balancing", "7", "sysctl: kernel.numa_balancing = 7: valid values are 0..3"),
        ("kernel.numa_balancing", "-1", "valid values are 0..3"),
        ("kernel.numa_balancing_scan_size_mb", "0", "kernel.numa_balancing_scan_size_mb = 0: valid values are 1.."),
        ("vm.watermark_scale_factor", "3001", "valid values are 1..3000"),
        ("vm.min_free_kbytes", "lots", "not an integer"),
        ("/sys/kernel/mm/transparent_hugepage/enabled", "sometimes", "one of always, madvise, never"),
        ("vm.lowmem_reserve_ratio", "256", "3 to 5 integers"),
        ("vm.swappiness", "10", "no such knob"),
    ],
)
def test_bad_writes_name_the_knob_and_its_values(name: str, value: str, message: str) -> None:
    with pytest.raises(SysctlError, match=message.replace(".", r"\.").replace("(", r"\(")):
        KernelConfig().with_sysctls({name: value})


def test_nothing_is_half_applied() -> None:
    base = KernelConfig()
    with pytest.raises(SysctlError):
        base.with_sysctls([("kernel.numa_balancing", "1"), ("vm.zone_reclaim_mode", "9")])
    assert base.numa_balancing.mode == 0 and base.sysctl_writes == ()


@given(st.integers(min_value=-(2**40), max_value=2**40))
def test_an_integer_knob_takes_exactly_its_range(value: int) -> None:
    knob = knob_for("vm.min_unmapped_ratio")[0]
    if 0 <= value <= 100:
        assert KernelConfig().with_sysctls({knob.name: value}).min_unmapped_ratio == value
    else:
        with pytest.raises(SysctlError, match="valid values are 0..100"):
            KernelConfig().with_sysctls({knob.name: value})


def test_workload_sysctl_table_with_dotted_or_quoted_keys() -> None:
    base = 'threads = [{id = 0, cpu = 0}]\n'
    quoted = loads_workload(base + '[sysctl]\n"kernel.numa_balancing" = 1\n')
    dotted = loads_workload(base + '[sysctl]\nkernel.numa_balancing = 1\n"vm.nr_hugepages" = 4\n')
    assert quoted.sysctl == {"kernel.numa_balancing": 1}
    assert dotted.sysctl == {"kernel.numa_balancing": 1, "vm.nr_hugepages": 4}
    with pytest.raises(WorkloadError, match="kernel.numa_balancing = 9: valid values are 0..3"):
        loads_workload(base + "[sysctl]\nkernel.numa_balancing = 9\n", "w.toml")


@pytest.fixture
def small(tmp_path: Path) -> str:
    path = tmp_path / "small.toml"
    save_machine_toml(glueless(2, cpus_per_node=2, memory_bytes=256 << 20), path)
    return str(path)


def test_run_records_the_kernel_and_the_command_line_wins(
    small: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = tmp_path / "w.toml"
    w.write_text('threads = [{id = 0, cpu = 0}]\nallocations = [{name = "a", size_bytes = "64K"}]\n'
                 '[sysctl]\n"kernel.numa_balancing" = 1\n"vm.watermark_scale_factor" = 50\n'
                 '[[phases]]\npattern = "sequential"\nallocation = "a"\naccesses = 100\n')
    out = tmp_path / "r.json"
    assert main(["run", "-m", small, "-w", str(w), "--nominal", "--no-progress", "-o", str(out),
                 "--sysctl", "kernel.numa_balancing=0", "--thp", "never"]) == 0
    kernel = json.loads(out.read_text())["inputs"]["kernel"]
    assert kernel["sysctl_writes"] == [["kernel.numa_balancing", "1"], ["vm.watermark_scale_factor", "50"],
                                       ["kernel.numa_balancing", "0"]]
    assert kernel["sysctl"]["kernel.numa_balancing"] == "0"
    assert kernel["sysctl"]["/sys/kernel/mm/transparent_hugepage/enabled"] == "always madvise [never]"
    capsys.readouterr()
    assert main(["run", "-m", small, "-w", str(w), "--nominal", "--sysctl", "kernel.numa_balancing=4"]) == 2
    assert "numasim: error: sysctl: kernel.numa_balancing = 4: valid values are 0..3" in capsys.readouterr().err
    assert main(["run", "-m", small, "-w", str(w), "--nominal", "--sysctl", "kernel.numa_balancing"]) == 2
    assert "expected NAME=VALUE" in capsys.readouterr().err


def test_kernel_commands_take_sysctl(small: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernel", "zoneinfo", small, "--sysctl", "vm.min_free_kbytes=8192"]) == 0
    wide = capsys.readouterr().out
    assert main(["kernel", "zoneinfo", small, "--sysctl", "vm.min_free_kbytes=1024"]) == 0
    assert capsys.readouterr().out != wide
    assert main(["numactl", "--machine", small, "--sysctl", "kernel.numa_balancing=1", "--json", "--", "true"]) == 0
    assert json.loads(capsys.readouterr().out)["sysctl_writes"] == [["kernel.numa_balancing", "1"]]
    assert main(["numastat", "--machine", small, "--sysctl", "vm.numa_stat=2"]) == 2
    assert "vm.numa_stat = 2: valid values are 0..1" in capsys.readouterr().err
