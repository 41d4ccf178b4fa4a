"""Opening the node's SQLite file: WAL, foreign keys, a busy timeout, sqlite-vec loaded.

Every connection loads sqlite-vec's extension (about 0.1 ms). The extension is found where the sqlite-vec
package keeps it without importing that package: its `__init__` imports numpy.typing for a helper this
project never calls, which was a quarter of every CLI command's start-up.

A database this process cannot write (a read-only mount, an immutable file, another user's home)
is opened read-only rather than refused, so every command that only reads still works; such a
connection says so (`conn.readonly`) and a writer refuses before it appends anything.
"""
from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .driver import sqlite3
from .migrations import migrate

Connection = Any  # the driver's Connection type; the driver is chosen at import time

# The page cache of one connection, in KiB (SQLite's default is 2 MiB). Applying a log updates rows
# all over the tables and their indexes (page ids and op_ids are random); with 2 MiB most of those
# pages are read back from the OS at every statement, and half the applier's time went to pread.
# Memory is taken only as pages are read, so a small home never uses it all.
CACHE_KIB = 64 * 1024
# WAL pages written before a commit copies them into the database file (SQLite's default is 1,000,
# 4 MiB). A batch of 1,000 records dirties a few thousand pages, so the default checkpoints at every
# commit and writes each page twice per batch; at 16,384 (64 MiB) a page several batches touch is
# copied once. Durability is not traded: with synchronous=NORMAL a commit survives a process crash
# either way, and what a power loss can take back (the commits since the WAL was last synced) is
# re-applied from the log, which is synced before any record of it is applied.
WAL_AUTOCHECKPOINT_PAGES = 16_384
# After a checkpoint the WAL file is cut back to this size rather than kept at its largest.
WAL_SIZE_LIMIT = 64 * 1024 * 1024
# A bulk writer's page cache (the importer's): its batches touch every index of the page tables, and a
# cache that holds their working set writes each index page once a transaction rather than at each spill.
BULK_CACHE_KIB = 256 * 1024
log = logging.getLogger("crewlet.store")


class NodeConnection(sqlite3.Connection):
    """A connection that knows whether it was opened read-only (and why, when not by choice)."""

    readonly: bool = False
    readonly_reason: str = ""
    # opened read-only because the disk was full: the database's files as they were then (`files_stamp`), so a
    # long-lived process can tell when another writer changed them (core/node.py `follow_storage`)
    opened_on: tuple[Any, ...] | None = None


def files_stamp(path: Path) -> tuple[Any, ...]:
    """(inode, size, modification time) of the database file and of its WAL: what any writer's commit or
    checkpoint changes."""
    out: list[Any] = []
    for p in (path, path.with_name(path.name + "-wal")):
        try:
            st = os.stat(p)
        except OSError:
            out.append(None)
            continue
        out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


