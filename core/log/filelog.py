"""An append-only, multi-process-safe log of Records in one file.

Writers serialise on an exclusive `flock` of the log file itself; sequence numbers are assigned
under that lock, so they are contiguous across processes. Readers take no lock: frames are only
ever appended, and the only bytes that are ever removed are a torn tail (an interrupted append),
which readers never yield. Each frame goes out in a single `write()` on an O_APPEND descriptor, so
a crash leaves at most one incomplete frame at the end, which the next writer cuts off.
"""
from __future__ import annotations

import errno
import fcntl
import logging
import os
import sys
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator, Sequence

from .framing import MAX_BODY, FrameScanner, FrameStatus, Stop, encode_frame
from .record import Record

logger = logging.getLogger(__name__)


class LogCorrupt(Exception):
    """A bad frame followed by good ones, or a verified frame whose body is not a record."""

    def __init__(
        self,
        path: Path,
        offset: int,
        seq: int | None,
        reason: str,
        next_offset: int | None = None,
        *,
        seq_inferred: bool = False,
    ) -> None:
        # A damaged header cannot be trusted for its seq; then the seq named is the one that
        # should have been there (previous good seq + 1).
        if seq is None:
            seq_text = "seq unknown"
        else:
            seq_text = f"expected seq {seq}" if seq_inferred else f"seq {seq}"
        msg = f"{path}: corrupt log frame at byte offset {offset} ({seq_text}): {reason}"
        if next_offset is not None:
            msg += f"; a valid frame follows at byte offset {next_offset}"
        super().__init__(msg)
        self.path = path
        self.offset = offset
        self.seq = seq
        self.reason = reason
        self.next_offset = next_offset


class LogGap(Exception):
    """A frame whose seq is not the previous one + 1."""

    def __init__(self, path: Path, offset: int, expected: int | str, found: int) -> None:
        super().__init__(
            f"{path}: sequence gap at byte offset {offset}: expected seq {expected}, found {found}"
        )
        self.path = path
        self.offset = offset
        self.expected = expected
        self.found = found


class LogFailed(Exception):
    """An fsync failed. After a failed fsync the kernel may already have dropped the unwritten
    pages and cleared the error, so retrying could report success for data that is gone; the log
    refuses further appends until it is reopened (which rescans what is really on disk)."""


@dataclass
class ReadReport:
    last_seq: int
    end_offset: int
    torn_tail: bool
    torn_bytes: int


def _sync_fd(fd: int) -> None:
    if sys.platform == "darwin" and hasattr(fcntl, "F_FULLFSYNC"):
        # Plain fsync on macOS does not flush the drive's cache.
        try:
            fcntl.fcntl(fd, fcntl.F_FULLFSYNC)
            return
        except OSError:
            pass  # not supported by this filesystem: fall back to fsync
        os.fsync(fd)
    elif hasattr(os, "fdatasync"):
        # fdatasync still persists the file size (needed to find appended data); it skips mtime.
        os.fdatasync(fd)
    else:
        os.fsync(fd)


def _sync_dir(path: Path) -> None:
    """Make a newly created directory entry durable. Best effort: not every FS allows it."""
    try:
        dfd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


