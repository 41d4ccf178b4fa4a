"""Query vectors kept on disk, so a query asked again in a new process needs no model.

A `crewlet search` is a process of its own: the in-memory cache of `query_vectors.py` dies with it, and
every repeat of a question paid for the model again (the local one: onnxruntime, the tokenizer and a
session, most of what a hybrid process costs over a keyword one). This keeps the last 1,024 query
vectors of the node in a small SQLite file of the home (`Home.query_cache_file`), keyed by the embedding
space (`EmbeddingSpace.key()`: provider, model, width, and the local tokenizer's digest) and the query
with its spacing collapsed — exactly the key the in-memory cache uses. A vector of another space is
never served: the space is half the key, and a write under a new space empties the rest ("emptied when
the model changes", spec 000).

It is a cache: nothing in it is the record of anything. It is written with synchronous=OFF, a failure
to open, read or write it is logged at debug level and the search embeds as if it were empty, and a
read-only home reads it without writing. The oldest entries (by when they were written) go first.
"""
from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("crewlet.search")

SIZE = 1024
BUSY_MS = 200                 # a cache never makes a search wait long for another process's write

_SCHEMA = ("CREATE TABLE IF NOT EXISTS query_vectors (space TEXT NOT NULL, query TEXT NOT NULL, dims INTEGER "
           "NOT NULL, vector BLOB NOT NULL, written_at INTEGER NOT NULL, PRIMARY KEY (space, query))")


class QueryVectorStore:
    """Thread-safe: one connection, used under a lock (the query embedder writes from its own thread)."""

    def __init__(self, path: Path, *, size: int = SIZE, readonly: bool = False) -> None:
        self.path = path
        self.size = size
        self.readonly = readonly
        self._lock = threading.Lock()
        self._conn: Any = None
        self._broken = False

    def _connect(self) -> Any:
        if self._conn is None and not self._broken:
            from ..store.driver import sqlite3

            try:
                if self.readonly:
                    if not self.path.exists():
                        return None
                    conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False,
                                           timeout=BUSY_MS / 1000)
                else:
                    conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=BUSY_MS / 1000,
                                           isolation_level=None)
                    conn.execute("PRAGMA journal_mode = WAL")
                    conn.execute("PRAGMA synchronous = OFF")
                    conn.execute(_SCHEMA)
                self._conn = conn
            except Exception as exc:
                log.debug("the query-vector cache %s could not be opened: %s", self.path, exc)
                self._broken = True
        return self._conn

    def get(self, space: str, query: str, dims: int) -> np.ndarray | None:
        with self._lock:
            conn = self._connect()
            if conn is None:
                return None
            try:
                row = conn.execute("SELECT dims, vector FROM query_vectors WHERE space = ? AND query = ?",
                                   (space, query)).fetchone()
            except Exception as exc:
                log.debug("the query-vector cache could not be read: %s", exc)
                return None
        if row is None or row[0] != dims or len(row[1]) != 4 * dims:
            return None
        import numpy as np

        return np.frombuffer(row[1], dtype="<f4").astype(np.float32)

    def put(self, space: str, query: str, vector: np.ndarray) -> None:
        if self.readonly:
            return
        import numpy as np

        blob = np.asarray(vector, dtype="<f4").tobytes()
        with self._lock:
            conn = self._connect()
            if conn is None:
                return
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.execute("DELETE FROM query_vectors WHERE space != ?", (space,))
                    conn.execute("INSERT OR REPLACE INTO query_vectors (space, query, dims, vector, written_at) "
                                 "VALUES (?, ?, ?, ?, ?)", (space, query, len(vector), blob, time.time_ns()))
                    conn.execute("DELETE FROM query_vectors WHERE rowid IN (SELECT rowid FROM query_vectors "
                                 "ORDER BY written_at DESC LIMIT -1 OFFSET ?)", (self.size,))
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
            except Exception as exc:
                log.debug("the query-vector cache could not be written: %s", exc)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.close()
                except Exception:
                    pass
                self._conn = None
