"""Checking one file log against itself and against the position a database stored for it.

Works on any FileLog and any position (pages.log and the applier's position, vectors.log and its own),
through the log's public reads (its frames from an offset, the frame at an offset, the next frame past
damage). Nothing here writes: a repair moves a damaged remainder aside with `FileLog.move_aside`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .filelog import FileLog, LogCorrupt, LogDamage, LogGap, LogMismatch
from .framing import Applied, Frame, FrameStatus, frame_digest
from .record import Record


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
    size = flog.size()
    scanner = flog.frames(0)
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
        health.remainder = _remainder(flog, end, size)
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


def _remainder(flog: FileLog, cut: int, size: int) -> Remainder:
    """Count the frames past the cut that still verify, resynchronising past garbage."""
    rem = Remainder(cut, size - cut, 0)
    pos = cut
    while pos < size:
        got = flog.frame_at(pos)
        if isinstance(got, Frame):
            rem.intact += 1
            rem.first_seq = got.seq if rem.first_seq is None else rem.first_seq
            rem.last_seq = got.seq
            pos = got.end
            continue
        nxt = flog.next_frame(pos + 1)
        if nxt is None:
            break
        pos = nxt
    return rem