class FileLog:
    path: Path

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.path = Path(path)
        self.fsync = fsync
        # Serialises threads sharing this instance: flock does not, since they share one open
        # file description.
        self._mutex = threading.RLock()
        self._fd: int | None = None
        self._pid = 0
        self._failed: OSError | None = None
        # Cached knowledge of the file: a frame boundary and the seq of the frame ending there.
        # Valid across processes because complete frames are never removed.
        self._end = 0
        self._last = 0
        self._open()

    # --- lifecycle -------------------------------------------------------------------------------

    def _open(self) -> None:
        parent = self.path.parent
        if not parent.is_dir():
            parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        self._fd = os.open(
            self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o644
        )
        self._pid = os.getpid()
        if created and self.fsync:
            _sync_dir(parent)

    def _handle(self) -> int:
        fd = self._fd
        if fd is None:
            raise ValueError(f"{self.path}: log is closed")
        if self._pid != os.getpid():
            # Forked child: the inherited descriptor shares the parent's open file description,
            # and with it the parent's flock, so the two would not exclude each other.
            self._mutex = threading.RLock()
            try:
                os.close(fd)
            except OSError:
                pass
            self._open()
            fd = self._fd
            assert fd is not None
        return fd

    def close(self) -> None:
        with self._mutex:
            fd, self._fd = self._fd, None
            if fd is not None and self._pid == os.getpid():
                os.close(fd)

    def __del__(self) -> None:
        # Instances are cheap to create ad hoc; do not leak a descriptor per forgotten one.
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self) -> FileLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileLog({str(self.path)!r})"

    # --- writing ---------------------------------------------------------------------------------

    def append(self, records: Sequence[Record], *, sync: bool = True) -> list[Record]:
        """Append records as frames, assigning seq = last_seq+1.. under an exclusive file lock.

        One write() per frame; a short or failed write is cut back to that frame's start (never
        further: earlier frames may already have been seen by readers) and raised. fsyncs once
        per batch when `sync` and the log's `fsync` are both true. Returns the records with seq.
        """
        if self._failed is not None:
            raise self._failed_error()
        records = list(records)
        if not records:
            return []
        # Encode outside the lock: JSON is most of the CPU cost and does not depend on seq.
        bodies = [r.body() for r in records]
        for body in bodies:
            if len(body) > MAX_BODY:
                raise ValueError(f"record body of {len(body)} bytes exceeds {MAX_BODY} bytes")

        with self._mutex:
            fd = self._handle()
            if self._failed is not None:
                raise self._failed_error()
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                pos, seq = self._catch_up(fd, repair=True)
                out: list[Record] = []
                for rec, body in zip(records, bodies):
                    seq += 1
                    frame = encode_frame(seq, body)
                    try:
                        written = os.write(fd, frame)
                    except OSError as e:
                        self._cut_back(fd, pos)
                        e.add_note(
                            f"{self.path}: appending seq {seq} failed; "
                            f"{len(out)} of {len(records)} records of this batch were appended"
                        )
                        raise
                    if written != len(frame):
                        self._cut_back(fd, pos)
                        raise OSError(
                            errno.EIO,
                            f"{self.path}: short write appending seq {seq} ({written} of "
                            f"{len(frame)} bytes); {len(out)} of {len(records)} records of this "
                            f"batch were appended",
                        )
                    pos += written
                    out.append(replace(rec, seq=seq))
                    # Keep the cache in step with the file even if a later frame fails.
                    self._end, self._last = pos, seq
                if sync and self.fsync:
                    try:
                        _sync_fd(fd)
                    except OSError as e:
                        self._failed = e
                        raise self._failed_error() from e
                return out
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _failed_error(self) -> LogFailed:
        return LogFailed(
            f"{self.path}: fsync failed ({self._failed}); the log refuses appends until reopened"
        )

    def _cut_back(self, fd: int, offset: int) -> None:
        """Remove a partially written frame so the file ends on a frame boundary again."""
        try:
            os.ftruncate(fd, offset)
        except OSError:
            # The partial frame stays as a torn tail; the next append cuts it off.
            logger.exception("%s: could not truncate a failed append back to %d", self.path, offset)

    def _catch_up(self, fd: int, *, repair: bool) -> tuple[int, int]:
        """Bring the cached (end_offset, last_seq) up to date with the file, scanning only frames
        past the cached offset (other processes may have appended). With `repair` (caller holds
        the exclusive lock) a torn tail is truncated away. Returns the new (end, last)."""
        size = os.fstat(fd).st_size
        end, last = self._end, self._last
        if size < end:
            # Shorter than what we knew: our offset may no longer be a frame boundary.
            end, last = 0, 0
        if size == end:
            return end, last
        scanner = FrameScanner(fd, end)
        for frame in scanner:
            if frame.seq != last + 1:
                raise LogGap(self.path, frame.offset, last + 1, frame.seq)
            last, end = frame.seq, frame.end
        stop = scanner.stop
        assert stop is not None
        if stop.status is FrameStatus.CORRUPT:
            raise self._corrupt(stop, last + 1)
        if stop.status is FrameStatus.TORN and repair:
            logger.warning(
                "%s: cutting off a torn tail of %d bytes at byte offset %d after seq %d "
                "(an interrupted append)",
                self.path, stop.torn_bytes, stop.offset, last,
            )
            os.ftruncate(fd, stop.offset)
        self._end, self._last = end, last
        return end, last

    def _corrupt(self, stop: Stop, seq: int | None) -> LogCorrupt:
        return LogCorrupt(
            self.path, stop.offset, seq, stop.reason, stop.next_frame, seq_inferred=True
        )

    # --- reading ---------------------------------------------------------------------------------

    def read(
        self, after: int = 0, *, start_offset: int = 0, limit: int | None = None
    ) -> Iterator[tuple[Record, int]]:
        """Yield (record, end offset of its frame) for every record with seq > after, in order.

        `start_offset` must be a frame boundary at or before the first wanted record (e.g. an end
        offset yielded earlier). Stops silently at a torn tail; raises LogCorrupt for damage
        followed by valid frames and LogGap for a seq that is not previous+1."""
        if limit is not None and limit <= 0:
            return
        fd = self._handle()
        offset = start_offset
        expected_first: int | None = 1 if offset == 0 else None
        with self._mutex:
            cached_end, cached_last = self._end, self._last
        # Tailing callers ask for "after the last seq I saw": start at the cached boundary instead
        # of rescanning, if it is further along and the file still reaches it.
        if after >= cached_last and cached_end > offset and os.fstat(fd).st_size >= cached_end:
            offset, expected_first = cached_end, cached_last + 1

        scanner = FrameScanner(fd, offset)
        prev: int | None = None
        last_end = offset
        count = 0
        from_body = Record.from_body
        for frame in scanner:
            seq = frame.seq
            if prev is None:
                if expected_first is not None:
                    if seq != expected_first:
                        raise LogGap(self.path, frame.offset, expected_first, seq)
                elif seq > after + 1:
                    # The hint skipped records we were asked for, or they are missing.
                    raise LogGap(self.path, frame.offset, f"<= {after + 1}", seq)
            elif seq != prev + 1:
                raise LogGap(self.path, frame.offset, prev + 1, seq)
            prev = seq
            last_end = frame.end
            if seq <= after:
                continue  # skipped without JSON decoding: only the frame check is paid
            try:
                record = from_body(frame.body, seq)
            except ValueError as e:
                raise LogCorrupt(self.path, frame.offset, seq, f"undecodable record body: {e}") from e
            yield record, frame.end
            count += 1
            if limit is not None and count >= limit:
                return
        stop = scanner.stop
        assert stop is not None
        if stop.status is FrameStatus.CORRUPT:
            raise self._corrupt(stop, prev + 1 if prev is not None else expected_first)
        if prev is not None:
            self._remember(last_end, prev)

    def _remember(self, end: int, last: int) -> None:
        with self._mutex:
            if end > self._end:
                self._end, self._last = end, last

    def scan(self) -> ReadReport:
        """Verify the whole file: last good seq and offset, and whether a torn tail follows.
        Raises LogCorrupt / LogGap like read()."""
        fd = self._handle()
        scanner = FrameScanner(fd, 0)
        last = 0
        end = 0
        for frame in scanner:
            if frame.seq != last + 1:
                raise LogGap(self.path, frame.offset, last + 1, frame.seq)
            last, end = frame.seq, frame.end
        stop = scanner.stop
        assert stop is not None
        if stop.status is FrameStatus.CORRUPT:
            raise self._corrupt(stop, last + 1)
        with self._mutex:
            # Authoritative: replaces the cache even if the file shrank.
            self._end, self._last = end, last
        torn = stop.status is FrameStatus.TORN
        return ReadReport(last_seq=last, end_offset=end, torn_tail=torn, torn_bytes=stop.torn_bytes)

    def last_seq(self) -> int:
        """The last good seq in the file now (including other processes' appends)."""
        with self._mutex:
            fd = self._handle()
            return self._catch_up(fd, repair=False)[1]
