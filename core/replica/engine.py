"""The apply engine: any ordered log, applied in order into the node's SQLite, from where the database
last stood on it.

A log is a `Stream`: a backend that keeps and orders its records (`backend.py`: the file log today), and
the applier its records registered (`appliers.py`: the pages log's handlers decide, the vector log's file
rows). The engine owns what is the same for every log: the position it keeps in `log_position` (the seq,
the frame's end and start, and the digest of the last record applied, in the same transaction as what
that record changed), transactions sized for a large log, chunks that bound memory, a writer's own
records applied from memory, the check that every record's seq is its predecessor's + 1, and damage
stopping it after every good record before.
"""
from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from ..log import LogCorrupt, LogDamage, LogGap, Record
from ..log.framing import Applied, Frame, frame_digest
from ..store import Connection, transaction
from .appliers import Decision, Malformed
from .backend import Guard, LogBackend

# How much one catch_up transaction holds. Each commit writes every page the transaction dirtied,
# and a log's records land all over the tables and indexes (page ids and op_ids are random), so a
# small transaction writes the same index pages again and again: at 2,000 records a transaction a
# 100,000-record log wrote 2 GB for a 106 MB database, at 20,000 about 500 MB. A transaction also
# ends after TXN_SECONDS, so another writer waiting for the lock waits about that long at most.
TXN_RECORDS = 20_000
TXN_SECONDS = 1.0
# Records are decoded and applied a chunk at a time inside a transaction: memory stays bounded
# whatever the transaction holds (a chunk ends at CHUNK_RECORDS or once CHUNK_BYTES of bodies).
CHUNK_RECORDS = 2_000
CHUNK_BYTES = 16 * 1024 * 1024

Pairs = Iterator[tuple[Record, Frame]]


class Applier(Protocol):
    """What a log registers with the engine (`appliers.DecidingApplier`, `appliers.FilingApplier`)."""

    position: str        # the log's row in log_position
    batch: int           # records one transaction holds at most

    def apply(self, conn: Connection, records: Sequence[Record], *, careful: bool = False) -> list[Decision]:
        ...


# -- positions -------------------------------------------------------------------------------------------

def position(conn: Connection, name: str) -> tuple[int, int]:
    """(seq, end) of the last record this database applied from the log whose position row is `name`."""
    row = conn.execute("SELECT seq, byte_offset FROM log_position WHERE name = ?", (name,)).fetchone()
    return (row["seq"], row["byte_offset"]) if row else (0, 0)


def applied_position(conn: Connection, name: str) -> Applied:
    """Where this database is on a log, with the start and digest of the last frame it applied
    (None for a position stored before they were kept)."""
    row = conn.execute("SELECT * FROM log_position WHERE name = ?", (name,)).fetchone()
    if row is None:
        return Applied()
    keys = row.keys()
    start = row["frame_offset"] if "frame_offset" in keys else None
    digest = row["digest"] if "digest" in keys else None
    return Applied(row["seq"], row["byte_offset"], start, digest)


def store_position(conn: Connection, seq: int, frame: Frame, name: str) -> None:
    """Inside the transaction that applied the record of `frame`: the position, and what the
    frame was, so an open can tell the log still holds that very record there."""
    conn.execute(
        "INSERT INTO log_position (name, seq, byte_offset, frame_offset, digest) VALUES (?,?,?,?,?) "
        "ON CONFLICT(name) DO UPDATE SET seq=excluded.seq, byte_offset=excluded.byte_offset, "
        "frame_offset=excluded.frame_offset, digest=excluded.digest",
        (name, seq, frame.end, frame.offset, frame_digest(frame.body)),
    )


# -- applying ----------------------------------------------------------------------------------------------

