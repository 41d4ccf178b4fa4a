"""Opening the node's SQLite file: WAL, foreign keys, a busy timeout, sqlite-vec loaded."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlite_vec

from .driver import sqlite3
from .migrations import migrate

Connection = Any  # the driver's Connection type; the driver is chosen at import time


def connect(path: Path | str, *, migrate_schema: bool = True, readonly: bool = False) -> Connection:
    path = Path(path)
    if not readonly:
        path.parent.mkdir(parents=True, exist_ok=True)
    uri = f"file:{path}?mode=ro" if readonly else f"file:{path}"
    # isolation_level=None: we issue BEGIN ourselves, so a batch is exactly one transaction.
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=30.0)
    conn.row_factory = sqlite3.Row
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)
    conn.execute("PRAGMA busy_timeout = 30000")
    conn.execute("PRAGMA foreign_keys = ON")
    if not readonly:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        if migrate_schema:
            migrate(conn)
    return conn


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
            self.conn.execute("COMMIT")
        else:
            self.conn.execute("ROLLBACK")
