"""Checking one log against itself and against the position a database stored for it.

Works on any FileLog and any position (pages.log and the applier's position today; another log and
its own position the same way). Nothing here writes, except `cut_aside`, which moves a damaged
remainder into a file beside the log and never deletes a byte.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..durable import fsync_dir
from .filelog import FileLog, LogCorrupt, LogDamage, LogGap, LogMismatch, _sync_fd
from .framing import Applied, Frame, FrameStatus, Garbage, frame_digest
from .record import Record


@dataclass
class Spot:
    """One damaged place in a log, as the resynchronising reader found it.

    `kind`: corrupt (bytes that are no frame), undecodable (a frame that verifies but is no record),
    duplicate (a second copy of a frame already read: costs nothing), repeat (another record claiming a seq
    already read), gap (seqs missing, no bytes where they were), cut (records the database — or a peer —
    applied that the file no longer holds at its end), displaced (the intact frame of a seq the log lost where
    it stood, found further on — two frames swapped: a repair puts it back, costing nothing)."""

    kind: str
    offset: int
    end: int                      # bytes [offset, end) a repair takes out of the log (kept aside); == offset for a gap
    seqs: tuple[int, ...] = ()    # the records the log no longer holds here: a repair writes each again at its seq
    reason: str = ""
    dropped: int = 0              # records taken out that claim no seq of their own (a repeat's second record)
    copy_of: int | None = None    # duplicate / repeat: the seq it repeats

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "offset": self.offset, "end": self.end, "bytes": self.end - self.offset,
                "seqs": list(self.seqs), "reason": self.reason, "dropped": self.dropped, "copy_of": self.copy_of}

    def describe(self) -> str:
        where = f"byte offset {self.offset:,}"
        if self.kind == "duplicate":
            return f"a second copy of seq {self.copy_of} at {where} ({self.end - self.offset:,} bytes)"
        if self.kind == "repeat":
            return f"another record claiming seq {self.copy_of} at {where}"
        if self.kind == "displaced":
            return f"the intact frame of seq {self.copy_of} out of its place at {where} (a repair puts it back)"
        what = _seq_text(self.seqs)
        if self.kind == "gap":
            return f"{what} missing before {where}"
        if self.kind == "cut":
            return f"{what} applied but no longer in the log, from {where}"
        if self.kind == "undecodable":
            return f"{what} at {where} verifies but is not a record ({self.reason})"
        held = f", where {what} stood" if self.seqs else " (no record was there)"
        return f"{self.end - self.offset:,} damaged bytes at {where}{held} ({self.reason})"


def _seq_text(seqs: tuple[int, ...]) -> str:
    if not seqs:
        return "no record"
    if len(seqs) == 1:
        return f"seq {seqs[0]}"
    return f"seqs {seqs[0]}–{seqs[-1]}"


@dataclass
class LogHealth:
    path: Path
    size: int
    records: int                  # intact records the log holds (what a repair keeps as they are)
    last_seq: int                 # the last seq of the log once repaired (intact or written again)
    end: int                      # byte offset of the first damage (the whole file when sound): the valid prefix
    applied: Applied
    damage: LogDamage | None = None        # the first damage in the log itself, as a reader meets it
    spots: list[Spot] = field(default_factory=list)   # every damaged place, in file order
    torn_tail: int = 0            # bytes of an interrupted append lying wholly past what was applied (not damage)
    applied_problem: LogMismatch | None = None  # the database disagrees with the log (not explained by damage)
    op_ids: set[str] = field(default_factory=set)  # of the intact records
    prefix_records: int = 0       # intact records before the first damage

    @property
    def found(self) -> dict[int, int]:
        """seq -> where the intact frame of a seq the log lost in its place stands, out of its place."""
        return {spot.copy_of: spot.offset for spot in self.spots if spot.kind == "displaced" and spot.copy_of}

    @property
    def sound(self) -> bool:
        return self.damage is None and self.applied_problem is None

    @property
    def applied_past_cut(self) -> bool:
        """Does the database disagree with the log in a way no repair of the log mends (it must be rebuilt)?"""
        return self.applied_problem is not None

    @property
    def lost_seqs(self) -> list[int]:
        """The seqs whose records the log no longer holds (each written again by a repair)."""
        return [seq for spot in self.spots for seq in spot.seqs]


def walk(flog: FileLog, applied: Applied, *, others_applied: int = 0) -> Iterator[tuple[str, Any]]:
    """The log as a repair sees it, in order: ("keep", (frame, record)) for every intact record at its place,
    ("spot", Spot) for every damaged place (just before the frame that follows it), and at the end ("torn",
    Garbage) when an interrupted append follows everything applied. `others_applied`: the furthest seq another
    node applied (their records are never an interrupted append). The one reader both `inspect` and the
    repair's writer use, so the two never disagree."""
    expected = 1
    pending: Garbage | None = None
    offsets: list[int] = []       # where each seq's intact frame starts (seq - 1): a repeat is compared with it
    for item in flog.resync(0):
        if isinstance(item, Garbage):
            whole = flog.whole_frame_damage(item.offset) if item.torn else None
            if whole is not None:
                # a whole frame damaged after it was written: its record is lost here, not an interrupted append
                if pending is not None:
                    yield "spot", Spot("corrupt", pending.offset, pending.end, (), pending.reason)
                    pending = None
                yield "spot", Spot("corrupt", item.offset, item.end, (expected,), whole)
                offsets.append(-1)
                expected += 1
                break
            if item.torn:
                applied_hi = max(applied.seq, others_applied)
                if applied_hi >= expected or applied.end > item.offset:
                    yield "spot", Spot("cut", item.offset, item.end, tuple(range(expected, applied_hi + 1)),
                                       f"the file ends in {item.end - item.offset:,} bytes that are no frame "
                                       f"({item.reason}), where records were applied")
                    expected = applied_hi + 1
                else:
                    yield "torn", item
                pending = None
                break
            pending = item
            continue
        frame = item
        if frame.seq < expected:
            if pending is not None:
                yield "spot", Spot("corrupt", pending.offset, pending.end, (), pending.reason)
                pending = None
            at = offsets[frame.seq - 1] if 0 < frame.seq <= len(offsets) else -1
            if at == -1 and 0 < frame.seq <= len(offsets) and _is_record(frame):
                # the seq is one the log lost where it stood (a gap, damaged bytes) and here is an intact record
                # claiming it: its frame, out of place (two frames swapped) — a repair puts it back in its place
                offsets[frame.seq - 1] = frame.offset
                yield "spot", Spot("displaced", frame.offset, frame.end, (), "an intact frame out of its place",
                                   copy_of=frame.seq)
                continue
            kept = flog.frame_at(at) if at >= 0 else None
            if isinstance(kept, Frame) and kept.body == frame.body:
                yield "spot", Spot("duplicate", frame.offset, frame.end, (), "an exact copy", copy_of=frame.seq)
            else:
                yield "spot", Spot("repeat", frame.offset, frame.end, (), "a second record with a seq already read",
                                   dropped=1, copy_of=frame.seq)
            continue
        if frame.seq > expected:
            missing = tuple(range(expected, frame.seq))
            if pending is not None:
                yield "spot", Spot("corrupt", pending.offset, pending.end, missing, pending.reason)
            else:
                yield "spot", Spot("gap", frame.offset, frame.offset, missing, "seqs skipped")
            offsets.extend([-1] * len(missing))
        elif pending is not None:
            yield "spot", Spot("corrupt", pending.offset, pending.end, (), pending.reason)
        pending = None
        offsets.append(frame.offset)
        expected = frame.seq + 1
        try:
            record = Record.from_body(frame.body, frame.seq)
        except ValueError as e:
            offsets[-1] = -1
            yield "spot", Spot("undecodable", frame.offset, frame.end, (frame.seq,), str(e))
            continue
        yield "keep", (frame, record)
    applied_hi = max(applied.seq, others_applied)
    if applied_hi >= expected:
        end = flog.size()
        yield "spot", Spot("cut", end, end, tuple(range(expected, applied_hi + 1)),
                           "the log ends before records that were applied")