def writable(path: Path) -> bool:
    """Can this process write the database file and the journal files SQLite keeps beside it?
    (`os.access` honours read-only mounts and immutable files even for root.)"""
    if not path.exists():
        return os.access(path.parent if path.parent.exists() else path.parent.parent, os.W_OK)
    if not os.access(path, os.W_OK):
        return False
    if os.access(path.parent, os.W_OK):
        return True
    # a directory we cannot write: only journal files that already exist (and are writable) will do
    side = [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm")]
    return all(p.exists() and os.access(p, os.W_OK) for p in side)


@lru_cache(maxsize=1)
def vec_extension() -> str:
    """The path of sqlite-vec's loadable extension (what `sqlite_vec.loadable_path()` returns)."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or not spec.origin:
        raise RuntimeError("sqlite-vec is not installed: `pip install sqlite-vec` (a dependency of crewlet)")
    return os.path.normpath(os.path.join(os.path.dirname(spec.origin), "vec0"))


def _open(uri: str) -> Connection:
    # isolation_level=None: we issue BEGIN ourselves, so a batch is exactly one transaction.
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=30.0,
                           factory=NodeConnection)
    try:
        conn.row_factory = sqlite3.Row
        conn.enable_load_extension(True)
        conn.load_extension(vec_extension())
        conn.enable_load_extension(False)
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    except BaseException:
        conn.close()
        raise
    return conn


def _open_full(path: Path) -> Connection:
    """Read a database on a full disk without writing a byte: even a read-only connection makes the WAL's
    index file (-shm) beside the database. With no WAL content to read (the last writer checkpointed it, as a
    clean close does) the file alone is the database, opened as immutable; otherwise as any read-only open.

    An immutable connection is a snapshot: it never sees another writer. It is honest for a one-shot read,
    and a long-lived process keeps it only while the files stay as they were (`opened_on`): the node opens
    the database again once they change, or once there is room to open it for writing."""
    stamp = files_stamp(path)
    wal = path.with_name(path.name + "-wal")
    try:
        pending = wal.stat().st_size > 0
    except OSError:
        pending = False
    if not pending:
        conn = _open(f"file:{quote(str(path))}?mode=ro&immutable=1")
        conn.readonly = True
    else:
        conn = _open_readonly(path)
    conn.opened_on = stamp
    return conn


def _open_readonly(path: Path) -> Connection:
    base = f"file:{quote(str(path))}?mode=ro"
    try:
        conn = _open(base)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError:
        # A WAL database on a read-only filesystem with no -shm file beside it opens only as
        # immutable (nobody can write it through this mount while we read).
        conn = _open(base + "&immutable=1")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    conn.readonly = True
    return conn


def connect(path: Path | str, *, migrate_schema: bool = True, readonly: bool = False) -> Connection:
    path = Path(path)
    if readonly or (path.exists() and not writable(path)):
        if path.exists() and room_left(path.parent) < FULL_BELOW:
            return _open_full(path)
        return _open_readonly(path)
    if path.exists() and room_left(path.parent) < FULL_BELOW:
        # a full disk: a writable open would try to make the WAL's files (and leave torn ones); a read needs
        # nothing written, so open it read-only at once, saying why writes will refuse
        ro = _open_full(path)
        ro.readonly_reason = f"the disk holding {path} is full"
        return ro
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = None
    try:
        conn = _open(f"file:{quote(str(path))}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
        conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
        if migrate_schema:
            migrate(conn)
    except sqlite3.OperationalError as exc:
        # a full disk: SQLite cannot make the WAL's files beside the database (an I/O error), so a writable
        # open fails where a read needs nothing written — open it read-only, saying why writes will refuse
        if conn is not None:
            conn.close()
        if not path.exists() or room_left(path.parent) >= FULL_BELOW:
            raise
        ro = _open_full(path)
        ro.readonly_reason = f"the disk holding {path} is full ({exc})"
        return ro
    return conn


# a disk with less room than this is full for SQLite's purposes (a WAL and its index need a few pages)
FULL_BELOW = 64 * 1024


def room_left(directory: Path) -> int:
    """Bytes this process may still write on the filesystem holding `directory` (a large number if unknown)."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return 1 << 62
    return st.f_bavail * st.f_frsize


class transaction:
    """BEGIN IMMEDIATE … COMMIT/ROLLBACK: takes the write lock up front so two appliers serialise
    at the start rather than failing at their first write."""

    def __init__(self, conn: Connection, mode: str = "IMMEDIATE") -> None:
        self.conn, self.mode = conn, mode

    def __enter__(self) -> Connection:
        self.conn.execute(f"BEGIN {self.mode}")
        return self.conn

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            try:
                self.conn.execute("COMMIT")
            except sqlite3.Error:
                # a COMMIT refused (a full disk) leaves the transaction open: end it, report the refusal
                if self.conn.in_transaction:
                    try:
                        self.conn.execute("ROLLBACK")
                    except sqlite3.OperationalError:
                        pass
                raise
        elif self.conn.in_transaction:
            # SQLite may already have rolled back on its own (a full disk, an I/O error); the error
            # that got us here is the one to report, never "no transaction is active".
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.OperationalError:
                pass


@contextlib.contextmanager
def bulk_writes(conn: Connection, lock: object | None = None) -> Iterator[bool]:
    """A bulk writer's batches (the importer's) written once, not twice: in WAL mode every page a commit
    writes goes to the WAL and again into the database at the checkpoint, which for a bulk of new rows is
    the whole database written twice (a million pages: 10 GB more). While no other connection has the
    database open, this switches it to a rollback journal (TRUNCATE, synchronous=FULL): pages appended past
    the file's end are not journaled, so new rows are written once, and only the index pages a transaction
    changes are journaled first. Yields whether it switched; on the way out it is WAL again.

    Safe with others: another connection's open makes the switch fail at once (then nothing changes), and
    one opened during the bulk (`connect` asks for WAL) waits for the writer's current transaction, switches
    the file back to WAL, and the writer's next transactions are WAL ones. A crash leaves a hot journal that
    the next open rolls back, then sets WAL."""
    guard = lock if lock is not None else contextlib.nullcontext()
    switched = False
    with guard:  # type: ignore[attr-defined]
        if not getattr(conn, "readonly", False) and not conn.in_transaction:
            conn.execute("PRAGMA busy_timeout = 0")            # another connection open: refused at once
            try:
                switched = conn.execute("PRAGMA journal_mode = TRUNCATE").fetchone()[0].lower() != "wal"
            except sqlite3.OperationalError:
                switched = False
            finally:
                conn.execute("PRAGMA busy_timeout = 30000")
            if switched:
                conn.execute("PRAGMA synchronous = FULL")
        conn.execute(f"PRAGMA cache_size = -{BULK_CACHE_KIB}")
    try:
        yield switched
    finally:
        with guard:  # type: ignore[attr-defined]
            conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            if switched and not conn.in_transaction:
                try:
                    conn.execute("PRAGMA journal_mode = WAL")
                    conn.execute("PRAGMA synchronous = NORMAL")
                except sqlite3.OperationalError as exc:   # the next open sets it (connect asks for WAL)
                    log.info("the database stays in rollback-journal mode until its next open: %s", exc)
