"""An append-only, multi-process-safe log of Records in one file.

Writers serialise on an exclusive `flock` of the log file itself; sequence numbers are assigned
under that lock, so they are contiguous across processes. Readers take no lock: frames are only
ever appended, and the only bytes a writer ever removes are a torn tail (an interrupted append)
lying wholly past what the database applied, which readers never yield. Each frame goes out in a
single `write()` on an O_APPEND descriptor, so a crash leaves at most one incomplete frame at the
end, which the next writer cuts off.

Anything else that is wrong with the file — a bad frame followed by good ones, a seq that repeats,
skips or goes backwards, a tail cut into records the database already applied — is *damage*: it
raises a `LogDamage` naming the byte offset and the seq, and nothing is appended behind it.

A log is opened read-only unless asked otherwise; the first append reopens it for writing, so a
command that only reads works on a home it cannot write.
"""
from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable, Iterator, Sequence

from ..durable import fsync_dir
from ..errors import CrewletError, Description
from ..clock import now_ms
from ..process import Holder
from .framing import (_HEADER, HEADER_SIZE, MAGIC, MAX_BODY, Applied, Frame, FrameScanner, FrameStatus, Garbage, Stop,
                      crc32c, frame_digest, frame_header, read_frame, resync)
from .record import Record

logger = logging.getLogger(__name__)

# Frames are written in runs of whole frames of up to this many bytes: one write() a run rather
# than one a frame (a batch of 1,000 records paid 1,000 syscalls).
WRITE_BYTES = 1 << 20

REPAIR_HINT = ("run `crewlet log check` (it names the damage and what a repair costs); `crewlet log repair` keeps "
               "every intact record")

# A writer waiting for the log's lock (another process appends, or repairs) says so once after
# LOCK_NOTICE_S, naming the holder, and gives up after LOCK_WAIT_S with nothing written (LogBusy): an
# append holds the lock for milliseconds, a large import's batch for about a second, so half a minute
# means the holder is stuck (stopped in a debugger, a hung network filesystem), not busy.
LOCK_NOTICE_S = 1.0
LOCK_WAIT_S = 30.0
# the holder of a log's lock writes who it is here (beside the log), so a waiter can name it
HOLDER_SUFFIX = ".lock-holder"
_HOLDER_BYTES = 512


class LogDamage(CrewletError):
    """The log cannot be read (or written) past `offset`: damage, not an interrupted append.

    `kind` is one of: corrupt (a bad frame followed by good ones), undecodable (a verified frame
    whose body is not a record), gap, repeat (a seq repeated or going backwards), cut (the file
    ends before, or is torn inside, what the database applied), mismatch (the frame where the
    database's position says its last applied record is holds something else)."""

    kind = "damage"
    code = "log_damaged"

    def __init__(self, path: Path, offset: int, seq: int | None, reason: str, message: str) -> None:
        super().__init__(message)
        self.path = Path(path)
        self.offset = offset
        self.seq = seq
        self.reason = reason
        self.rescued_to: str | None = None  # where a refused save's text was kept, if one was
        self.kept_nowhere: str | None = None  # a refused save's text no rescue could take (the CLI prints it)
        # how to fix it, said after the damage (a node of a shared directory may also adopt a snapshot)
        self.fix = REPAIR_HINT
        # the last record read intact before the damage ("damaged past record N"); None when unknown
        self.good_through: int | None = max(0, seq - 1) if seq is not None else None

    def line(self) -> str:
        """The one line every command says over this damage: past which record, what, and what to run."""
        good = self.good_through
        past = f" past record {good}" if good is not None and self.kind != "diverged" else ""
        return f"the log is damaged{past}: {self} — writes are refused; {self.fix}"

    def description(self) -> Description:
        """The line with the text a refused save kept (or could not keep: printed instead), and the facts."""
        good = self.good_through
        past = f" past record {good}" if good is not None and self.kind != "diverged" else ""
        kept = f" (your text is kept in {self.rescued_to})" if self.rescued_to else ""
        kept_nowhere = getattr(self, "kept_nowhere", None)
        if kept_nowhere is not None:
            kept += " (your text was kept nowhere — the rescue could not be written; it is printed instead)"
        details = {"kind": self.kind, "offset": self.offset, "seq": self.seq, "good_through": good,
                   "rescued_to": self.rescued_to} | self.details
        if kept_nowhere is not None:
            details |= {"kept_nowhere": True, "your_body": kept_nowhere}
        return Description(self.code, self.line() + kept, f"the log is damaged{past}: {self} — writes are refused{kept}",
                           details)


