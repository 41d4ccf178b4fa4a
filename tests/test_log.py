"""Tests for core.log: record encoding, framing, and FileLog on real files (several processes,
SIGKILL, torn tails, bit flips)."""
from __future__ import annotations

import json
import logging
import os
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the project is not necessarily installed into the venv
    sys.path.insert(0, str(ROOT))

from crc32c import crc32c  # noqa: E402

from core.log import FileLog, LogCorrupt, LogFailed, LogGap, ReadReport, Record  # noqa: E402
from core.log import filelog as filelog_module  # noqa: E402
from core.log.framing import (  # noqa: E402
    HEADER_SIZE,
    MAGIC,
    MAX_BODY,
    Frame,
    FrameStatus,
    Stop,
    decode_frame,
    encode_frame,
)


# --- helpers ---------------------------------------------------------------------------------------


def make(i: int, actor: str = "alice", **extra: object) -> Record:
    return Record.new("page.create", actor, {"i": i, "title": f"Page {i}", **extra})


def read_all(log: FileLog, **kw: object) -> list[Record]:
    return [r for r, _ in log.read(**kw)]  # type: ignore[arg-type]


def frame_starts(log: FileLog) -> list[int]:
    """Byte offset of every frame (plus the end offset of the last one)."""
    return [0] + [end for _, end in log.read()]


def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x5A
    path.write_bytes(bytes(data))


def raw_frame(seq: int, body: bytes, *, length: int | None = None) -> bytes:
    """A frame with an arbitrary length field but a checksum that matches it (to show that the
    validity rules, not just the CRC, reject it)."""
    n = len(body) if length is None else length
    len_seq = struct.pack(">IQ", n, seq)
    return MAGIC + len_seq + crc32c(body, crc32c(len_seq)).to_bytes(4, "big") + body


def run_child(code: str, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), str(ROOT), *args],
        capture_output=True, text=True, timeout=timeout,
    )


