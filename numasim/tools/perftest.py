"""Virtual linux-rdma perftest ``ib_send_lat`` / ``ib_send_bw`` from a NIC of the machine (source article 000).

The real tests register a send and a receive buffer (``ibv_reg_mr`` pins them: their pages are faulted in by
the process, under its memory policy, from its cpu), then time messages of 2 .. 8 MiB bytes (``-a``), else of
``-s`` bytes (perftest's defaults: 2 for ``ib_send_lat``, 65536 for ``ib_send_bw``):

* ``ib_send_lat``: ping-pong, one message in flight (TX depth 1); ``t_typical`` is half a round trip.
  Simulated: the NIC's DMA *read* of the message from the send buffer and its DMA *write* into the receive
  buffer (loopback on the same port, as in the article: local and remote LID are equal) run concurrently as
  :class:`~numasim.engine.DeviceTransfer` s; one-way time = the later of the two + :attr:`PerftestModel.wire_ns`
  (doorbell, wire, completion: what the memory system does not see).
* ``ib_send_bw``: 128 messages in flight; bandwidth = message size / max(time per message at the NIC's
  message rate, time to DMA-read it at the engine's steady DMA bandwidth from where the buffer lives).

The engine is deterministic, so t_min = t_typical = t_avg = t_max, stdev 0 and peak = average bandwidth.
Output: perftest's banner and table (``--report_gbits``: Gb/sec, else MB/sec), as the article shows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from numasim.engine import DeviceTransfer, simulate
from numasim.tools.context import ToolContext, map_buffer, page_map
from numasim.units import parse_size

__all__ = ["PerftestModel", "PerftestResult", "PerftestUsageError", "ib_send", "format_perftest", "RULE",
           "DEFAULT_SIZE_BYTES"]

RULE = "-" * 87
_MAX_A = 1 << 23
DEFAULT_SIZE_BYTES = {"ib_send_lat": 2, "ib_send_bw": 65536}
"""perftest's default ``--size`` per test (perftest's ``DEF_SIZE_LAT`` and ``DEF_SIZE_BW``)."""


@dataclass(frozen=True)
class PerftestModel:
    """What the memory system does not see. Defaults from article 000's local run of a 200 Gb/s mlx5 NIC."""

    wire_ns: float = 600.0
    """Per message one way: doorbell, NIC pipeline, wire, completion (2-byte local t_typical 1.27 us minus DMA)."""
    max_message_rate_mpps: float = 4.1
    """The NIC's small-message rate (article 000: 4.1 Mpps from 2 B to 2 KiB)."""
    bw_probe_bytes: int = 1 << 20
    """Bytes the engine reads to measure the steady DMA bandwidth for ``ib_send_bw``."""


class PerftestUsageError(ValueError):
    """A perftest command line the virtual perftest cannot run; ``str()`` is the message."""


@dataclass
class PerftestArgs:
    test: str
    device: str | None = None
    all_sizes: bool = False
    size: int = 2
    """Message size; :data:`DEFAULT_SIZE_BYTES` of the test unless ``-s`` is given."""
    iterations: int = 1000
    gbits: bool = False
    host: str | None = None


def parse_perftest_args(test: str, argv: Sequence[str]) -> PerftestArgs:
    a = PerftestArgs(test, size=DEFAULT_SIZE_BYTES.get(test, 2))
    i = 0
    args = list(argv)
    while i < len(args):
        opt = args[i]
        i += 1
        if opt in ("-a", "--all"):
            a.all_sizes = True
        elif opt in ("-F", "--CPU-freq", "-R", "--rdma_cm"):
            pass
        elif opt == "--report_gbits":
            a.gbits = True
        elif opt in ("-d", "--ib-dev", "-s", "--size", "-n", "--iters", "-x", "--gid-index", "-i", "--ib-port"):
            if i >= len(args):
                raise PerftestUsageError(f"{test}: option {opt} needs a value")
            value = args[i]
            i += 1
            if opt in ("-d", "--ib-dev"):
                a.device = value
            elif opt in ("-s", "--size"):
                try:
                    a.size = parse_size(value)
                except ValueError:
                    a.size = 0
                if a.size < 1:
                    raise PerftestUsageError(f"{test}: -s {value!r} is not a message size in bytes (1, 64K, 8M ...)")
            elif opt in ("-n", "--iters"):
                a.iterations = int(value) if value.strip().isdigit() else 0
                if a.iterations < 1:
                    raise PerftestUsageError(f"{test}: -n {value!r} is not a number of iterations")
        elif opt.startswith("-"):
            raise PerftestUsageError(f"{test}: unrecognized option '{opt}'")
        else:
            a.host = opt
    return a


@dataclass
class PerftestResult:
    test: str
    """``"ib_send_lat"`` or ``"ib_send_bw"``."""
    device: str
    device_node: int
    size_bytes: list[int]
    iterations: int
    latency_us: list[float] = field(default_factory=list)
    bandwidth_gb_s: list[float] = field(default_factory=list)
    """Decimal GB/s (x8 = Gb/s)."""
    gbits: bool = False
    buffer_pages_per_node: dict[int, int] = field(default_factory=dict)
    calibration_id: str = ""
    seed: int = 0

    @property
    def bandwidth_gbit_s(self) -> list[float]:
        return [8 * b for b in self.bandwidth_gb_s]


