"""Byte framing of the log file.

Frame layout (all integers big-endian)::

    MAGIC b"CWL1" | length u32 | seq u64 | crc u32 | body (length bytes)

crc is CRC32C over ``length bytes + seq bytes + body``, so a frame verifies only if its header and
body are both intact. length 0 is invalid (an all-zero run, e.g. from a filesystem that extended the
file before the data landed, must never decode as a frame).

Decoding at an offset ends in one of three ways when no valid frame is there:

* END     - the offset is the end of the data;
* TORN    - the bytes from the offset to the end are not a valid frame and no valid frame follows
            them: an append that was interrupted (crash, kill, power loss) - safe to cut off;
* CORRUPT - a bad frame *followed* by a valid one: damage inside the log. Never skipped silently.

Why a bad frame cannot be mistaken for data hidden inside a record: bodies are JSON, which escapes
every control character, and a valid frame's length field (<= MAX_BODY = 64 MiB = 0x04000000)
always starts with a byte <= 0x04. So "CWL1" appearing inside a body is never followed by an
acceptable length and the forward scan rejects it without reading further.
"""
from __future__ import annotations

import enum
import hashlib
import importlib.machinery
import importlib.util
import os
import struct
from dataclasses import dataclass
from typing import NamedTuple
from collections.abc import Callable, Iterator


def _load_crc32c() -> Callable[..., int]:
    """crc32c's C function, loaded from its extension module without running the package's __init__,
    which imports its command line (argparse) and reads its own installed metadata: ~40 ms that every
    crewlet process (each CLI command, the app, each index worker) paid before reading a frame."""
    try:
        spec = importlib.util.find_spec("crc32c")
        if spec is not None and spec.origin:
            folder = os.path.dirname(spec.origin)
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = os.path.join(folder, "_crc32c" + suffix)
                if os.path.exists(path):
                    loader = importlib.machinery.ExtensionFileLoader("crc32c._crc32c", path)
                    ext_spec = importlib.util.spec_from_loader(loader.name, loader)
                    assert ext_spec is not None   # a loader given always makes a spec
                    module = importlib.util.module_from_spec(ext_spec)
                    loader.exec_module(module)
                    return module.crc32c
    except (ImportError, OSError, AttributeError):  # pragma: no cover - a crc32c laid out otherwise
        pass
    from crc32c import crc32c as packaged

    return packaged


crc32c = _load_crc32c()


MAGIC = b"CWL1"
_HEADER = struct.Struct(">4sIQI")
_LEN_SEQ = struct.Struct(">IQ")
HEADER_SIZE = _HEADER.size  # 20
# Upper bound on a body: a garbage length field must not make a reader allocate gigabytes.
MAX_BODY = 64 * 1024 * 1024
MAX_SEQ = 2**64 - 1
# Read granularity: large enough that syscalls are negligible per record, small enough to stay
# cache- and memory-friendly on huge logs.
CHUNK_SIZE = 1 << 20

Buffer = bytes | bytearray | memoryview


class FrameStatus(enum.Enum):
    END = "end"
    TORN = "torn"
    CORRUPT = "corrupt"


class Frame(NamedTuple):
    """A verified frame. A NamedTuple rather than a dataclass: one is built per record read."""

    seq: int
    body: bytes
    offset: int  # byte offset of the frame's MAGIC
    end: int  # byte offset just past the frame


@dataclass(frozen=True, slots=True)
class Stop:
    """Why decoding stopped at `offset` (no valid frame there)."""

    status: FrameStatus
    offset: int
    data_end: int  # length of the data (file size) when the decision was made
    next_frame: int | None = None  # CORRUPT only: offset of the valid frame that follows
    reason: str = ""

    @property
    def torn_bytes(self) -> int:
        return self.data_end - self.offset if self.status is FrameStatus.TORN else 0


@dataclass(frozen=True)
class Applied:
    """Where a database says it is on one log: the last seq it applied, the byte offset just past
    that record's frame, and — stored since positions carry them — the frame's start and digest."""

    seq: int = 0
    end: int = 0
    start: int | None = None
    digest: str | None = None

    @property
    def nothing(self) -> bool:
        return self.seq == 0 and self.end == 0


def frame_digest(body: Buffer) -> str:
    """What a database stores of the last record it applied, to know it again in the log: a
    second record written at the same seq and offset (after the log was cut) differs here."""
    return hashlib.blake2b(body, digest_size=16).hexdigest()


