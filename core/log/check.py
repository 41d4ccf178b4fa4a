"""Checking one log against itself and against the position a database stored for it.

Works on any FileLog and any position (pages.log and the applier's position today; another log and
its own position the same way). Nothing here writes, except `cut_aside`, which moves a damaged
remainder into a file beside the log and never deletes a byte.
"""
from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..durable import fsync_dir
from .filelog import FileLog, LogCorrupt, LogDamage, LogGap, LogMismatch, _sync_fd
from .framing import Frame, FrameScanner, FrameStatus, Stop, find_frame_fd, frame_digest, read_frame
from .record import Record


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


def locate_applied(flog: FileLog, applied: Applied) -> Frame | None:
    """The quick check a node makes when it opens: the database's position is on a frame boundary,
    not past the end of the log, and the frame there is the record the database applied (same seq,
    same digest). Returns that frame (None when nothing was applied); raises LogMismatch.

    A position stored before digests has no frame start: then the log is scanned up to it once."""
    if applied.nothing:
        return None
    size = flog.size()
    where = f"the database applied the log through seq {applied.seq}, ending at byte offset {applied.end}"
    if size < applied.end:
        raise LogMismatch(flog.path, size, applied.seq,
                          f"the log is {size:,} bytes long, but {where}: records it applied are missing "
                          "from the log", kind="cut")
    if applied.start is None:
        return _locate_by_scan(flog, applied, where)
    got = flog.frame_at(applied.start)
    if isinstance(got, Stop):
        raise LogMismatch(flog.path, applied.start, applied.seq,
                          f"the frame of the last record the database applied (seq {applied.seq}, from byte "
                          f"offset {applied.start}) is damaged: {got.reason}", kind="cut")
    if got.end != applied.end or got.seq != applied.seq or (
            applied.digest is not None and frame_digest(got.body) != applied.digest):
        raise LogMismatch(flog.path, applied.start, applied.seq,
                          f"the log holds another record where {where} (found seq {got.seq} ending at byte "
                          f"offset {got.end}): the log was cut and written again, or replaced")
    return got


def _locate_by_scan(flog: FileLog, applied: Applied, where: str) -> Frame:
    scanner = FrameScanner(flog._handle(), 0)
    for frame in scanner:
        if frame.end == applied.end:
            if frame.seq != applied.seq:
                break
            return frame
        if frame.end > applied.end:
            break
    raise LogMismatch(flog.path, applied.end, applied.seq,
                      f"{where}, but no frame of seq {applied.seq} ends there in the log", kind="mismatch")


@dataclass
class Remainder:
    """What lies past the valid prefix of a damaged log."""

    offset: int
    size: int                     # bytes from the cut to the end of the file
    intact: int                   # frames past the cut that still verify (their records leave the log too)
    first_seq: int | None = None
    last_seq: int | None = None


@dataclass
class LogHealth:
    path: Path
    size: int
    records: int                  # frames in the valid prefix (seq 1..last_seq)
    last_seq: int
    end: int                      # byte offset where the valid prefix ends
    applied: Applied
    damage: LogDamage | None = None        # the first damage in the log itself
    remainder: Remainder | None = None     # past the damage
    torn_tail: int = 0            # bytes of an interrupted append lying wholly past what was applied (not damage)
    applied_problem: LogMismatch | None = None  # the database disagrees with the valid prefix
    op_ids: set[str] = field(default_factory=set)  # of the valid prefix

    @property
    def sound(self) -> bool:
        return self.damage is None and self.applied_problem is None

    @property
    def applied_past_cut(self) -> bool:
        """Does the database hold anything the valid prefix does not (so it must be rebuilt)?"""
        return self.applied_problem is not None