@contextmanager
def gc_paused() -> Iterator[None]:
    """Automatic garbage collection off while records are applied: a record allocates a dozen
    containers (its payload, its outcome, their rows) that reference counting frees, and the collector
    they set off found nothing to collect yet took 4% of a batch (more in the app, whose heap it walks).
    Turned back on only by the caller that turned it off (nested or concurrent users leave it be)."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _as_decoded(rec: Record) -> bool:
    """Is `rec` exactly what decoding its own body gives back, so applying it is applying the body?
    True for the records writers build — every field of its exact JSON type, a flat payload of text,
    numbers, booleans, nulls and lists of text — where the JSON round trip is the identity (key order
    aside, which no handler reads in a flat payload). Anything else (a tuple, a str or int subclass,
    nested objects) is decoded from its body, as a reader of the file would."""
    if (type(rec.type) is not str or type(rec.op_id) is not str or type(rec.actor) is not str
            or type(rec.at) is not int or type(rec.version) is not int or type(rec.node) is not str
            or type(rec.payload) is not dict):
        return False
    for key, value in rec.payload.items():
        kind = type(value)
        if type(key) is not str:
            return False
        if kind is str or kind is int or value is None or kind is bool or kind is float:
            continue
        if kind is list and all(type(item) is str for item in value):
            continue
        return False
    return True


def _past(log: LogBackend, seq: int, offset: int, known: Sequence[tuple[Record, Frame]] | None) -> Pairs:
    """Every (record, frame) past the position (seq, offset), each seq its predecessor's + 1. `known` are
    the records this process just appended with their frames, still in memory: while they continue the
    log exactly from the position they are applied from memory — the record itself when it is what its
    body decodes to (`_as_decoded`), else decoded from the frame's bytes, the very bytes a reader of the
    log gets — instead of read back; whatever lies past them, or any position they do not continue, is
    read from the backend with every check a read makes."""
    expected = seq + 1
    if known:
        i = seq + 1 - known[0][1].seq
        if 0 <= i < len(known) and known[i][1].offset == offset:
            from_body = Record.from_body
            for rec, frame in known[i:]:
                if not _as_decoded(rec):
                    try:
                        rec = from_body(frame.body, frame.seq)
                    except ValueError as exc:
                        raise LogCorrupt(log.path, frame.offset, frame.seq, f"undecodable record body: {exc}") from exc
                yield rec, frame
            seq, offset = known[-1][1].seq, known[-1][1].end
            expected = seq + 1
    for rec, frame in log.read_frames(after=seq, start_offset=offset, exact=True):
        # the engine's own check, whatever the backend: a record skipped (a retention that removed it) or
        # repeated is damage, never applied past
        if frame.seq != expected:
            raise LogGap(log.path, frame.offset, expected, frame.seq)
        expected += 1
        yield rec, frame


def _chunk(pairs: Pairs, limit: int) -> tuple[list[Record], Frame | None, bool, LogDamage | None]:
    """Up to `limit` records (fewer once CHUNK_BYTES of bodies are read), the frame of the last, whether
    the log ended, and the damage reading stopped at (the records before it are good and are applied)."""
    records: list[Record] = []
    last: Frame | None = None
    size = 0
    try:
        for rec, frame in pairs:
            records.append(rec)
            last = frame
            size += len(frame.body)
            if len(records) >= limit or size >= CHUNK_BYTES:
                return records, last, False, None
    except LogDamage as exc:
        return records, last, True, exc
    return records, last, True, None


class _GiveUp(Exception):
    """The fast path met a malformed record: roll the transaction back and apply its chunk carefully."""


def catch_up(conn: Connection, log: LogBackend, applier: Applier, *, batch: int | None = None,
             progress: Callable[[int], None] | None = None, outcomes: dict[str, Decision] | None = None,
             appended: Sequence[tuple[Record, Frame]] | None = None) -> int:
    """Apply every record past this database's position on `log`, at most `batch` records (the applier's
    own by default) a transaction, and TXN_SECONDS, storing the new position in the same transaction.
    Returns how many records were applied. `outcomes`, when given, collects what was decided for each
    op_id applied here (a writer reads its answer without a query). `appended`, the records a writer
    just appended with their frames (`append_frames`), are applied from memory when they continue from
    the position (see `_past`).

    Damage in the log (a bad frame, a seq that skips, repeats or goes backwards) stops the engine there:
    every good record before it is applied and committed, then the damage is raised.

    A malformed record makes the fast path give up: the transaction is rolled back and run again with
    the chunk that held it applied record by record (`careful`)."""
    with gc_paused():
        return _catch_up(conn, log, applier, applier.batch if batch is None else batch, progress, outcomes, appended)


def _catch_up(conn: Connection, log: LogBackend, applier: Applier, batch: int,
              progress: Callable[[int], None] | None, outcomes: dict[str, Decision] | None,
              appended: Sequence[tuple[Record, Frame]] | None) -> int:
    name = applier.position
    applied = 0
    careful: list[tuple[int, int]] = []  # seq ranges (first, last) of chunks that held a malformed record
    chunk_limit = max(1, min(batch, CHUNK_RECORDS))
    while True:
        damage: LogDamage | None = None
        decided_here: list[Decision] = []
        ended = False
        n = 0
        try:
            with transaction(conn):
                seq, offset = position(conn, name)
                pairs = _past(log, seq, offset, appended)
                started = time.monotonic()
                last: Frame | None = None
                while True:
                    records, end, ended, damage = _chunk(pairs, min(chunk_limit, batch - n))
                    if not records:
                        break
                    first, final = records[0].seq, records[-1].seq
                    slow = any(a <= final and first <= b for a, b in careful)
                    try:
                        decided_here += applier.apply(conn, records, careful=slow)
                    except Malformed:
                        careful.append((first, final))
                        raise _GiveUp() from None
                    n += len(records)
                    last = end
                    if ended or n >= batch or time.monotonic() - started >= TXN_SECONDS:
                        break
                if last is not None:
                    store_position(conn, last.seq, last, name)
        except _GiveUp:
            continue  # rolled back: the same records again, that chunk record by record
        # only once committed is an outcome decided (a COMMIT a full disk refuses decides nothing)
        if outcomes is not None:
            outcomes.update((o.op_id, o) for o in decided_here)
        applied += n
        if progress and n:
            progress(n)
        if damage is not None:
            raise damage
        if ended or n == 0:
            return applied


# -- a log as a node holds it ------------------------------------------------------------------------------

@dataclass
class Stream:
    """One ordered log of a home, applied into its database: the backend that keeps it and the applier its
    records registered."""

    name: str               # how a person calls it: "pages", "vectors"
    backend: LogBackend
    applier: Applier

    @property
    def position_name(self) -> str:
        return self.applier.position

    def position(self, conn: Connection) -> tuple[int, int]:
        return position(conn, self.applier.position)

    def applied(self, conn: Connection) -> Applied:
        return applied_position(conn, self.applier.position)

    def verify(self, conn: Connection, *, stamp: bool) -> None:
        """The database's position against the log (`LogBackend.locate`: raises LogDamage when the log no
        longer holds the record the database applied last). A position stored before digests were kept
        is given its digest once (`stamp`: the database can be written)."""
        applied = self.applied(conn)
        frame = self.backend.locate(applied)
        if frame is not None and applied.start is None and stamp:
            store_position(conn, applied.seq, frame, self.applier.position)  # autocommit: one statement

    def append(self, conn: Connection, records: Sequence[Record], *, sync: bool = True,
               guard: Guard | None = None) -> list[tuple[Record, Frame]]:
        """Append to the log (refused before a byte is written when the log disagrees with this database's
        position on it); the records are not applied yet."""
        return self.backend.append_frames(records, sync=sync, keep_through=self.position(conn)[1], guard=guard)

    def catch_up(self, conn: Connection, *, progress: Callable[[int], None] | None = None,
                 outcomes: dict[str, Decision] | None = None,
                 appended: Sequence[tuple[Record, Frame]] | None = None) -> int:
        return catch_up(conn, self.backend, self.applier, progress=progress, outcomes=outcomes, appended=appended)