def frame_header(seq: int, body: bytes) -> bytes:
    """The 20 bytes that go before `body` in its frame (a writer joins a run of frames itself, so
    each body is copied once)."""
    if not body:
        raise ValueError("a frame body cannot be empty")
    if len(body) > MAX_BODY:
        raise ValueError(f"frame body of {len(body)} bytes exceeds the {MAX_BODY}-byte limit")
    if not 0 <= seq <= MAX_SEQ:
        raise ValueError(f"seq {seq} does not fit in u64")
    len_seq = _LEN_SEQ.pack(len(body), seq)
    return MAGIC + len_seq + crc32c(body, crc32c(len_seq)).to_bytes(4, "big")


def encode_frame(seq: int, body: bytes) -> bytes:
    return frame_header(seq, body) + body


def _check(buf: Buffer, pos: int) -> tuple[int, int] | str | None:
    """Validate the frame at buf[pos:]: (seq, end) if valid, a reason string if invalid,
    None if buf ends before the frame could be judged (incomplete)."""
    n = len(buf)
    if n - pos < HEADER_SIZE:
        return None
    magic, length, seq, crc = _HEADER.unpack_from(buf, pos)
    if magic != MAGIC:
        return "bad magic"
    if length == 0:
        return "zero-length frame"
    if length > MAX_BODY:
        return f"length {length} exceeds limit"
    end = pos + HEADER_SIZE + length
    if end > n:
        return None
    mv = memoryview(buf)
    if crc32c(mv[pos + HEADER_SIZE : end], crc32c(mv[pos + 4 : pos + 16])) != crc:
        return "checksum mismatch"
    return seq, end


def find_frame(buf: Buffer, start: int) -> int | None:
    """Offset of the first valid frame at or after `start` in an in-memory buffer, else None."""
    data = buf if isinstance(buf, (bytes, bytearray)) else bytes(buf)
    i = data.find(MAGIC, start)
    while i != -1:
        if isinstance(_check(data, i), tuple):
            return i
        i = data.find(MAGIC, i + 1)
    return None


def decode_frame(buf: Buffer, offset: int = 0) -> Frame | Stop:
    """Decode the frame at `offset` of a buffer holding *all* the data (e.g. a whole file), so
    that running off its end means a torn tail rather than "read more"."""
    n = len(buf)
    if offset >= n:
        return Stop(FrameStatus.END, offset, n, reason="end of data")
    checked = _check(buf, offset)
    if isinstance(checked, tuple):
        seq, end = checked
        return Frame(seq, bytes(memoryview(buf)[offset + HEADER_SIZE : end]), offset, end)
    reason = checked or "incomplete frame at end of data"
    nxt = find_frame(buf, offset + 1)
    if nxt is None:
        return Stop(FrameStatus.TORN, offset, n, reason=reason)
    return Stop(FrameStatus.CORRUPT, offset, n, next_frame=nxt, reason=reason)


# --- file-level decoding --------------------------------------------------------------------------