class LogCorrupt(LogDamage):
    """A bad frame followed by good ones, or a verified frame whose body is not a record."""

    kind = "corrupt"

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
        seq_text = "seq unknown" if seq is None else f"expected seq {seq}" if seq_inferred else f"seq {seq}"
        msg = f"{path}: corrupt log frame at byte offset {offset} ({seq_text}): {reason}"
        if next_offset is not None:
            msg += f"; a valid frame follows at byte offset {next_offset}"
        super().__init__(Path(path), offset, seq, reason, msg)
        self.next_offset = next_offset
        if reason.startswith("undecodable"):
            self.kind = "undecodable"


class LogGap(LogDamage):
    """A frame whose seq is not the previous one + 1: a gap, or a seq repeated / going backwards
    (a duplicated or reordered frame)."""

    kind = "gap"

    def __init__(self, path: Path, offset: int, expected: int | str, found: int) -> None:
        if isinstance(expected, int) and found < expected:
            self.kind = "repeat"
            why = ("the seq repeats (a duplicated frame)" if found == expected - 1
                   else "the seq goes backwards (a reordered or duplicated frame)")
        elif isinstance(expected, int):
            missing = f"seq {expected}" if found == expected + 1 else f"seqs {expected}-{found - 1}"
            why = f"{missing} missing"
        else:
            why = "records missing"
        super().__init__(
            Path(path), offset, found, why,
            f"{path}: sequence {'repeat' if self.kind == 'repeat' else 'gap'} at byte offset {offset}: "
            f"expected seq {expected}, found {found} — {why}",
        )
        self.expected = expected
        self.found = found
        self.good_through = expected - 1 if isinstance(expected, int) else None


class LogMismatch(LogDamage):
    """The log disagrees with what a database applied from it: it ends before the database's
    position, is torn inside it, or holds another record where the database's last one was."""

    kind = "mismatch"

    def __init__(self, path: Path, offset: int, seq: int | None, reason: str, *, kind: str = "mismatch") -> None:
        super().__init__(Path(path), offset, seq, reason, f"{path}: {reason}")
        self.kind = kind


class RecordTooLarge(CrewletError, ValueError):
    """A record whose body exceeds the frame limit. Raised before anything is appended."""

    code = "record_too_large"

    def __init__(self, record: Record, size: int) -> None:
        mib = 1024 * 1024
        super().__init__(
            f"a {record.type} record of {size / mib:.1f} MiB exceeds the log's {MAX_BODY // mib} MiB record "
            "limit (text is stored JSON-escaped, where a control character takes 6 bytes) — nothing was written; "
            "split the text, or remove its control characters"
        )
        self.record = record
        self.size = size


class LogBusy(CrewletError):
    """Another process held the log's lock for longer than the writer waits (LOCK_WAIT_S): nothing was
    appended."""

    code = "log_busy"

    def __init__(self, path: Path, waited: float, holder: str) -> None:
        super().__init__(f"{path}: {holder} has held the log's lock for over {waited:.0f} s — nothing was written; "
                         "retry once it is done (or stop it)")
        self.path = path
        self.holder = holder


class LogFailed(CrewletError):
    """An fsync failed. After a failed fsync the kernel may already have dropped the unwritten
    pages and cleared the error, so retrying could report success for data that is gone; the log
    refuses further appends until it is reopened (which rescans what is really on disk)."""

    code = "log"

    def description(self) -> Description:
        line = f"the log cannot be written: {self}"
        return Description(self.code, line, line, dict(self.details))


