"""Traces: npz/csv round trips, streaming in bounded chunks, the text readers and their error lines."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.errors import TraceError
from numasim.workload.access import AccessChunk, concat_chunks
from numasim.workload.trace import read_trace, touched_pages, trace_format, trace_info, write_trace
from numasim.workload.trace.npz import NpzTraceWriter, read_npz, read_npz_header
from numasim.workload.trace.parquet_format import parquet_available
from numasim.workload.trace.perf_script import read_perf_script

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"


def sample(n: int = 1000, seed: int = 0) -> AccessChunk:
    rng = np.random.default_rng(seed)
    return AccessChunk(
        thread=rng.integers(0, 4, n).astype(np.int32),
        address=(rng.integers(0, 1 << 30, n).astype(np.uint64) + np.uint64(1 << 40)),
        is_write=rng.random(n) < 0.3,
        size_bytes=rng.choice([8, 64], n).astype(np.uint16),
        compute_ns=rng.random(n).astype(np.float32),
    )


def same(a: AccessChunk, b: AccessChunk) -> bool:
    return all(np.array_equal(getattr(a, k), getattr(b, k)) for k in ("thread", "address", "is_write", "size_bytes", "compute_ns"))


def test_npz_round_trip_and_header(tmp_path: Path) -> None:
    c = sample()
    path = tmp_path / "t.npz"
    assert write_trace([c.slice(0, 400), c.slice(400, 1000)], path, meta={"seed": 3}) == 1000
    header = read_npz_header(path)
    assert (header["accesses"], header["threads"], header["chunks"], header["meta"]) == (1000, 4, 2, {"seed": 3})
    chunks = list(read_trace(path))
    assert [len(x) for x in chunks] == [400, 600]
    assert same(concat_chunks(chunks), c)
    # it is a real .npz: numpy can open it
    with np.load(path) as z:
        assert np.array_equal(z["c000000.address"], c.address[:400])


def test_npz_csv_npz_round_trip(tmp_path: Path) -> None:
    c = sample(500)
    c = AccessChunk(c.thread, c.address, c.is_write, c.size_bytes, np.round(c.compute_ns, 2).astype(np.float32))
    write_trace([c], tmp_path / "a.npz")
    write_trace(read_trace(tmp_path / "a.npz"), tmp_path / "b.csv")
    write_trace(read_trace(tmp_path / "b.csv"), tmp_path / "c.npz")
    assert same(concat_chunks(read_trace(tmp_path / "c.npz")), c)


def test_large_file_streams_in_bounded_chunks(tmp_path: Path) -> None:
    path = tmp_path / "big.npz"
    with NpzTraceWriter(path) as w:
        for i in range(20):
            w.write(sample(50_000, seed=i))
    total, biggest = 0, 0
    for chunk in read_npz(path):
        total += len(chunk)
        biggest = max(biggest, len(chunk))
    assert total == 1_000_000 and biggest == 50_000
    info = trace_info(read_npz(path))
    assert info.accesses == 1_000_000 and info.threads == 4


@pytest.mark.parametrize("cut", [0.5, 0.95])
def test_truncated_npz(tmp_path: Path, cut: float) -> None:
    path = tmp_path / "t.npz"
    write_trace([sample(20_000)], path)
    data = path.read_bytes()
    bad = tmp_path / "cut.npz"
    bad.write_bytes(data[: int(len(data) * cut)])
    with pytest.raises(TraceError, match="cut.npz"):
        list(read_trace(bad))


def test_corrupt_member_and_missing_header(tmp_path: Path) -> None:
    path = tmp_path / "t.npz"
    write_trace([sample(20_000)], path)
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF
    (tmp_path / "flip.npz").write_bytes(bytes(data))
    with pytest.raises(TraceError, match="flip.npz"):
        list(read_trace(tmp_path / "flip.npz"))
    with zipfile.ZipFile(tmp_path / "nohead.npz", "w") as z:
        z.writestr("x.npy", b"")
    with pytest.raises(TraceError, match="no header.json"):
        list(read_trace(tmp_path / "nohead.npz"))


def test_failed_write_leaves_no_file(tmp_path: Path) -> None:
    def chunks():  # type: ignore[no-untyped-def]
        yield sample(10)
        raise RuntimeError("generator failed")

    for name in ("t.npz", "t.csv"):
        with pytest.raises(RuntimeError):
            write_trace(chunks(), tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_csv_sample() -> None:
    c = concat_chunks(read_trace(DATA / "sample.csv"))
    assert c.thread.tolist() == [0, 0, 1, 1]
    assert c.address.tolist() == [0x7F0000000000, 0x7F0000000040, 139637976727680, 0x7F0000001000]
    assert c.is_write.tolist() == [False, True, False, True]
    assert c.size_bytes.tolist() == [64, 64, 8, 64]
    assert c.compute_ns.tolist() == [0.0, 2.5, 0.0, 0.0]


def test_csv_malformed_line_number() -> None:
    with pytest.raises(TraceError, match=r"malformed.csv:3: is_write = 'maybe'"):
        list(read_trace(DATA / "malformed.csv"))


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("thread,address\n", ":1: header"),
        ("thread,address,is_write,size_bytes\n0,0x10,0\n", ":2: expected 4 fields"),
        ("thread,address,is_write,size_bytes\n-1,0x10,0,64\n", ":2: thread = '-1'"),
        ("thread,address,is_write,size_bytes\n0,zz,0,64\n", ":2: address = 'zz'"),
        ("thread,address,is_write,size_bytes\n0,16,0,0\n", ":2: size_bytes = '0'"),
        ("", "empty file"),
    ],
)
def test_csv_errors(tmp_path: Path, body: str, needle: str) -> None:
    (tmp_path / "x.csv").write_text(body)
    with pytest.raises(TraceError, match="x.csv") as err:
        list(read_trace(tmp_path / "x.csv"))
    assert needle in str(err.value)


def test_perf_script_sample() -> None:
    path = DATA / "perf_mem_sample.txt"
    assert trace_format(path) == "perf"
    c = concat_chunks(read_trace(path))
    assert len(c) == 6
    assert c.thread.tolist() == [0, 0, 1, 1, 0, 2]  # tids 4711, 4712, 9003 by first appearance
    assert c.address.tolist()[:3] == [0x7F3A2C0010C0, 0x7F3A2C0010C8, 0x7F3A34002040]
    assert c.is_write.tolist() == [False, False, False, True, False, False]
    with_kernel = concat_chunks(read_perf_script(path, kernel_addresses=True))
    assert len(with_kernel) == 7 and int(with_kernel.address[-1]) == 0xFFFF9F9E3ECB8540
    assert with_kernel.thread.tolist()[-1] == 3  # tid 4355, fourth to appear
    ram = concat_chunks(read_perf_script(path, levels={"local_ram", "remote_ram"}))
    assert ram.address.tolist() == [0x7F3A2C0010C0, 0x7F3A34002040, 0x7F3A2C003000]


def test_perf_script_malformed_line_number() -> None:
    with pytest.raises(TraceError, match=r"perf_mem_malformed.txt:3: not a perf script memory sample"):
        list(read_trace(DATA / "perf_mem_malformed.txt", format="perf"))


def test_lackey_sample() -> None:
    path = DATA / "lackey_sample.txt"
    assert trace_format(path) == "lackey"
    c = concat_chunks(read_trace(path))
    # S, L, M (load + store), L, S; instruction fetches skipped
    assert c.address.tolist() == [0x1FFEFFFD48, 0x04221E70, 0x0422A1D0, 0x0422A1D0, 0x1FFEFFFD48, 0x0422A1D8]
    assert c.is_write.tolist() == [True, False, False, True, False, True]
    assert c.size_bytes.tolist() == [8, 8, 4, 4, 8, 8]
    with_i = concat_chunks(read_trace(path, instructions=True))
    assert len(with_i) == len(c) + 4


def test_lackey_malformed_line_number() -> None:
    with pytest.raises(TraceError, match=r"lackey_malformed.txt:4: not a lackey line"):
        list(read_trace(DATA / "lackey_malformed.txt"))


def test_unknown_format(tmp_path: Path) -> None:
    (tmp_path / "x.bin").write_bytes(b"\x00\x01")
    with pytest.raises(TraceError, match="cannot tell the trace format"):
        read_trace(tmp_path / "x.bin")
    with pytest.raises(TraceError, match="cannot write perf"):
        write_trace([sample(3)], tmp_path / "x.perf")


def test_parquet(tmp_path: Path) -> None:
    if not parquet_available():
        with pytest.raises(TraceError, match="pyarrow"):
            write_trace([sample(10)], tmp_path / "t.parquet")
        assert not (tmp_path / "t.parquet").exists()
        pytest.skip("pyarrow is not installed")
    c = sample(1000)
    write_trace([c.slice(0, 300), c.slice(300, 1000)], tmp_path / "t.parquet")
    assert same(concat_chunks(read_trace(tmp_path / "t.parquet")), c)


def test_trace_info_and_touched_pages() -> None:
    c = AccessChunk.build(
        np.array([0, 64, 4096, 4096, 8192 + 64], dtype=np.uint64), thread=np.array([2, 0, 1, 0, 1]), is_write=np.array([0, 1, 0, 0, 1], dtype=bool)
    )
    info = trace_info([c.slice(0, 2), c.slice(2, 5)])
    assert (info.accesses, info.reads, info.writes, info.threads) == (5, 3, 2, 3)
    assert (info.footprint_pages, info.footprint_bytes) == (3, 4 * 64)
    assert (info.min_address, info.max_address) == (0, 8256)
    assert info.per_thread == {0: 2, 1: 2, 2: 1}
    pages, first = touched_pages([c.slice(0, 2), c.slice(2, 5)])
    assert pages.tolist() == [0, 1, 2] and first.tolist() == [2, 1, 1]


@st.composite
def chunks(draw: st.DrawFn) -> AccessChunk:
    n = draw(st.integers(min_value=1, max_value=50))
    return AccessChunk(
        thread=np.array(draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n)), dtype=np.int32),
        address=np.array(draw(st.lists(st.integers(0, (1 << 64) - 1), min_size=n, max_size=n)), dtype=np.uint64),
        is_write=np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool),
        size_bytes=np.array(draw(st.lists(st.integers(1, 65535), min_size=n, max_size=n)), dtype=np.uint16),
        compute_ns=np.array(draw(st.lists(st.sampled_from([0.0, 0.5, 2.25, 1e6]), min_size=n, max_size=n)), dtype=np.float32),
    )


@settings(max_examples=25)
@given(st.lists(chunks(), min_size=1, max_size=3))
def test_round_trip_property(tmp_path_factory: pytest.TempPathFactory, parts: list[AccessChunk]) -> None:
    d = tmp_path_factory.mktemp("rt")
    whole = concat_chunks(parts)
    for name in ("t.npz", "t.csv"):
        write_trace(parts, d / name)
        assert same(concat_chunks(read_trace(d / name)), whole)


def test_parquet_thread_ids_beyond_int32_are_refused_not_wrapped() -> None:
    # The Parquet reader casts thread ids to int32; an int64 id of 2**40 used to wrap silently to 0.
    import numpy as np
    import pytest

    from numasim.errors import TraceError
    from numasim.workload.trace.parquet_format import checked_thread_ids

    assert checked_thread_ids(np.array([0, 3], dtype=np.int64), "t.parquet", "row group 0").tolist() == [0, 3]
    with pytest.raises(TraceError, match=r"t.parquet: row group 2, row 1: thread = 1099511627776 is not a thread id"):
        checked_thread_ids(np.array([5, 1 << 40], dtype=np.int64), "t.parquet", "row group 2")
    with pytest.raises(TraceError, match="not integers"):
        checked_thread_ids(np.array([0.5]), "t.parquet", "row group 0")


def test_a_perf_trace_replays_on_the_cpus_it_recorded(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """perf script's [cpu] field: each thread runs where its first sample ran, and the result says so; --cpus
    overrides; a recorded cpu the machine lacks is an error naming the thread and the cpu."""
    from pathlib import Path

    from numasim.errors import WorkloadError
    from numasim.timing.resolve import resolve_calibration
    from numasim.topology.io import load_machine
    from numasim.workload.run import run_trace

    perf = Path(__file__).resolve().parents[2] / "docs" / "examples" / "stream.perf"
    m = load_machine("seed-001-e5-2680v2")
    cal = resolve_calibration(m)
    out = run_trace(m, perf, cal)
    assert [t.cpu for t in out.threads] == [3, 19]
    assert out.inputs["trace_cpus"]["source"].startswith("recorded in the trace")
    chosen = run_trace(m, perf, cal, cpus=[0, 1])
    assert [t.cpu for t in chosen.threads] == [0, 1] and chosen.inputs["trace_cpus"]["source"] == "--cpus"
    small = load_machine("seed-003-2node")
    text = perf.read_text().replace("[019]", "[099]")
    (tmp_path / "t.perf").write_text(text)
    with pytest.raises(WorkloadError, match="ran thread 1 on cpu 99, which seed-003-2node does not have"):
        run_trace(small, tmp_path / "t.perf", resolve_calibration(small))


def test_a_csv_trace_with_a_cpu_column_replays_there(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from numasim.timing.resolve import resolve_calibration
    from numasim.topology.io import load_machine
    from numasim.workload.run import run_trace

    rows = ["thread,address,is_write,size_bytes,cpu"]
    rows += [f"{t},{0x10000 + 64 * i + t * 0x100000},0,64,{cpu}" for i in range(50) for t, cpu in ((5, 7), (9, 13))]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    m = load_machine("seed-003-2node")
    out = run_trace(m, tmp_path / "t.csv", resolve_calibration(m))
    assert [(t.id, t.cpu) for t in out.threads] == [(5, 7), (9, 13)]
    plain = tmp_path / "p.csv"
    plain.write_text("\n".join(r.rsplit(",", 1)[0] for r in rows) + "\n")
    out = run_trace(m, plain, resolve_calibration(m))
    assert [t.cpu for t in out.threads] == [0, 1] and "cpus in order" in out.inputs["trace_cpus"]["source"]
    (tmp_path / "bad.csv").write_text(rows[0] + "\n1,0x1000,0,64,x\n")
    with pytest.raises(TraceError, match="cpu = 'x' is not a cpu number"):
        run_trace(m, tmp_path / "bad.csv", resolve_calibration(m))