def _pread(fd: int, n: int, offset: int) -> bytes:
    """Up to n bytes at offset; fewer only at end of file."""
    data = os.pread(fd, n, offset)
    if len(data) == n or not data:
        return data
    parts = [data]
    got = len(data)
    while got < n:
        more = os.pread(fd, n - got, offset + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _frame_at_fd(fd: int, offset: int) -> Frame | str:
    """Read and verify one frame straight from the file (no caching): a Frame or a reason."""
    header = _pread(fd, HEADER_SIZE, offset)
    if len(header) < HEADER_SIZE:
        return "incomplete header at end of file"
    magic, length, seq, crc = _HEADER.unpack(header)
    if magic != MAGIC:
        return "bad magic"
    if length == 0:
        return "zero-length frame"
    if length > MAX_BODY:
        return f"length {length} exceeds limit"
    end = offset + HEADER_SIZE + length
    # Check the size before reading so an in-range but bogus length costs no allocation.
    if end > os.fstat(fd).st_size:
        return "frame runs past end of file"
    body = _pread(fd, length, offset + HEADER_SIZE)
    if len(body) < length:
        return "frame runs past end of file"
    if crc32c(body, crc32c(header[4:16])) != crc:
        return "checksum mismatch"
    return Frame(seq, body, offset, end)


def find_frame_fd(fd: int, start: int) -> int | None:
    """Offset of the first valid frame at or after `start` in the file, else None. Reads in
    chunks so a scan over a large damaged region stays in bounded memory."""
    size = os.fstat(fd).st_size
    overlap = len(MAGIC) - 1  # so a MAGIC straddling two chunks is still seen
    pos = start
    while pos < size:
        chunk = _pread(fd, min(CHUNK_SIZE + overlap, size - pos), pos)
        if not chunk:
            break
        i = chunk.find(MAGIC)
        while i != -1 and i < CHUNK_SIZE:
            if isinstance(_frame_at_fd(fd, pos + i), Frame):
                return pos + i
            i = chunk.find(MAGIC, i + 1)
        pos += CHUNK_SIZE
    return None


def read_frame(fd: int, offset: int) -> Frame | Stop:
    """Decode the frame at `offset` directly from the file and, if there is none, classify why.

    Safe against a concurrent appender in another process: an incomplete frame may be completed
    (and followed by others) between our reads, so once a valid frame is found *after* the
    offset, the frame at the offset is read once more before calling it corrupt - by then its
    bytes are final, because frames are written strictly in order under the writers' lock.
    """
    size = os.fstat(fd).st_size
    if offset >= size:
        return Stop(FrameStatus.END, offset, size, reason="end of file")
    first = _frame_at_fd(fd, offset)
    if isinstance(first, Frame):
        return first
    nxt = find_frame_fd(fd, offset + 1)
    if nxt is None:
        return Stop(FrameStatus.TORN, offset, max(size, offset), reason=first)
    again = _frame_at_fd(fd, offset)
    if isinstance(again, Frame):
        return again
    return Stop(FrameStatus.CORRUPT, offset, os.fstat(fd).st_size, next_frame=nxt, reason=again)


@dataclass(frozen=True, slots=True)
class Garbage:
    """Bytes `[offset, end)` of a file that are no frame: a damaged frame (or junk) that a resynchronising
    reader stepped over. `torn`: nothing valid follows them (they run to the end of the file)."""

    offset: int
    end: int
    reason: str
    torn: bool = False


def resync(fd: int, offset: int = 0) -> Iterator[Frame | Garbage]:
    """Every verified frame of the file from `offset`, in order, and between them every run of bytes that
    is no frame, as a `Garbage` — the way LevelDB's log reader skips a bad block: the reader resynchronises
    on the next offset where a whole frame verifies (MAGIC, a length in range, the CRC over length, seq and
    body). Which seq that frame carries (the one expected, a later one, a repeat) is the caller's to judge.
    Never raises for damage; used by `crewlet log check` and `repair`, not by the appliers, which stop at
    the first damage."""
    pos = offset
    while True:
        scanner = FrameScanner(fd, pos)
        yield from scanner
        stop = scanner.stop
        assert stop is not None
        if stop.status is FrameStatus.END:
            return
        if stop.status is FrameStatus.TORN:
            yield Garbage(stop.offset, stop.data_end, stop.reason, torn=True)
            return
        assert stop.next_frame is not None
        yield Garbage(stop.offset, stop.next_frame, stop.reason)
        pos = stop.next_frame


class FrameScanner:
    """Iterate the verified frames of a file from a frame-boundary offset, reading in large
    chunks. When iteration ends, `stop` says why (END, TORN or CORRUPT); judging that is left to
    the caller. The fast path decodes from an in-memory chunk; anything unexpected (a bad frame,
    running out of file) is re-examined by `read_frame` with fresh reads, so a chunk that went
    stale under a concurrent writer cannot produce a false CORRUPT."""

    def __init__(self, fd: int, offset: int = 0, *, chunk_size: int = CHUNK_SIZE) -> None:
        self._fd = fd
        self._offset = offset
        self._chunk = chunk_size
        self.stop: Stop | None = None

    def __iter__(self) -> Iterator[Frame]:
        fd = self._fd
        chunk_size = self._chunk
        unpack = _HEADER.unpack_from
        magic_ok = MAGIC
        base = self._offset  # file offset of buf[0]
        buf = b""
        i = 0  # position in buf of the next frame
        size = os.fstat(fd).st_size
        while True:
            n = len(buf)
            need = 0  # bytes still missing from buf to judge the frame at i; 0 = it is bad
            if n - i >= HEADER_SIZE:
                magic, length, seq, crc = unpack(buf, i)
                if magic == magic_ok and 0 < length <= MAX_BODY:
                    start = i + HEADER_SIZE
                    end = start + length
                    if end <= n:
                        body = buf[start:end]
                        if crc32c(body, crc32c(buf[i + 4 : i + 16])) == crc:
                            yield Frame(seq, body, base + i, base + end)
                            i = end
                            continue
                    else:
                        need = end - n
            else:
                need = HEADER_SIZE - (n - i)

            if need:
                file_pos = base + n
                avail = size - file_pos
                if avail < need:
                    size = os.fstat(fd).st_size  # a writer may have appended since
                    avail = size - file_pos
                if avail >= need:
                    data = _pread(fd, min(max(chunk_size, need), avail), file_pos)
                    if len(data) >= need:
                        buf = buf[i:] + data
                        base += i
                        i = 0
                        continue
                    # The file shrank under us (a torn tail was cut): fall through and re-judge.

            result = read_frame(fd, base + i)
            if isinstance(result, Frame):
                yield result
                base, buf, i = result.end, b"", 0
                size = os.fstat(fd).st_size
                continue
            self.stop = result
            return