def ib_send(ctx: ToolContext, test: str, argv: Sequence[str] = (), model: PerftestModel | None = None) -> PerftestResult:
    """Run the virtual ``ib_send_lat`` or ``ib_send_bw`` with perftest options ``argv`` in ``ctx``.

    Examples
    --------
    >>> from numasim.topology.io import load_machine
    >>> from numasim.tools.context import tool_context
    >>> from numasim.timing import resolve_calibration
    >>> m = load_machine("seed-000-4node")
    >>> r = ib_send(tool_context(m, resolve_calibration(m), membind=[1]), "ib_send_bw", ["-s", "8M"])
    >>> r.size_bytes, round(r.bandwidth_gbit_s[0])
    ([8388608], 132)
    """
    model = model or PerftestModel()
    if test not in ("ib_send_lat", "ib_send_bw"):
        raise PerftestUsageError(f"unknown perftest {test!r} (numasim has ib_send_lat and ib_send_bw)")
    a = parse_perftest_args(test, argv)
    nics = [d for d in ctx.machine.devices if d.kind == "nic"] or list(ctx.machine.devices)
    if a.device is None:
        if not nics:
            raise PerftestUsageError(f" No IB devices found on {ctx.machine.name}")
        dev = nics[0]
    else:
        found = [d for d in ctx.machine.devices if d.name == a.device]
        if not found:
            raise PerftestUsageError(f" IB device {a.device} not found\n Unable to find the Infiniband/RoCE device")
        dev = found[0]
    sizes = [1 << k for k in range(1, 24)] if a.all_sizes else [a.size]
    biggest = max(max(sizes), model.bw_probe_bytes)
    send = map_buffer(ctx, biggest)
    recv = map_buffer(ctx, biggest)
    pm = page_map([send, recv])
    res = PerftestResult(test, dev.name, dev.node, sizes, a.iterations, gbits=a.gbits, calibration_id=ctx.calibration.id,
                         seed=ctx.seed)
    pages: dict[int, int] = {}
    for v in (send, recv):
        for n, c in v.pages_per_node().items():
            pages[n] = pages.get(n, 0) + c
    res.buffer_pages_per_node = dict(sorted(pages.items()))
    if test == "ib_send_lat":
        for s in sizes:
            xfers = [DeviceTransfer(dev.name, "read", send.start, s), DeviceTransfer(dev.name, "write", recv.start, s)]
            r = simulate(ctx.machine, ctx.calibration, [], [], pm, devices=xfers, seed=ctx.seed,
                         record_latencies=False)
            one_way_ns = max(d.finish_ns for d in r.devices) + model.wire_ns
            res.latency_us.append(one_way_ns / 1000.0)
    else:
        r = simulate(ctx.machine, ctx.calibration, [], [], pm,
                     devices=[DeviceTransfer(dev.name, "read", send.start, model.bw_probe_bytes)], seed=ctx.seed,
                     record_latencies=False)
        dma_gb_s = r.devices[0].bandwidth_gb_s
        for s in sizes:
            per_msg_ns = max(1e3 / model.max_message_rate_mpps, s / dma_gb_s)
            res.bandwidth_gb_s.append(s / per_msg_ns)
    return res


_LAT_HEADER = (
    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   "
    "99% percentile[usec]   99.9% percentile[usec] "
)


def _banner(r: PerftestResult) -> list[str]:
    lat = r.test == "ib_send_lat"
    title = "Send Latency Test" if lat else "Send BW Test"
    lines = [
        RULE,
        f"                    {title}",
        f" Dual-port       : OFF\t\tDevice         : {r.device}",
        " Number of qps   : 1\t\tTransport type : IB",
        " Connection type : RC\t\tUsing SRQ      : OFF",
        " PCIe relax order: ON",
        " ibv_wr* API     : ON",
        f" TX depth        : {1 if lat else 128}",
    ]
    if not lat:
        lines.append(" CQ Moderation   : 100")
    lines += [
        " Mtu             : 4096[B]",
        " Link type       : IB",
        f" Max inline data : {236 if lat else 0}[B]",
        " rdma_cm QPs\t : OFF",
        " Data ex. method : Ethernet",
        RULE,
        " local address: LID 0xaf QPN 0x0033 PSN 0x9b2924",
        " remote address: LID 0xaf QPN 0x0032 PSN 0xefedf0",
        RULE,
    ]
    return lines


def _bw_cell(v: float) -> str:
    # perftest prints tiny rates with 6 decimals (article 000: "0.051346"), others with 2
    return f"{v:.6f}" if v < 0.1 else f"{v:.2f}"


def format_perftest(r: PerftestResult) -> str:
    """perftest's output (banner, table, closing rule) for one run."""
    lines = _banner(r)
    if r.test == "ib_send_lat":
        lines.append(_LAT_HEADER)
        for s, t in zip(r.size_bytes, r.latency_us, strict=True):
            lines.append(
                f" {s:<7d} {r.iterations:<7d}          {t:<7.2f}        {t:<7.2f}      {t:<7.2f}  \t       "
                f"{t:<7.2f}     \t{0.0:<7.2f}\t\t{t:<7.2f} \t\t{t:<7.2f}"
            )
    else:
        unit = "Gb/sec" if r.gbits else "MB/sec"
        lines.append(f" #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   MsgRate[Mpps]")
        for s, bw in zip(r.size_bytes, r.bandwidth_gb_s, strict=True):
            value = bw * 8 if r.gbits else bw * 1e9 / 2**20
            rate = bw * 1e9 / s / 1e6
            lines.append(f" {s:<10d} {r.iterations:<10d}     {_bw_cell(value):<18} {_bw_cell(value):<18}  {rate:.6f}")
    lines.append(RULE)
    return "\n".join(lines) + "\n"