def _is_record(frame: Frame) -> bool:
    try:
        Record.from_body(frame.body, frame.seq)
    except ValueError:
        return False
    return True


def inspect(flog: FileLog, applied: Applied, *, collect_op_ids: bool = False, others_applied: int = 0) -> LogHealth:
    """Read every frame, resynchronising past damage: every intact record, every damaged place and what it
    costs, an interrupted append at the end (not damage), and whether the database's position agrees with
    the log (its seq's record, by digest: a repair may have moved it to another offset)."""
    size = flog.size()
    records = last = prefix = 0
    first_damage: int | None = None
    damage: LogDamage | None = None
    spots: list[Spot] = []
    torn = 0
    op_ids: set[str] = set()
    applied_frame: Frame | None = None
    for what, item in walk(flog, applied, others_applied=others_applied):
        if what == "keep":
            frame, record = item
            records += 1
            last = max(last, frame.seq)
            if first_damage is None:
                prefix += 1
            if collect_op_ids:
                op_ids.add(record.op_id)
            if frame.seq == applied.seq:
                applied_frame = frame
        elif what == "spot":
            spots.append(item)
            if item.seqs:
                last = max(last, item.seqs[-1])
            if first_damage is None:
                first_damage = item.offset
                damage = _as_damage(flog.path, item, prefix)
        else:
            torn = item.end - item.offset
    end = first_damage if first_damage is not None else size - torn
    health = LogHealth(flog.path, size, records, last, end, applied, damage=damage, spots=spots, torn_tail=torn,
                       op_ids=op_ids, prefix_records=prefix)
    health.applied_problem = _applied_problem(flog.path, applied, health, applied_frame)
    return health


