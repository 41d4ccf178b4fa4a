"""Where a native import keeps its plan: a SQLite file of its own beside the home, not the heap.

An import lists every problem before it writes anything, so it must see the whole tree first; held in
memory, a million files' titles, paths and bodies took 14.7 GB. The plan keeps, per file, only what the
checks need — its path, kind, container, title (and the address it claims), labels, `parent:`, and a
digest of the body it will publish — in this file, and the bodies stay on disk: the writer reads each file
again and publishes it only if its digest is the one planned. Memory is then what SQLite's page cache is
given (PLAN_CACHE_KIB) plus a batch of records (write.py), whatever the tree's size.

The file lives in the home's `tmp/` (the disk the home is on), is deleted when the import's report is
closed or collected, and one left behind by a killed import is removed by the next (its process is gone).
"""
from __future__ import annotations

import json
import os
import re
import tempfile
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

from ..leftovers import sweep
from ..store.driver import sqlite3

# SQLite's page cache for the plan: the tree's rows are read and updated in order, so a small cache holds
# the pages a pass is on (more only trades memory for fewer reads of pages the OS cache holds anyway)
PLAN_CACHE_KIB = 32 * 1024
# entries of a report's notes, problems or failures held in memory before the rest go to the plan's file
SPILL_KEEP = 1000
# rows a pass reads at once, and writes it holds back to run together
FETCH_ROWS = 2000
LATER_ROWS = 1000
# mkstemp's names: the prefix, then eight of [a-z0-9_] (not hex: a pattern of hex never matched one)
_NAME = re.compile(r"import-plan-(?P<pid>\d+)-[A-Za-z0-9_]+\.db")

SCHEMA = """
CREATE TABLE node (
    n INTEGER PRIMARY KEY,         -- the order the walk met it (folders when their first file was met)
    kind TEXT NOT NULL,            -- doc | skill | folder
    key BLOB NOT NULL,             -- its path's parts joined by NUL (surrogatepass UTF-8): sorts as the parts do
    depth INTEGER NOT NULL,
    folder INTEGER,                -- its directory's folder node (the tree layout)
    container TEXT NOT NULL,
    title TEXT NOT NULL,           -- as planned (a disambiguated title in the tree layout)
    natural TEXT,                  -- the title before disambiguation, when it differs
    address TEXT,                  -- the title's address, once the titles are final
    labels TEXT,                   -- JSON, when the file has any
    parent_title TEXT,             -- frontmatter parent:
    digest BLOB,                   -- of the body it publishes (a folder publishes '')
    cut TEXT,                      -- JSON [where the body starts in the file's text, the H1 line's span in it]
    pos INTEGER,                   -- the planning order (the tree: shallower first, then by path)
    here TEXT,                     -- the existing page under its folder it claimed (the tree layout)
    parent_n INTEGER,              -- a parent this run publishes
    parent_id TEXT,                -- a parent that exists
    row_id TEXT,                   -- the page at its address, when one exists
    is_parent INTEGER,             -- another row names it in `parent:`
    state INTEGER NOT NULL DEFAULT 0   -- a pass's mark (1: a title still to claim; 2: seen by the cycle walk;
                                   -- 3: given early, before its place in order)
);
CREATE TABLE folder (key BLOB PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;   -- a directory's folder row
CREATE TABLE note (                -- a node's notes, told when its page is created or updated
    n INTEGER NOT NULL,
    code TEXT NOT NULL,
    message TEXT NOT NULL,
    files TEXT NOT NULL
);
CREATE INDEX note_n ON note(n);
CREATE TABLE claimed (address TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE plan (                -- the plan, in write order (parents first): one PlannedPage a row
    ord INTEGER PRIMARY KEY,
    n INTEGER NOT NULL,
    kind TEXT NOT NULL,
    source TEXT,
    container TEXT NOT NULL,
    title TEXT NOT NULL,
    labels TEXT,
    page_id TEXT,
    action TEXT NOT NULL,
    changes TEXT,
    parent_id TEXT,
    parent_title TEXT,
    base_revision INTEGER,
    new_labels TEXT,
    digest BLOB,
    cut TEXT
);
CREATE TABLE spill (               -- notes, problems and failures past the first SPILL_KEEP of each
    list TEXT NOT NULL,
    entry TEXT NOT NULL
);
"""


def key_of(rel: str) -> bytes:
    return rel.replace("/", "\0").encode("utf-8", "surrogatepass")


def rel_of(key: bytes) -> str:
    return key.decode("utf-8", "surrogatepass").replace("\0", "/")


def text(value: str) -> str:
    """A string SQLite can hold as text: a name undecodable in UTF-8 (a surrogate escape) is kept reversible."""
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "backslashreplace")