def inspect(flog: FileLog, applied: Applied, *, collect_op_ids: bool = False) -> LogHealth:
    """Read every frame: the longest valid prefix (contiguous seqs from 1, every body a record),
    the first damage past it and what it would cost to cut there, and whether the database's
    position agrees with the prefix."""
    fd = flog._handle()
    size = os.fstat(fd).st_size
    scanner = FrameScanner(fd, 0)
    last = end = records = 0
    damage: LogDamage | None = None
    applied_frame: Frame | None = None
    op_ids: set[str] = set()
    for frame in scanner:
        if frame.seq != last + 1:
            damage = LogGap(flog.path, frame.offset, last + 1, frame.seq)
            break
        try:
            record = Record.from_body(frame.body, frame.seq)
        except ValueError as e:
            damage = LogCorrupt(flog.path, frame.offset, frame.seq, f"undecodable record body: {e}")
            break
        if collect_op_ids:
            op_ids.add(record.op_id)
        last, end, records = frame.seq, frame.end, records + 1
        if frame.end == applied.end:
            applied_frame = frame
    torn = 0
    if damage is None:
        stop = scanner.stop
        assert stop is not None
        if stop.status is FrameStatus.CORRUPT:
            damage = LogCorrupt(flog.path, stop.offset, last + 1, stop.reason, stop.next_frame, seq_inferred=True)
        elif stop.status is FrameStatus.TORN:
            if stop.offset < applied.end:
                damage = LogMismatch(
                    flog.path, stop.offset, last + 1,
                    f"the last frame (from byte offset {stop.offset}, expected seq {last + 1}) is damaged "
                    f"({stop.reason}), but the database applied the log through byte offset {applied.end}: "
                    "not an interrupted append", kind="cut")
            else:
                torn = stop.torn_bytes
    health = LogHealth(flog.path, size, records, last, end, applied, damage=damage, torn_tail=torn, op_ids=op_ids)
    if damage is not None:
        health.remainder = _remainder(fd, end, size)
    health.applied_problem = _applied_problem(flog.path, applied, health, applied_frame)
    return health


def _applied_problem(path: Path, applied: Applied, health: LogHealth, frame: Frame | None) -> LogMismatch | None:
    if applied.nothing:
        return None
    if applied.end > health.end:
        return LogMismatch(path, health.end, applied.seq,
                           f"the database applied the log through seq {applied.seq} (byte offset {applied.end}), "
                           f"past the valid prefix (seq {health.last_seq}, byte offset {health.end})", kind="cut")
    if frame is None or frame.seq != applied.seq:
        return LogMismatch(path, applied.end, applied.seq,
                           f"the database's position (seq {applied.seq}, byte offset {applied.end}) is not the end "
                           "of that record in the log")
    if (applied.start is not None and frame.offset != applied.start) or (
            applied.digest is not None and frame_digest(frame.body) != applied.digest):
        return LogMismatch(path, frame.offset, applied.seq,
                           f"the log holds another record as seq {applied.seq} than the one the database applied")
    return None


def _remainder(fd: int, cut: int, size: int) -> Remainder:
    """Count the frames past the cut that still verify, resynchronising past garbage."""
    rem = Remainder(cut, size - cut, 0)
    pos = cut
    while pos < size:
        got = read_frame(fd, pos)
        if isinstance(got, Frame):
            rem.intact += 1
            rem.first_seq = got.seq if rem.first_seq is None else rem.first_seq
            rem.last_seq = got.seq
            pos = got.end
            continue
        nxt = find_frame_fd(fd, pos + 1)
        if nxt is None:
            break
        pos = nxt
    return rem


def cut_aside(flog: FileLog, cut: int, dest: Path, *, expect_size: int) -> int:
    """Copy the bytes from `cut` to the end of the log into `dest` (a new file, synced), then
    truncate the log to `cut`. Holds the writers' lock throughout, and refuses if the file is no
    longer `expect_size` bytes (it changed since it was inspected). Returns the bytes moved."""
    with flog._mutex:
        flog._make_writable()
        fd = flog._handle()
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            size = os.fstat(fd).st_size
            if size != expect_size:
                raise LogMismatch(flog.path, cut, None,
                                  f"the log changed while the repair was being decided ({expect_size:,} bytes, now "
                                  f"{size:,}): nothing was moved — run the repair again", kind="changed")
            moved = 0
            out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                pos = cut
                while pos < size:
                    chunk = os.pread(fd, min(1 << 20, size - pos), pos)
                    if not chunk:
                        break
                    view = memoryview(chunk)
                    while view:
                        n = os.write(out, view)
                        view = view[n:]
                    pos += len(chunk)
                    moved += len(chunk)
                _sync_fd(out)
            finally:
                os.close(out)
            fsync_dir(dest.parent)
            # Only once the copy is durable does the log give the bytes up.
            os.ftruncate(fd, cut)
            _sync_fd(fd)
            flog._end, flog._last = 0, 0  # rescanned from the start on the next use
            return moved
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