def _as_damage(path: Path, spot: Spot, prefix: int) -> LogDamage:
    """The first damaged place, as the error a reader of the log meets there."""
    if spot.kind in ("duplicate", "repeat", "displaced"):
        return LogGap(path, spot.offset, prefix + 1, spot.copy_of or prefix)
    if spot.kind == "gap":
        return LogGap(path, spot.offset, prefix + 1, spot.seqs[-1] + 1)
    if spot.kind == "undecodable":
        return LogCorrupt(path, spot.offset, spot.seqs[0], f"undecodable record body: {spot.reason}")
    if spot.kind == "cut":
        return LogMismatch(path, spot.offset, prefix + 1,
                           f"the log ends at byte offset {spot.offset:,} in damaged or missing frames (from expected seq "
                           f"{prefix + 1}), but records through seq {spot.seqs[-1]} were applied: not an interrupted "
                           "append", kind="cut")
    return LogCorrupt(path, spot.offset, prefix + 1, spot.reason, spot.end, seq_inferred=True)


def _applied_problem(path: Path, applied: Applied, health: LogHealth, frame: Frame | None) -> LogMismatch | None:
    """The database's position against the log: fine when the log holds its last record (the same digest,
    wherever it now is), or when that record is one of the damaged ones (a repair writes it again)."""
    if applied.nothing:
        return None
    if applied.seq in set(health.lost_seqs):
        return None
    if frame is None:
        return LogMismatch(path, applied.end, applied.seq,
                           f"the database's position (seq {applied.seq}, byte offset {applied.end}) names a record "
                           "the log does not hold")
    if applied.digest is not None:
        if frame_digest(frame.body) != applied.digest:
            return LogMismatch(path, frame.offset, applied.seq,
                               f"the log holds another record as seq {applied.seq} than the one the database applied")
        return None
    if frame.end != applied.end:
        return LogMismatch(path, applied.end, applied.seq,
                           f"the database's position (seq {applied.seq}, byte offset {applied.end}) is not the end "
                           "of that record in the log")
    return None


def cut_aside(flog: FileLog, cut: int, dest: Path, *, expect_size: int) -> int:
    """Copy the bytes from `cut` to the end of the log into `dest` (a new file, synced), then
    truncate the log to `cut`. Holds the writers' lock throughout, and refuses if the file is no
    longer `expect_size` bytes (it changed since it was inspected). Returns the bytes moved."""
    with flog.locked() as fd:
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
        flog.forget()  # rescanned from the start on the next use
        return moved


def verify_sound(flog: FileLog, mark: dict[str, Any] | None) -> dict[str, Any]:
    """Is the whole log sound — every frame verifying, seqs contiguous from 1 (an interrupted append at the end
    is no damage; a whole last frame whose checksum fails is)? Raises the first damage (LogCorrupt, LogGap); returns the mark to keep for next time.

    Every command checks this at open, so a flipped bit behind what the database applied is said by a read
    too, not only by the next write. A full scan costs about 5 µs a record, so the answer is remembered as a
    mark (the file's identity, size and modification time, and its last frame): a log unchanged since is not
    read again, one that only grew is read from the last frame on (once that frame is found unchanged)."""
    st = flog.stat()
    ident = [st.st_dev, st.st_ino]
    if mark and mark.get("ident") == ident and mark.get("size") == st.st_size and mark.get("mtime_ns") == st.st_mtime_ns:
        return mark
    start, seq, last = 0, 0, None
    if mark and mark.get("ident") == ident and st.st_size > int(mark.get("size", 0)) and mark.get("last_start") is not None:
        got = flog.frame_at(int(mark["last_start"]))
        if (isinstance(got, Frame) and got.seq == mark.get("seq") and got.end == mark.get("end")
                and frame_digest(got.body) == mark.get("digest")):
            start, seq, last = got.end, got.seq, got
    scanner = flog.frames(start)
    for frame in scanner:
        if frame.seq != seq + 1:
            raise LogGap(flog.path, frame.offset, seq + 1, frame.seq)
        seq, last = frame.seq, frame
    stop = scanner.stop
    assert stop is not None
    if stop.status is FrameStatus.CORRUPT:
        raise LogCorrupt(flog.path, stop.offset, seq + 1, stop.reason, stop.next_frame, seq_inferred=True)
    whole = flog.whole_frame_damage(stop.offset) if stop.status is FrameStatus.TORN else None
    if whole is not None:
        raise LogCorrupt(flog.path, stop.offset, seq + 1, whole, seq_inferred=True)
    return {"ident": ident, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "seq": seq,
            "last_start": last.offset if last is not None else None, "end": last.end if last is not None else 0,
            "digest": frame_digest(last.body) if last is not None else None}