def _directory(home_root: Path | None) -> Path:
    """The home's tmp/ when it can be written (the disk the home is on), else the system's."""
    if home_root is not None:
        tmp = home_root / "tmp"
        try:
            tmp.mkdir(parents=True, exist_ok=True)
            if os.access(tmp, os.W_OK):
                return tmp
        except OSError:
            pass
    return Path(tempfile.gettempdir())


def _sweep(directory: Path) -> None:
    """Plans a killed import left behind (their process is gone), with their SQLite companions."""
    sweep(directory, _NAME, companions=("-journal", "-wal", "-shm"))


class PlanStore:
    """The plan's file and its one connection (this thread's: the import runs in one)."""

    def __init__(self, home_root: Path | None) -> None:
        directory = _directory(home_root)
        _sweep(directory)
        fd, name = tempfile.mkstemp(prefix=f"import-plan-{os.getpid()}-", suffix=".db", dir=directory)
        os.close(fd)
        self.path = Path(name)
        self.conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        # nothing here outlives the import: no journal, no syncs (a crash leaves a file the next import removes)
        for pragma in ("journal_mode = OFF", "synchronous = OFF", "locking_mode = EXCLUSIVE",
                       f"cache_size = -{PLAN_CACHE_KIB}", "temp_store = FILE"):
            self.conn.execute(f"PRAGMA {pragma}")
        self.conn.executescript(SCHEMA)
        self.conn.execute("BEGIN")
        self._later: dict[str, list[tuple[Any, ...]]] = {}
        self._closer = weakref.finalize(self, PlanStore._remove, self.conn, self.path)

    @staticmethod
    def _remove(conn: Any, path: Path) -> None:
        try:
            conn.close()
        finally:
            for suffix in ("", "-journal"):
                try:
                    os.remove(str(path) + suffix)
                except OSError:
                    pass

    def close(self) -> None:
        self._closer()

    @property
    def closed(self) -> bool:
        return not self._closer.alive

    def execute(self, sql: str, args: Iterable[Any] = ()) -> Any:
        return self.conn.execute(sql, tuple(args))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any:
        return self.conn.executemany(sql, rows)

    def later(self, sql: str, row: tuple[Any, ...]) -> None:
        """A write no read of this pass depends on, run with others like it (one executemany a thousand)."""
        rows = self._later.setdefault(sql, [])
        rows.append(row)
        if len(rows) >= LATER_ROWS:
            self.conn.executemany(sql, rows)
            rows.clear()

    def flush(self) -> None:
        for sql, rows in self._later.items():
            if rows:
                self.conn.executemany(sql, rows)
                rows.clear()

    def one(self, sql: str, args: Iterable[Any] = ()) -> Any:
        return self.conn.execute(sql, tuple(args)).fetchone()

    def rows(self, sql: str, args: Iterable[Any] = (), *, size: int | None = None) -> Iterator[Any]:
        """A query's rows in batches, on a cursor of its own (another statement may run between them)."""
        cur = self.conn.cursor()
        cur.execute(sql, tuple(args))
        while True:
            batch = cur.fetchmany(size or FETCH_ROWS)
            if not batch:
                return
            yield from batch


T = TypeVar("T")


class Spill(Generic[T]):
    """A list that keeps its first SPILL_KEEP entries in memory and the rest in a plan's file: a report's
    notes, problems and failures, which a tree of a million broken files would make a million of. It reads
    as the list it stands for (iterate, len, index, compare)."""

    def __init__(self, name: str, load: Callable[[dict[str, Any]], T], dump: Callable[[T], dict[str, Any]],
                 keep: int | None = None) -> None:
        self.name, self._load, self._dump, self.keep = name, load, dump, keep or SPILL_KEEP
        self.head: list[T] = []
        self.store: PlanStore | None = None
        self.spilled = 0

    def append(self, item: T) -> None:
        if len(self.head) < self.keep or self.store is None or self.store.closed:
            self.head.append(item)
            return
        self.store.execute("INSERT INTO spill (list, entry) VALUES (?, ?)",
                           (self.name, json.dumps(self._dump(item), ensure_ascii=False)))
        self.spilled += 1

    def extend(self, items: Iterable[T]) -> None:
        for item in items:
            self.append(item)

    def __iter__(self) -> Iterator[T]:
        yield from list(self.head)
        if self.spilled and self.store is not None and not self.store.closed:
            for (entry,) in self.store.rows("SELECT entry FROM spill WHERE list = ? ORDER BY rowid", (self.name,)):
                yield self._load(json.loads(entry))

    def __len__(self) -> int:
        return len(self.head) + self.spilled

    def __bool__(self) -> bool:
        return bool(self.head) or self.spilled > 0

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, int) and 0 <= index < len(self.head):
            return self.head[index]
        return list(self)[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, Spill)):
            return list(self) == list(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"Spill({self.name}, {len(self)} entries)"