CHILD_PRELUDE = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
from core.log import FileLog, Record
"""


# --- Record ----------------------------------------------------------------------------------------


def test_record_body_is_canonical_and_round_trips() -> None:
    a = Record(type="page.create", op_id="ab" * 16, actor="bob", at=1700000000123,
               payload={"title": "Grüße", "b": [1, 2], "a": {"z": 1, "y": None}})
    b = Record(type="page.create", op_id="ab" * 16, actor="bob", at=1700000000123,
               payload={"a": {"y": None, "z": 1}, "b": [1, 2], "title": "Grüße"}, seq=42)
    # seq is not part of the body; key order of the payload does not matter.
    assert a.body() == b.body()
    assert a.body() == (
        '{"actor":"bob","at":1700000000123,"op_id":"' + "ab" * 16 + '",'
        '"payload":{"a":{"y":null,"z":1},"b":[1,2],"title":"Grüße"},"type":"page.create","v":1}'
    ).encode("utf-8")

    back = Record.from_body(b.body(), 42)
    assert back == b
    assert Record.from_body(a.body(), 0) == a
    # Stable across a JSON round trip too.
    assert back.body() == a.body()


def test_record_new_fills_op_id_and_clock() -> None:
    before = time.time_ns() // 1_000_000
    r = Record.new("page.create", "alice", {"x": 1})
    after = time.time_ns() // 1_000_000
    assert len(r.op_id) == 32 and int(r.op_id, 16) >= 0
    assert before <= r.at <= after
    assert r.seq == 0 and r.version == 1
    assert Record.new("t", "a", {}).op_id != r.op_id
    fixed = Record.new("t", "a", {}, at=5, op_id="x")
    assert (fixed.at, fixed.op_id) == (5, "x")


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"\xff\xfe",
        b"[1,2]",
        b'{"v":1,"op_id":"o","actor":"a","at":1,"type":"t"}',  # no payload
        b'{"v":1,"op_id":"o","actor":"a","at":"1","type":"t","payload":{}}',
        b'{"v":1,"op_id":"o","actor":"a","at":true,"type":"t","payload":{}}',
        b'{"v":1,"op_id":"o","actor":"a","at":1,"type":"t","payload":[]}',
        b'{"v":1,"op_id":"o","actor":"a","at":1,"type":"t","payload":{}} trailing',
    ],
)
def test_record_from_body_rejects_bad_bodies(body: bytes) -> None:
    with pytest.raises(ValueError):
        Record.from_body(body, 1)


def test_record_from_body_tolerates_whitespace() -> None:
    body = b' { "v":1, "op_id":"o", "actor":"a", "at":1, "type":"t", "payload":{} }\n'
    assert Record.from_body(body, 3) == Record("t", "o", "a", 1, {}, 3, 1)


# --- framing ---------------------------------------------------------------------------------------


def test_frame_layout() -> None:
    body = b'{"x":1}'
    frame = encode_frame(7, body)
    assert frame[:4] == b"CWL1"
    length, seq, crc = struct.unpack(">IQI", frame[4:20])
    assert (length, seq) == (len(body), 7)
    assert crc == crc32c(frame[4:16] + body)
    assert frame[20:] == body
    assert decode_frame(frame) == Frame(7, body, 0, len(frame))


def test_frame_rejects_empty_and_oversized_bodies() -> None:
    with pytest.raises(ValueError):
        encode_frame(1, b"")
    with pytest.raises(ValueError):
        encode_frame(1, b"x" * (MAX_BODY + 1))


def test_decode_frame_classifies_end_torn_corrupt() -> None:
    f1, f2, f3 = (encode_frame(i, b'{"n":%d}' % i) for i in (1, 2, 3))
    data = f1 + f2 + f3
    assert decode_frame(data, len(data)) == Stop(FrameStatus.END, len(data), len(data), None,
                                                 "end of data")
    # Any prefix of the last frame is a torn tail.
    for cut in (1, 4, 10, HEADER_SIZE, len(f3) - 1):
        res = decode_frame(f1 + f2 + f3[:cut], len(f1 + f2))
        assert isinstance(res, Stop) and res.status is FrameStatus.TORN
        assert res.torn_bytes == cut
    # A damaged frame with a good one after it is corruption, and says where the good one is.
    bad = bytearray(data)
    bad[len(f1) + HEADER_SIZE + 2] ^= 1
    res = decode_frame(bytes(bad), len(f1))
    assert isinstance(res, Stop) and res.status is FrameStatus.CORRUPT
    assert res.next_frame == len(f1) + len(f2) and res.reason == "checksum mismatch"
    # memoryview input works as well.
    assert decode_frame(memoryview(data), len(f1)) == Frame(2, b'{"n":2}', len(f1), len(f1 + f2))


def test_zero_length_frame_is_invalid(tmp_path: Path) -> None:
    good = encode_frame(1, b'{"n":1}')
    zero = raw_frame(2, b"")  # CRC matches, length 0
    res = decode_frame(good + zero, len(good))
    assert isinstance(res, Stop) and res.status is FrameStatus.TORN and res.reason == "zero-length frame"
    res = decode_frame(good + zero + encode_frame(2, b'{"n":2}'), len(good))
    assert isinstance(res, Stop) and res.status is FrameStatus.CORRUPT

    # Same through FileLog: at the tail it is torn, in the middle it is corruption.
    log = FileLog(tmp_path / "a.log")
    log.append([make(1)])
    with open(log.path, "ab") as f:
        f.write(zero)
    assert log.scan().torn_tail
    with open(log.path, "ab") as f:
        f.write(encode_frame(2, make(2).body()))
    with pytest.raises(LogCorrupt, match="zero-length frame"):
        log.scan()


def test_garbage_length_does_not_allocate(tmp_path: Path) -> None:
    log = FileLog(tmp_path / "a.log")
    log.append([make(i) for i in range(3)])
    good_size = log.path.stat().st_size
    for length in (0xFFFFFFFF, MAX_BODY + 1, MAX_BODY):  # MAX_BODY: in range, but past EOF
        with open(log.path, "r+b") as f:
            f.truncate(good_size)
            f.seek(good_size)
            f.write(MAGIC + struct.pack(">IQI", length, 4, 0) + b"xy")
        fresh = FileLog(log.path)
        tracemalloc.start()
        try:
            records = read_all(fresh)
            report = fresh.scan()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert [r.seq for r in records] == [1, 2, 3]
        assert report == ReadReport(3, good_size, True, HEADER_SIZE + 2)
        assert peak < 8 * 1024 * 1024, f"peak {peak} bytes for length field {length:#x}"


# --- FileLog: basics -------------------------------------------------------------------------------


def test_empty_log(tmp_path: Path) -> None:
    log = FileLog(tmp_path / "deep" / "dir" / "pages.log")
    assert log.path.is_file()
    assert list(log.read()) == []
    assert log.scan() == ReadReport(0, 0, False, 0)
    assert log.last_seq() == 0
    assert log.append([]) == []
    log.close()
    log.close()  # idempotent
    with pytest.raises(ValueError):
        log.append([make(1)])


def test_round_trip_read_after_and_offset_hint(tmp_path: Path) -> None:
    log = FileLog(tmp_path / "a.log")
    written: list[Record] = []
    for batch in ([make(0)], [make(i) for i in range(1, 6)], [make(i, "bob") for i in range(6, 10)]):
        out = log.append(batch, sync=False)
        assert [r.seq for r in out] == list(range(len(written) + 1, len(written) + len(batch) + 1))
        assert [r.payload for r in out] == [r.payload for r in batch]
        assert all(r.seq == 0 for r in batch)  # inputs untouched
        written += out
    assert log.last_seq() == 10

    # A fresh instance (no cache) reads the same.
    fresh = FileLog(log.path)
    pairs = list(fresh.read())
    assert [r for r, _ in pairs] == written
    ends = [end for _, end in pairs]
    assert ends == sorted(ends) and ends[-1] == log.path.stat().st_size
    assert fresh.scan() == ReadReport(10, ends[-1], False, 0)

    for after in (0, 1, 4, 9, 10, 11):
        assert read_all(FileLog(log.path), after=after) == written[after:]
        assert read_all(log, after=after) == written[after:]
        # The hint: the end offset of record `after`, or any earlier frame boundary.
        hint = ends[after - 1] if 1 <= after <= 10 else 0
        assert read_all(fresh, after=after, start_offset=hint) == written[after:]
        if after >= 3:
            assert read_all(fresh, after=after, start_offset=ends[1]) == written[after:]

    assert read_all(fresh, after=2, limit=3) == written[2:5]
    assert read_all(fresh, limit=0) == []
    # A hint past the first wanted record is refused rather than silently skipping records.
    with pytest.raises(LogGap):
        read_all(FileLog(log.path), after=2, start_offset=ends[5])


def test_payload_containing_magic(tmp_path: Path) -> None:
    log = FileLog(tmp_path / "a.log")
    out = log.append([make(i, note="CWL1" * 5 + "\x00\x01 CWL1") for i in range(4)])
    assert read_all(FileLog(log.path)) == out
    # Damage in frame 2: the scan for the next good frame must skip the MAGICs inside bodies.
    starts = frame_starts(log)
    flip_byte(log.path, starts[1] + HEADER_SIZE + 3)
    with pytest.raises(LogCorrupt) as ei:
        read_all(FileLog(log.path))
    assert ei.value.offset == starts[1] and ei.value.next_offset == starts[2]


def test_seq_continuity_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    a, b = FileLog(path), FileLog(path)
    assert [r.seq for r in a.append([make(1), make(2)])] == [1, 2]
    assert [r.seq for r in b.append([make(3)])] == [3]  # b has never seen the file's content
    assert [r.seq for r in a.append([make(4)])] == [4]  # a's cache is stale: must catch up
    assert [r.seq for r in b.append([make(5), make(6)])] == [5, 6]
    assert a.last_seq() == b.last_seq() == 6
    assert [r.payload["i"] for r in read_all(a)] == [1, 2, 3, 4, 5, 6]


def test_threads_sharing_one_instance(tmp_path: Path) -> None:
    log = FileLog(tmp_path / "a.log", fsync=False)

    def work(t: int) -> None:
        for i in range(200):
            log.append([make(i, f"t{t}")])

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    records = read_all(FileLog(log.path))
    assert [r.seq for r in records] == list(range(1, 801))
    for t in range(4):
        assert [r.payload["i"] for r in records if r.actor == f"t{t}"] == list(range(200))


def test_gap_detected(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    frames = [encode_frame(s, make(s).body()) for s in (1, 2, 4)]
    path.write_bytes(b"".join(frames))
    log = FileLog(path)
    with pytest.raises(LogGap, match="expected seq 3, found 4"):
        read_all(log)
    with pytest.raises(LogGap):
        log.scan()
    with pytest.raises(LogGap):
        log.append([make(5)])
    assert path.stat().st_size == sum(map(len, frames))  # nothing appended to a bad log

    path.write_bytes(encode_frame(2, make(2).body()))
    with pytest.raises(LogGap, match="expected seq 1, found 2"):
        read_all(FileLog(path))


def test_valid_frame_with_undecodable_body_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    path.write_bytes(encode_frame(1, make(1).body()) + encode_frame(2, b"[not a record]"))
    log = FileLog(path)
    with pytest.raises(LogCorrupt, match="seq 2"):
        read_all(log)
    assert log.scan().last_seq == 2  # the frame itself is intact


# --- FileLog: torn tails and corruption ------------------------------------------------------------


def test_torn_tail_partial_frame(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = FileLog(tmp_path / "a.log")
    written = log.append([make(i) for i in range(5)])
    good_size = log.path.stat().st_size
    with open(log.path, "ab") as f:
        f.write(encode_frame(6, make(6).body())[:10])  # an interrupted append

    fresh = FileLog(log.path)
    assert read_all(fresh) == written
    assert fresh.scan() == ReadReport(5, good_size, True, 10)
    assert fresh.last_seq() == 5
    assert log.path.stat().st_size == good_size + 10  # reading never repairs

    with caplog.at_level(logging.WARNING, logger="core.log.filelog"):
        out = fresh.append([make(6)])
    assert out[0].seq == 6
    assert "torn tail of 10 bytes" in caplog.text
    assert fresh.scan() == ReadReport(6, log.path.stat().st_size, False, 0)
    assert read_all(FileLog(log.path)) == written + out


def test_torn_tail_truncated_mid_frame(tmp_path: Path) -> None:
    log = FileLog(tmp_path / "a.log")
    written = log.append([make(i, pad="p" * i) for i in range(8)])
    starts = frame_starts(log)
    for cut in (starts[7] + 1, starts[7] + HEADER_SIZE, starts[8] - 1):
        os.truncate(log.path, cut)
        fresh = FileLog(log.path)
        assert read_all(fresh) == written[:7]
        assert fresh.scan() == ReadReport(7, starts[7], True, cut - starts[7])
    # The writer that cached the longer file notices it got shorter and rescans.
    assert log.append([make(99)])[0].seq == 8
    assert [r.seq for r in read_all(FileLog(log.path))] == list(range(1, 9))


def test_corrupt_middle_frame_raises(tmp_path: Path) -> None:
    log = FileLog(tmp_path / "a.log")
    log.append([make(i) for i in range(5)])
    starts = frame_starts(log)
    flip_byte(log.path, starts[2] + HEADER_SIZE + 5)  # inside the body of seq 3
    size = log.path.stat().st_size

    fresh = FileLog(log.path)
    got: list[int] = []
    with pytest.raises(LogCorrupt) as ei:
        for rec, _ in fresh.read():
            got.append(rec.seq)
    assert got == [1, 2]  # everything before the damage, then a loud stop
    err = ei.value
    assert (err.offset, err.seq, err.next_offset) == (starts[2], 3, starts[3])
    assert str(starts[2]) in str(err) and str(log.path) in str(err) and "seq 3" in str(err)

    with pytest.raises(LogCorrupt):
        fresh.scan()
    with pytest.raises(LogCorrupt):
        read_all(fresh, after=3, start_offset=starts[1])
    with pytest.raises(LogCorrupt):
        fresh.append([make(6)])
    assert log.path.stat().st_size == size  # a writer that has to read past damage refuses
    # Records wholly after the damage are still reachable with an offset hint.
    assert [r.seq for r in read_all(fresh, after=3, start_offset=starts[3])] == [4, 5]


@pytest.mark.parametrize("where", ["magic", "length", "seq", "crc"])
def test_corrupt_middle_header_raises(tmp_path: Path, where: str) -> None:
    log = FileLog(tmp_path / "a.log")
    log.append([make(i) for i in range(3)])
    starts = frame_starts(log)
    flip_byte(log.path, starts[1] + {"magic": 1, "length": 4, "seq": 15, "crc": 17}[where])
    with pytest.raises(LogCorrupt) as ei:
        read_all(FileLog(log.path))
    assert ei.value.offset == starts[1] and ei.value.next_offset == starts[2]


def test_a_corrupt_whole_last_frame_is_damage_not_a_torn_tail(tmp_path: Path) -> None:
    """Issue 34: a last frame whose every byte is there and whose checksum fails was written whole (and synced,
    and acknowledged) and damaged after: cutting it as an interrupted append lost the record without a word."""
    log = FileLog(tmp_path / "a.log")
    written = log.append([make(i) for i in range(5)])
    starts = frame_starts(log)
    flip_byte(log.path, starts[4] + HEADER_SIZE + 5)
    damaged = log.path.read_bytes()

    fresh = FileLog(log.path)
    assert read_all(fresh) == written[:4]           # a reader stops before it, as before
    with pytest.raises(LogCorrupt) as ei:
        fresh.scan()
    assert ei.value.offset == starts[4] and "checksum fails" in str(ei.value)
    with pytest.raises(LogCorrupt):
        fresh.append([make(5)])
    assert log.path.read_bytes() == damaged         # nothing cut, nothing appended


def test_a_last_frame_cut_short_is_torn(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = FileLog(tmp_path / "a.log")
    written = log.append([make(i) for i in range(5)])
    starts = frame_starts(log)
    os.truncate(log.path, starts[5] - 3)

    fresh = FileLog(log.path)
    assert read_all(fresh) == written[:4]
    assert fresh.scan() == ReadReport(4, starts[4], True, starts[5] - 3 - starts[4])
    with caplog.at_level(logging.WARNING, logger="core.log.filelog"):
        assert fresh.append([make(5)])[0].seq == 5
    assert "torn tail" in caplog.text
    assert FileLog(log.path).scan().torn_tail is False


# --- FileLog: real processes -----------------------------------------------------------------------


def test_multiprocess_appends_are_contiguous(tmp_path: Path) -> None:
    path = tmp_path / "shared.log"
    go = tmp_path / "go"
    code = CHILD_PRELUDE + textwrap.dedent("""
    path, worker, go = sys.argv[2], sys.argv[3], sys.argv[4]
    log = FileLog(path)
    open(go + "." + worker, "w").close()
    while not os.path.exists(go):  # start together so the appends really contend
        time.sleep(0.001)
    for i in range(500):
        log.append([Record.new("test.append", "w" + worker, {"w": int(worker), "i": i, "pad": "z" * (i % 40)})])
    """)
    procs = [
        subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), str(ROOT), str(path), str(w), str(go)],
                         stderr=subprocess.PIPE, text=True)
        for w in range(4)
    ]
    deadline = time.monotonic() + 20
    while not all((tmp_path / f"go.{w}").exists() for w in range(4)):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.005)
    go.touch()

    # Read concurrently with the writers: readers take no lock and must never see damage.
    reader = FileLog(path)
    seen = 0
    while any(p.poll() is None for p in procs):
        for rec, _ in reader.read(after=seen):
            assert rec.seq == seen + 1
            seen = rec.seq
    for p in procs:
        _, err = p.communicate(timeout=20)
        assert p.returncode == 0, err

    records = read_all(FileLog(path))
    assert [r.seq for r in records] == list(range(1, 2001))
    for w in range(4):
        mine = [r.payload for r in records if r.actor == f"w{w}"]
        assert mine == [{"w": w, "i": i, "pad": "z" * (i % 40)} for i in range(500)]
    assert FileLog(path).scan() == ReadReport(2000, path.stat().st_size, False, 0)


def test_sigkill_mid_append(tmp_path: Path) -> None:
    path = tmp_path / "killed.log"
    code = CHILD_PRELUDE + textwrap.dedent("""
    log = FileLog(sys.argv[2])
    n = 0
    while True:
        batch = [Record.new("test.append", "k", {"n": n + j, "pad": "q" * ((n + j) % 997)})
                 for j in range(1 + n % 3)]
        log.append(batch, sync=False)
        before, n = n, n + len(batch)
        if before <= 3 < n:  # once: the parent kills only after more than 3 records, however busy the machine
            print("started", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), str(ROOT), str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "started", proc.stderr.read() if proc.stderr else ""
        time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL

    log = FileLog(path)
    report = log.scan()  # torn tail or not: both fine, but never an exception
    records = read_all(log)
    assert len(records) == report.last_seq > 3
    for seq, rec in enumerate(records, start=1):
        n = seq - 1
        assert rec.seq == seq and rec.payload == {"n": n, "pad": "q" * (n % 997)}
    assert report.end_offset + report.torn_bytes == path.stat().st_size

    # Make a torn tail certain: cut the last frame in half, as a kill mid-write would.
    last_start = frame_starts(log)[-2]
    os.truncate(path, report.end_offset - (report.end_offset - last_start) // 2)
    report2 = FileLog(path).scan()
    assert report2.torn_tail and report2.last_seq == report.last_seq - 1
    assert FileLog(path).append([make(0)])[0].seq == report.last_seq


def test_short_write_is_cut_back(tmp_path: Path) -> None:
    """A real short write: RLIMIT_FSIZE makes write() stop at the limit."""
    path = tmp_path / "full.log"
    code = CHILD_PRELUDE + textwrap.dedent("""
    import resource, signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get a short write / EFBIG, not a kill
    log = FileLog(sys.argv[2])
    log.append([Record.new("t", "a", {"i": i}) for i in range(5)])
    size = os.path.getsize(sys.argv[2])
    limit = size + 350  # room for one ~240-byte frame of the next batch and part of another
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        log.append([Record.new("t", "a", {"i": i, "pad": "y" * 100}) for i in range(5, 10)])
    except OSError as e:
        print("error", e.errno, str(e))
    try:
        log.append([Record.new("t", "a", {"i": 10, "pad": "y" * 100})])
    except OSError as e:
        print("error", e.errno, str(e))
    """)
    res = run_child(code, str(path))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error 5 ") and "1 of 5 records" in lines[0]
    log = FileLog(path)
    report = log.scan()
    assert report == ReadReport(6, path.stat().st_size, False, 0)
    assert [r.payload["i"] for r in read_all(log)] == [0, 1, 2, 3, 4, 5]


def test_failed_fsync_marks_log_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Fault injection: a real fsync failure cannot be provoked on a healthy disk.
    log = FileLog(tmp_path / "a.log")
    log.append([make(1)])

    def broken_sync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(filelog_module, "_sync_fd", broken_sync)
    with pytest.raises(LogFailed):
        log.append([make(2)])
    monkeypatch.undo()
    size = log.path.stat().st_size
    with pytest.raises(LogFailed):  # never retried, even though fsync would work now
        log.append([make(3)], sync=False)
    assert log.path.stat().st_size == size
    reopened = FileLog(log.path)
    assert reopened.append([make(3)])[0].seq == 3


# --- big batches and big logs (their speed is bench/log_bench.py's, measured beside SQLite) ----------


def test_a_10k_record_batch_appends_whole(tmp_path: Path) -> None:
    log = FileLog(tmp_path / "a.log")
    batch = [make(i, text="lorem ipsum " * 4) for i in range(10_000)]
    out = log.append(batch, sync=True)
    assert [o.seq for o in out] == list(range(1, 10_001))
    assert [r.payload["i"] for r in read_all(FileLog(log.path))] == list(range(10_000))


def test_a_100k_record_log_reads_whole(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    # Written directly (same bytes as Record.body() would give) to keep the test's setup cheap.
    with open(path, "wb") as f:
        f.write(b"".join(
            encode_frame(i, json.dumps({"v": 1, "op_id": f"{i:032x}", "actor": "alice",
                                        "at": 1_700_000_000_000 + i, "type": "page.update",
                                        "payload": {"page": i % 97, "rev": i}},
                                       separators=(",", ":")).encode())
            for i in range(1, 100_001)
        ))
    log = FileLog(path)
    n = 0
    last = None
    for last, _ in log.read():
        n += 1
    assert n == 100_000 and last is not None and last.payload == {"page": 100_000 % 97, "rev": 100_000}
    assert log.scan().last_seq == 100_000
    tail = read_all(log, after=99_990)
    assert [r.seq for r in tail] == list(range(99_991, 100_001)) and tail == read_all(FileLog(path), after=99_990)


# --- FileLog against what a database applied ---------------------------------------------------------


def test_a_torn_tail_is_cut_only_past_what_was_applied(tmp_path: Path) -> None:
    from core.log import LogMismatch

    log = FileLog(tmp_path / "a.log")
    log.append([make(i) for i in range(4)])
    starts = frame_starts(log)
    os.truncate(log.path, starts[4] - 6)  # the last frame, which a database applied, loses its end
    damaged = log.path.read_bytes()
    fresh = FileLog(log.path)
    with pytest.raises(LogMismatch) as ei:
        fresh.append([make(9)], keep_through=starts[4])
    assert ei.value.kind == "cut" and ei.value.offset == starts[3]
    assert log.path.read_bytes() == damaged  # neither cut nor appended
    # the same tail past what was applied (keep_through at the previous frame) is an interrupted append
    assert fresh.append([make(9)], keep_through=starts[3])[0].seq == 4


def test_a_file_shorter_than_what_was_applied_refuses_appends(tmp_path: Path) -> None:
    from core.log import LogMismatch

    log = FileLog(tmp_path / "a.log")
    log.append([make(i) for i in range(3)])
    end = log.path.stat().st_size
    with pytest.raises(LogMismatch, match="records it applied are missing"):
        FileLog(log.path).append([make(9)], keep_through=end + 100)
    assert log.path.stat().st_size == end


def test_exact_reads_from_a_stored_position(tmp_path: Path) -> None:
    from core.log import LogMismatch

    log = FileLog(tmp_path / "a.log")
    log.append([make(i) for i in range(4)])
    starts = frame_starts(log)
    assert [r.seq for r in read_all(FileLog(log.path), after=2, start_offset=starts[2], exact=True)] == [3, 4]
    data = log.path.read_bytes()
    log.path.write_bytes(data + data[starts[3]:starts[4]])  # seq 4 again
    with pytest.raises(LogGap) as ei:
        read_all(FileLog(log.path), after=4, start_offset=starts[4], exact=True)
    assert ei.value.kind == "repeat" and "sequence repeat" in str(ei.value) and "duplicated frame" in str(ei.value)
    with pytest.raises(LogMismatch):
        read_all(FileLog(log.path), after=9, start_offset=len(data) * 3, exact=True)


def test_a_gap_says_which_seqs_are_missing(tmp_path: Path) -> None:
    log = FileLog(tmp_path / "a.log")
    log.append([make(i) for i in range(5)])
    starts = frame_starts(log)
    data = log.path.read_bytes()
    log.path.write_bytes(data[: starts[1]] + data[starts[3]:])  # seq 2 and 3 taken out
    with pytest.raises(LogGap) as ei:
        FileLog(log.path).scan()
    assert ei.value.kind == "gap" and "seqs 2-3 missing" in str(ei.value) and ei.value.offset == starts[1]


def test_a_read_only_log_reads_and_opens_for_writing_at_its_first_append(tmp_path: Path) -> None:
    FileLog(tmp_path / "a.log").append([make(1)])
    log = FileLog(tmp_path / "a.log", readonly=True)
    assert not log.writable and [r.seq for r in read_all(log)] == [1]
    assert log.append([make(2)])[0].seq == 2 and log.writable
    with pytest.raises(FileNotFoundError):
        FileLog(tmp_path / "missing.log", readonly=True)


def test_a_record_over_the_limit_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    from core.log import RecordTooLarge

    log = FileLog(tmp_path / "a.log")
    log.append([make(1)])
    size = log.path.stat().st_size
    huge = make(2, text="\x01" * (MAX_BODY // 6 + 10))  # fits as text, not once JSON-escaped
    with pytest.raises(RecordTooLarge, match="64 MiB record limit"):
        log.append([make(3), huge])
    assert log.path.stat().st_size == size
