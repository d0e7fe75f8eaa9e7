"""apply_calibration gives one timed view: what every report shows is what the engine simulates."""

from __future__ import annotations

import pytest

from numasim.engine.caches import cache_levels
from numasim.errors import CalibrationError
from numasim.timing.model import DeviceTiming, apply_calibration
from numasim.timing.resolve import resolve_calibration
from numasim.topology.io import load_machine


def test_caches_and_devices_come_from_the_calibration() -> None:
    machine = load_machine("seed-000-4node")
    cal = resolve_calibration(machine)
    assert cal.caches and cal.devices
    timed = apply_calibration(machine, cal)
    assert [(c.name, c.size_bytes, c.latency_ns) for c in timed.caches] == [
        (c.name, c.size_bytes, c.latency_ns) for c in cal.caches
    ]
    # The engine's levels read the same numbers (and the machine's associativity by name).
    ways = {c.name: c.associativity for c in machine.caches}
    for level in cache_levels(machine, cal):
        shown = next(c for c in timed.caches if c.name == level.name)
        assert (shown.size_bytes, shown.latency_ns, shown.associativity) == (
            level.size_bytes, level.latency_ns, ways.get(level.name, 8)
        )
    dev = {d.name: d for d in cal.devices}
    for d in timed.devices:
        assert (d.attach_latency_ns, d.attach_bandwidth_gb_s) == (
            dev[d.name].attach_latency_ns, dev[d.name].attach_bandwidth_gb_s
        )


def test_changed_numbers_show_and_unknown_devices_are_refused() -> None:
    machine = load_machine("seed-000-4node")
    cal = resolve_calibration(machine)
    first = cal.caches[0]
    bigger = cal.model_copy(update={"caches": [first.model_copy(update={"latency_ns": first.latency_ns * 2})]})
    timed = apply_calibration(machine, bigger)
    assert [c.latency_ns for c in timed.caches] == [first.latency_ns * 2]
    ghost = cal.model_copy(update={"devices": [
        DeviceTiming(name="nosuch-nic", attach_latency_ns=100.0, attach_bandwidth_gb_s=10.0)
    ]})
    with pytest.raises(CalibrationError, match="nosuch-nic"):
        apply_calibration(machine, ghost)