class LogMoved(LogFailed):
    """The path no longer names the file this process opened (the home joined a shared directory and
    its log moved there, or the file was replaced): appending to the old file would be lost."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path}: the log was moved or replaced since this process opened it (the home joined a "
                         "shared directory?) — nothing was appended; run the command again")
        self.path = path


# Who guards bytes beyond this node's own position: (the furthest byte offset another node's database
# applied this log through, and that node's name). Asked only when a torn tail is about to be cut.
Guard = Callable[[], tuple[int, str]]


@dataclass
class ReadReport:
    last_seq: int
    end_offset: int
    torn_tail: bool
    torn_bytes: int


def whole_frame_damage(fd: int, offset: int) -> str | None:
    """Why the bytes from `offset` to the end of the file — no frame verifies there, and none after — are a
    whole frame damaged since it was written, not an interrupted append; None when they may be one.

    An append is one write() of whole frames, synced before it is acknowledged. Interrupted, it leaves a frame
    cut short (its length runs past the end of the file), or — after a power loss — one whose last bytes never
    landed (zeros, at its end or — pages reaching the disk out of order — anywhere in its body: canonical JSON
    holds no raw NUL byte). A frame whose every byte is there, whose last byte
    landed, and whose checksum fails was written whole and damaged after: cutting it as a torn tail would lose
    an acknowledged record without a word. So is a frame that verifies once its magic, or its length, is
    taken as the file says it must be (a flipped bit in the header)."""
    size = os.fstat(fd).st_size
    header = os.pread(fd, HEADER_SIZE, offset)
    if len(header) < HEADER_SIZE:
        return None
    magic, length, seq, crc = _HEADER.unpack(header)
    whole = size - offset - HEADER_SIZE             # the body length the rest of the file allows
    if magic == MAGIC and 0 < length <= MAX_BODY and length <= whole:
        body = os.pread(fd, length, offset + HEADER_SIZE)
        # a NUL anywhere in it is a page that never landed (power loss writes pages out of order): canonical
        # JSON holds no raw NUL, so such a frame may be torn; only a body with none is damage
        if (len(body) == length and body[-1:] != b"" and b"\0" not in body
                and crc32c(body, crc32c(header[4:16])) != crc):
            return (f"a whole frame (seq {seq} by its header, {length:,} bytes) whose checksum fails: damaged "
                    "after it was written, not an interrupted append")
        return None
    if not 0 < whole <= MAX_BODY:
        return None
    body = os.pread(fd, whole, offset + HEADER_SIZE)
    if body[-1:] in (b"\0", b""):
        return None
    if magic != MAGIC and 0 < length <= MAX_BODY and length == whole \
            and crc32c(body, crc32c(header[4:16])) == crc:
        return f"a whole frame (seq {seq}) whose magic is damaged: not an interrupted append"
    if magic == MAGIC and crc32c(body, crc32c(whole.to_bytes(4, "big") + header[8:16])) == crc:
        return f"a whole frame (seq {seq}) whose length field is damaged: not an interrupted append"
    return None


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


class FileLog:
    path: Path

    def __init__(
        self, path: str | os.PathLike[str], *, fsync: bool = True, readonly: bool = False
    ) -> None:
        """`readonly`: open the file for reading only (it must exist); the first append reopens it
        for writing, so only a command that writes needs a writable home."""
        self.path = Path(path)
        self.fsync = fsync
        # Serialises threads sharing this instance: flock does not, since they share one open
        # file description.
        self._mutex = threading.RLock()
        self._fd: int | None = None
        self._pid = 0
        self._writable = not readonly
        self._failed: OSError | None = None
        # Cached knowledge of the file: a frame boundary and the seq of the frame ending there,
        # only ever set from frames verified contiguous from byte 0. Valid across processes
        # because complete frames are never removed (a repair that moves damage aside leaves the
        # file shorter than any cache past it, which is noticed).
        self._end = 0
        self._last = 0
        # said once when a writer has waited LOCK_NOTICE_S for the lock (None: a warning on this module's
        # logger, which the CLI prints on stderr); the wait is given up after `lock_wait_s`
        self.on_lock_wait: Callable[[str], None] | None = None
        self.lock_wait_s = LOCK_WAIT_S
        self._holder_fd: int | None = None
        self._open()

    # --- lifecycle -------------------------------------------------------------------------------

    def _open(self) -> None:
        cloexec = getattr(os, "O_CLOEXEC", 0)
        if not self._writable:
            self._fd = os.open(self.path, os.O_RDONLY | cloexec)
            self._pid = os.getpid()
            return
        parent = self.path.parent
        if not parent.is_dir():
            parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | cloexec, 0o644)
        self._pid = os.getpid()
        if created and self.fsync:
            fsync_dir(parent)

    @property
    def writable(self) -> bool:
        return self._writable

    def _make_writable(self) -> None:
        """Reopen for appending (caller holds the mutex). A home that cannot be written says so
        here, before anything is appended."""
        if self._writable:
            return
        cloexec = getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | cloexec)
        except OSError as e:
            e.add_note(f"{self.path}: the log cannot be opened for writing; nothing was appended")
            raise
        old, self._fd, self._writable = self._fd, fd, True
        if old is not None and self._pid == os.getpid():
            os.close(old)
        self._pid = os.getpid()

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
            hfd, self._holder_fd = self._holder_fd, None
            if self._pid == os.getpid():
                for d in (fd, hfd):
                    if d is not None:
                        os.close(d)

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

    def size(self) -> int:
        return os.fstat(self._handle()).st_size

    def stat(self) -> os.stat_result:
        """The open file's stat (what `crewlet` remembers of a log it verified)."""
        return os.fstat(self._handle())

    def replaced(self) -> bool:
        """Does the path name another file than the one this process reads (a repair wrote the log anew, or
        the home joined a shared directory)? Then the log must be opened again."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return True
        held = os.fstat(self._handle())
        return (st.st_dev, st.st_ino) != (held.st_dev, held.st_ino)

    # --- the writers' lock -----------------------------------------------------------------------

    @contextmanager
    def locked(self) -> Iterator[int]:
        """Hold the writers' lock (an exclusive flock of the log file, reopened for writing): no append of any
        process lands meanwhile. Yields the descriptor. Waits as an append waits (says so after
        LOCK_NOTICE_S, gives up after `lock_wait_s` with LogBusy)."""
        with self._mutex:
            self._make_writable()
            fd = self._handle()
            self._lock(fd)
            try:
                yield fd
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    @property
    def holder_path(self) -> Path:
        return self.path.with_name(self.path.name + HOLDER_SUFFIX)

    def _lock(self, fd: int) -> None:
        """Take the exclusive flock, polling once it is held elsewhere (a blocking flock cannot be given up)."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._wait_for_lock(fd)
        self._say_holder()

    def _wait_for_lock(self, fd: int) -> None:
        started = time.monotonic()
        said = False
        delay = 0.0005
        while True:
            time.sleep(delay)
            delay = min(delay * 2, 0.02)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            waited = time.monotonic() - started
            if not said and waited >= LOCK_NOTICE_S:
                said = True
                notice = f"waiting for the lock of {self.path}: {self.lock_holder()} holds it"
                if self.on_lock_wait is not None:
                    self.on_lock_wait(notice)
                else:
                    logger.warning("%s", notice)
            if waited >= self.lock_wait_s:
                raise LogBusy(self.path, waited, self.lock_holder())

    def _say_holder(self) -> None:
        """Under the lock: write who holds it beside the log (one pwrite; best effort — a waiter that cannot
        read it says "another process")."""
        try:
            if self._holder_fd is None:
                self._holder_fd = os.open(self.holder_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
            data = json.dumps(Holder.me().to_json() | {"since_ms": now_ms()}).encode("utf-8")
            os.pwrite(self._holder_fd, data.ljust(_HOLDER_BYTES)[:_HOLDER_BYTES], 0)
        except OSError:
            pass

    def lock_holder(self) -> str:
        """Who holds the writers' lock, as the holder wrote it (pid and for how long)."""
        try:
            with open(self.holder_path, "rb") as fh:
                data = json.loads(fh.read(_HOLDER_BYTES).decode("utf-8").strip() or "{}")
        except (OSError, ValueError):
            return "another process"
        holder = Holder.from_json(data)
        if holder is None:
            return "another process"
        since = data.get("since_ms")
        held = f" for {max(0, now_ms() - int(since)) / 1000:.0f} s" if since else ""
        return f"{holder.describe()}{held}"

    # --- writing ---------------------------------------------------------------------------------

    def append(
        self, records: Sequence[Record], *, sync: bool = True, keep_through: int = 0, guard: Guard | None = None
    ) -> list[Record]:
        """Append records as frames (see `append_frames`). Returns the records with their seq."""
        return [rec for rec, _ in self.append_frames(records, sync=sync, keep_through=keep_through, guard=guard)]

    def append_frames(
        self, records: Sequence[Record], *, sync: bool = True, keep_through: int = 0, guard: Guard | None = None
    ) -> list[tuple[Record, Frame]]:
        """Append records as frames, assigning seq = last_seq+1.. under an exclusive file lock.
        Returns each record with its seq and the frame written for it (offset, end and the body bytes:
        what a reader of the file gets, so a writer can apply its records without reading them back).

        Each record is encoded once. Frames go out in writes of up to WRITE_BYTES, each a run of
        whole frames; a short write keeps the whole frames it wrote and cuts off the partial one (never
        further: earlier frames may already have been seen by readers); a failed write is cut back to
        its start; either is raised, saying how many records of the batch were appended. fsyncs once
        per batch when `sync` and the log's `fsync` are both true.

        `keep_through` is the byte offset a database has applied the log through: a torn tail is
        cut off only when it lies wholly past it; one that starts before it (or a file that ends
        before it) is damage, raised as LogMismatch with nothing appended. `guard`, when given, names
        the furthest another node sharing the log applied it through: a torn tail that starts before
        that is damage too (no node can have applied an interrupted append).
        """
        if self._failed is not None:
            raise self._failed_error()
        records = list(records)
        if not records:
            return []
        # Encode outside the lock: JSON is most of the CPU cost and does not depend on seq. The
        # size limit is checked for the whole batch before a byte is written.
        bodies = [r.body() for r in records]
        for rec, body in zip(records, bodies):
            if len(body) > MAX_BODY:
                raise RecordTooLarge(rec, len(body))

        with self._mutex:
            self._make_writable()
            fd = self._handle()
            if self._failed is not None:
                raise self._failed_error()
            self._lock(fd)
            try:
                self._check_same_file(fd)
                pos, seq = self._catch_up(fd, repair=True, keep_through=keep_through, guard=guard)
                out: list[tuple[Record, Frame]] = []
                run: list[bytes] = []  # headers and bodies of frames not written yet, and their (record, frame)
                pending: list[tuple[Record, Frame]] = []
                run_bytes = 0
                last = len(records) - 1
                for i, (rec, body) in enumerate(zip(records, bodies)):
                    seq += 1
                    start = pos + run_bytes
                    run += (frame_header(seq, body), body)
                    run_bytes += HEADER_SIZE + len(body)
                    pending.append((rec.at_seq(seq), Frame(seq, body, start, pos + run_bytes)))
                    if run_bytes >= WRITE_BYTES or i == last:
                        pos = self._write_run(fd, pos, run, pending, out, len(records))
                        run, pending, run_bytes = [], [], 0
                if sync and self.fsync:
                    try:
                        _sync_fd(fd)
                    except OSError as e:
                        self._failed = e
                        raise self._failed_error() from e
                return out
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _write_run(self, fd: int, pos: int, run: list[bytes], pending: list[tuple[Record, Frame]],
                   out: list[tuple[Record, Frame]], total: int) -> int:
        """Write a run of whole frames at `pos` (the end of the file) in one write(); on success add
        them to `out` and return the new end. Keeps the cache in step with the file even if a later
        run fails."""
        data = b"".join(run)
        try:
            written = os.write(fd, data)
        except OSError as e:
            self._cut_back(fd, pos)
            e.add_note(f"{self.path}: appending seq {pending[0][1].seq} failed; "
                       f"{len(out)} of {total} records of this batch were appended")
            raise
        if written == len(data):
            out.extend(pending)
            self._end, self._last = pending[-1][1].end, pending[-1][1].seq
            return pos + written
        # a short write: the whole frames it wrote stay, the partial one is cut off
        whole = [p for p in pending if p[1].end <= pos + written]
        out.extend(whole)
        keep = whole[-1][1].end if whole else pos
        self._cut_back(fd, keep)
        if whole:
            self._end, self._last = keep, whole[-1][1].seq
        torn = pending[len(whole)][1]
        raise OSError(
            errno.EIO,
            f"{self.path}: short write appending seq {torn.seq} ({pos + written - torn.offset} of "
            f"{torn.end - torn.offset} bytes); {len(out)} of {total} records of this batch were appended",
        )

    def _check_same_file(self, fd: int) -> None:
        """Under the lock: the path still names the file we hold open. A writer that waited for the
        lock while the home joined a shared directory must not append to the log left behind."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise LogMoved(self.path) from None
        held = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (held.st_dev, held.st_ino):
            raise LogMoved(self.path)

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

    def _catch_up(self, fd: int, *, repair: bool, keep_through: int = 0,
                  guard: Guard | None = None) -> tuple[int, int]:
        """Bring the cached (end_offset, last_seq) up to date with the file, scanning only frames
        past the cached offset (other processes may have appended). With `repair` (caller holds
        the exclusive lock) a torn tail lying wholly past `keep_through` is truncated away.
        Returns the new (end, last)."""
        size = os.fstat(fd).st_size
        end, last = self._end, self._last
        if size < end:
            # Shorter than what we knew: our offset may no longer be a frame boundary.
            end, last = 0, 0
        if size == end and end >= keep_through:
            return end, last
        end, last, stop = self._verified(fd, end, last)
        if end < keep_through:
            # The database applied bytes this file no longer holds intact: cutting here would
            # make the next seq name a second record. Damage, not an interrupted append.
            if stop.status is FrameStatus.TORN:
                reason = (f"the last frame (from byte offset {stop.offset}, expected seq {last + 1}) is "
                          f"damaged ({stop.reason}), but the database applied the log through byte "
                          f"offset {keep_through}: not an interrupted append")
            else:
                reason = (f"the log ends at byte offset {end} (seq {last}), but the database applied it "
                          f"through byte offset {keep_through}: records it applied are missing")
            raise LogMismatch(self.path, end, last + 1, reason, kind="cut")
        if stop.status is FrameStatus.TORN and repair and guard is not None:
            far, who = guard()
            if stop.offset < far:
                # another node's database applied bytes this node reads as an interrupted append: its
                # view of the file is not ours (a filesystem that does not keep appends coherent)
                raise LogMismatch(
                    self.path, stop.offset, last + 1,
                    f"the last frame (from byte offset {stop.offset}, expected seq {last + 1}) reads as incomplete "
                    f"({stop.reason}), but {who} applied the log through byte offset {far}: not an interrupted "
                    "append — nothing was cut or appended", kind="cut")
        if stop.status is FrameStatus.TORN and repair:
            logger.warning(
                "%s: cutting off a torn tail of %d bytes at byte offset %d after seq %d "
                "(an interrupted append)",
                self.path, stop.torn_bytes, stop.offset, last,
            )
            os.ftruncate(fd, stop.offset)
        self._end, self._last = end, last
        return end, last

    def _verified(self, fd: int, end: int, last: int) -> tuple[int, int, Stop]:
        """Every verified frame from `end` (a frame boundary, the end of seq `last`): each seq the one after
        (else LogGap), no bad frame with good ones after it (else LogCorrupt). Returns the new (end, last)
        and what the scan stopped at (the end, or a torn tail)."""
        scanner = FrameScanner(fd, end)
        for frame in scanner:
            if frame.seq != last + 1:
                raise LogGap(self.path, frame.offset, last + 1, frame.seq)
            last, end = frame.seq, frame.end
        stop = scanner.stop
        assert stop is not None
        if stop.status is FrameStatus.CORRUPT:
            raise self._corrupt(stop, last + 1)
        if stop.status is FrameStatus.TORN:
            why = whole_frame_damage(fd, stop.offset)
            if why is not None:
                raise LogCorrupt(self.path, stop.offset, last + 1, why, seq_inferred=True)
        return end, last, stop

    def _corrupt(self, stop: Stop, seq: int | None) -> LogCorrupt:
        return LogCorrupt(
            self.path, stop.offset, seq, stop.reason, stop.next_frame, seq_inferred=True
        )

    # --- reading ---------------------------------------------------------------------------------

    def resync(self, offset: int = 0) -> Iterator[Frame | Garbage]:
        """Every verified frame from `offset` and every run of bytes between them that is no frame (see
        `framing.resync`): the reader `crewlet log check` and `repair` use. Never raises for damage."""
        return resync(self._handle(), offset)

    def frames(self, offset: int = 0) -> FrameScanner:
        """The verified frames from a frame boundary, to the first thing that is not one (its `stop` says
        what that was). No seq is checked, no body decoded."""
        return FrameScanner(self._handle(), offset)

    def read_bytes(self, offset: int, n: int) -> bytes:
        """Up to `n` raw bytes of the file at `offset` (what a damaged frame still says)."""
        return os.pread(self._handle(), n, offset)

    def whole_frame_damage(self, offset: int) -> str | None:
        """`whole_frame_damage` of this file: is what looks like a torn tail at `offset` a damaged whole frame?"""
        return whole_frame_damage(self._handle(), offset)

    def frame_at(self, offset: int) -> Frame | Stop:
        """The verified frame starting at `offset`, or why there is none (straight from the file)."""
        return read_frame(self._handle(), offset)

    def locate(self, applied: Applied) -> Frame | None:
        """The quick check a node makes when it opens: the database's position is on a frame boundary,
        not past the end of the log, and the frame there is the record the database applied (same seq,
        same digest). Returns that frame (None when nothing was applied); raises LogMismatch.

        A position stored before digests has no frame start: then the log is scanned up to it once."""
        if applied.nothing:
            return None
        size = self.size()
        where = f"the database applied the log through seq {applied.seq}, ending at byte offset {applied.end}"
        if size < applied.end:
            raise LogMismatch(self.path, size, applied.seq,
                              f"the log is {size:,} bytes long, but {where}: records it applied are missing "
                              "from the log", kind="cut")
        if applied.start is None:
            return self._locate_by_scan(applied, where)
        got = self.frame_at(applied.start)
        if isinstance(got, Stop):
            raise LogMismatch(self.path, applied.start, applied.seq,
                              f"the frame of the last record the database applied (seq {applied.seq}, from byte "
                              f"offset {applied.start}) is damaged: {got.reason}", kind="cut")
        if got.end != applied.end or got.seq != applied.seq or (
                applied.digest is not None and frame_digest(got.body) != applied.digest):
            raise LogMismatch(self.path, applied.start, applied.seq,
                              f"the log holds another record where {where} (found seq {got.seq} ending at byte "
                              f"offset {got.end}): the log was cut and written again, or replaced")
        return got

    def _locate_by_scan(self, applied: Applied, where: str) -> Frame:
        for frame in self.frames(0):
            if frame.end == applied.end:
                if frame.seq != applied.seq:
                    break
                return frame
            if frame.end > applied.end:
                break
        raise LogMismatch(self.path, applied.end, applied.seq,
                          f"{where}, but no frame of seq {applied.seq} ends there in the log", kind="mismatch")

    def read(
        self, after: int = 0, *, start_offset: int = 0, limit: int | None = None, exact: bool = False
    ) -> Iterator[tuple[Record, int]]:
        """Yield (record, end offset of its frame) for every record with seq > after, in order.

        `start_offset` must be a frame boundary at or before the first wanted record (e.g. an end
        offset yielded earlier). With `exact`, it is the end of record `after` itself (a position
        a database stored), and the first frame there must be seq after+1. Stops silently at a
        torn tail; raises LogCorrupt for damage followed by valid frames, LogGap for a seq that is
        not previous+1, and (exact) LogMismatch when the file ends before `start_offset`."""
        for record, frame in self.read_frames(after, start_offset=start_offset, limit=limit, exact=exact):
            yield record, frame.end

    def read_frames(
        self, after: int = 0, *, start_offset: int = 0, limit: int | None = None, exact: bool = False
    ) -> Iterator[tuple[Record, Frame]]:
        """As `read`, yielding each record with its verified frame (offset, end and raw body)."""
        if limit is not None and limit <= 0:
            return
        fd = self._handle()
        offset = start_offset
        expected_first: int | None = 1 if offset == 0 else (after + 1 if exact else None)
        # Only a read whose start is known good (byte 0, or the verified cache) may teach the cache.
        verified_start = offset == 0
        with self._mutex:
            cached_end, cached_last = self._end, self._last
        if exact:
            if offset > os.fstat(fd).st_size:
                raise LogMismatch(
                    self.path, offset, after,
                    f"the log is {os.fstat(fd).st_size} bytes long, but the database applied it through "
                    f"seq {after}, which ended at byte offset {offset}: records it applied are missing",
                    kind="cut")
            verified_start = verified_start or (offset == cached_end and after == cached_last)
        elif after >= cached_last and cached_end > offset and os.fstat(fd).st_size >= cached_end:
            # Tailing callers ask for "after the last seq I saw": start at the cached boundary
            # instead of rescanning, if it is further along and the file still reaches it.
            offset, expected_first, verified_start = cached_end, cached_last + 1, True

        scanner = FrameScanner(fd, offset)
        prev: int | None = None
        last_end = offset
        count = 0
        from_body = Record.from_body
        try:
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
                yield record, frame
                count += 1
                if limit is not None and count >= limit:
                    return
            stop = scanner.stop
            assert stop is not None
            if stop.status is FrameStatus.CORRUPT:
                raise self._corrupt(stop, prev + 1 if prev is not None else expected_first)
        finally:
            # However the read ends (the log's end, a limit, damage, or a caller that stopped taking
            # records, as the applier does at a transaction's end), the frames it verified from a known
            # boundary teach the cache: the next append need not scan them again.
            if prev is not None and verified_start:
                self._remember(last_end, prev)

    def forget(self) -> None:
        """Drop what this instance knows of the file (a boundary and its seq): the next use scans from the
        start. For a caller that changed the file under the lock (a repair)."""
        with self._mutex:
            self._end, self._last = 0, 0

    def _remember(self, end: int, last: int) -> None:
        with self._mutex:
            if end > self._end:
                self._end, self._last = end, last

    def scan(self) -> ReadReport:
        """Verify the whole file: last good seq and offset, and whether a torn tail follows.
        Raises LogCorrupt / LogGap like read()."""
        end, last, stop = self._verified(self._handle(), 0, 0)
        with self._mutex:
            # Authoritative: replaces the cache even if the file shrank.
            self._end, self._last = end, last
        torn = stop.status is FrameStatus.TORN
        return ReadReport(last_seq=last, end_offset=end, torn_tail=torn, torn_bytes=stop.torn_bytes)

    def tail(self, after: int = 0, start_offset: int = 0) -> tuple[int, int]:
        """(last seq, end offset) of the verified frames from `start_offset` — a frame boundary, the end
        of seq `after` — to the first thing that is not a frame (no body is decoded, nothing is cut, no
        damage is raised: a status line's answer, not a check)."""
        last, end = after, start_offset
        for frame in FrameScanner(self._handle(), start_offset):
            if frame.seq != last + 1:
                break
            last, end = frame.seq, frame.end
        return last, end

    def last_seq(self) -> int:
        """The last good seq in the file now (including other processes' appends)."""
        with self._mutex:
            fd = self._handle()
            return self._catch_up(fd, repair=False)[1]
