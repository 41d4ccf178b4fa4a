"""A home's database replaced by another file — wholly, or not yet — even when the process is killed halfway.

Adopting a snapshot (and a repair that rebuilds the database from the log) swaps the home's database for
another file and keeps the old one aside. The swap is
several renames (the database, its -wal and -shm aside; the new file in), and the node's own rows (an agent's
diary above all, which no log holds) must follow into the new file. Killed between two renames, the home was
left with no database: the next command made an empty one, replayed the log into it and said nothing, and every
diary stayed behind in the file kept aside.

So the swap is written down first — `crewlet.db.replacing`, durably: the new file, the name the old one is kept
under, the node-local tables to carry — and only then done. Whoever opens the home finishes a swap it finds
written down before it touches the database (`finish`, which `Node.open` calls): each step is a rename that is
either still to do or found done, and the carrying inserts only rows the new file lacks, so a kill anywhere in
the swap — or in `finish` itself — leaves the next open to finish it. The lock is a `flock` of the home's
directory, held from before the note is written until it is removed; re-entrant within a process, so a `sync join`
(core/log/joining.py, which writes its own note the same way: `write_note`, `read_note`) holds it throughout and
swaps the database inside it.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..durable import fsync_dir, fsync_file, write_atomic
from .db import Connection, connect

log = logging.getLogger("crewlet.store")

SIDE_FILES = ("-wal", "-shm")


def note_path(db: Path) -> Path:
    """Where a swap of `db` is written down while it is under way."""
    return db.with_name(db.name + ".replacing")


# the home directories this process holds the lock of, with how deep: a flock taken twice by one process on two
# descriptors waits for itself, and a join (which holds the lock throughout) swaps the database inside it
_HELD: dict[Path, int] = {}
_HELD_LOCK = threading.RLock()


@contextmanager
def held(db: Path) -> Iterator[None]:
    """Hold the swaps of `db` off (another swap, another process finishing this one, a join of its home).
    Re-entrant within a process: a holder may call what takes it again."""
    where = db.parent.resolve()
    with _HELD_LOCK:
        if _HELD.get(where):
            _HELD[where] += 1
            try:
                yield
            finally:
                _HELD[where] -= 1
            return
        fd = os.open(where, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            _HELD[where] = 1
            try:
                yield
            finally:
                _HELD.pop(where, None)
        finally:
            os.close(fd)   # closing the last descriptor releases the lock


def write_note(note: Path, plan: dict[str, Any]) -> None:
    """Write down, durably and whole, what is about to be done (before any of it is done)."""
    write_atomic(note, json.dumps(plan).encode())


def read_note(note: Path, what: str, fix: str) -> dict[str, Any] | None:
    """The plan a note holds; None when there is none (finished meanwhile by whoever held the lock before us)."""
    try:
        plan = json.loads(note.read_text(encoding="utf-8"))
        if not isinstance(plan, dict):
            raise ValueError("not a JSON object")
        return plan
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        # a note that cannot be read was never whole: write_atomic renames it into place only once written,
        # so this is not a note of ours — name it rather than guess what it meant
        raise OSError(f"{note} cannot be read ({exc}) — {what} was under way; {fix}") from None


def replace(db: Path, incoming: Path, aside: Path, carry: Sequence[str]) -> Path | None:
    """Put `incoming` (a whole database in one file, synced, beside `db`) in the place of `db`, keeping the old
    one as `aside`, and copy into the new file the rows of `carry` (this node's own tables) it lacks. The
    caller holds `held(db)`. Returns where the old database was kept (None when there was none)."""
    had = db.exists()
    write_note(note_path(db), {"incoming": incoming.name, "aside": aside.name, "carry": list(carry)})
    finish_held(db)
    return aside if had else None


def finish(db: Path) -> Path | None:
    """Finish a swap of `db` a killed process left written down; None when there was none (one stat).
    Returns where the database it replaced was kept."""
    if not note_path(db).exists():
        return None
    with held(db):
        return finish_held(db)


def finish_held(db: Path) -> Path | None:
    """`finish` for a caller that holds `held(db)` already (a flock is not taken twice by one process)."""
    note = note_path(db)
    fix = f"move it aside once {db} is the database you want"
    plan = read_note(note, "a database swap", fix)
    if plan is None:
        return None   # finished meanwhile by the process that held the lock before us
    try:
        incoming, aside = db.with_name(plan["incoming"]), db.with_name(plan["aside"])
        carry = [str(t) for t in plan["carry"]]
    except (KeyError, TypeError) as exc:
        raise OSError(f"{note} cannot be read (no {exc}) — a database swap was under way; {fix}") from None
    sources = [aside]
    if incoming.exists():
        if db.exists() and aside.exists():
            # a database made after the old one went aside (an open that did not finish the swap): kept too,
            # and its own rows carried like the old one's
            sources.append(_move_with_sides(db, _free_name(aside)))
        # the old database and its -wal and -shm, each still there (a kill between the renames leaves an -wal
        # behind: it belongs to the old file, never to the new one)
        _move_with_sides(db, aside)
        os.replace(incoming, db)
        fsync_dir(db.parent)
    elif not db.exists():
        # the new file is gone and none took its place (removed by hand): put the old one back
        if aside.exists():
            _move_with_sides(aside, db)
            log.warning("a database swap found its new file gone: %s put back as the database", aside)
        note.unlink(missing_ok=True)
        fsync_dir(db.parent)
        return None
    for source in sources:
        carry_rows(source, db, carry)
    note.unlink(missing_ok=True)
    fsync_dir(db.parent)
    return aside if aside.exists() else None


def _move_with_sides(src: Path, dest: Path) -> Path:
    """Rename `src` and its -wal and -shm (each that is there) to `dest`; each rename is atomic, and one found
    done is skipped, so a kill between them is finished by doing this again."""
    for suffix in ("", *SIDE_FILES):
        side = src.with_name(src.name + suffix)
        if side.exists():
            os.replace(side, dest.with_name(dest.name + suffix))
    return dest


def _free_name(path: Path) -> Path:
    n = 2
    while path.with_name(f"{path.name}.{n}").exists():
        n += 1
    return path.with_name(f"{path.name}.{n}")


def carry_rows(old_db: Path, new_db: Path, tables: Sequence[str]) -> dict[str, int]:
    """Copy into `new_db` every row of `tables` in `old_db` that it lacks (by key: a row already there is left
    as it is; a table numbered by its own database — an INTEGER PRIMARY KEY, the diary's — by what the row holds,
    so a note numbered as another file's note is kept too), in one transaction; the rows copied, per table. Columns both files have are copied (the old
    file may predate a column: it takes its default). A table either file lacks is skipped."""
    if not old_db.is_file():
        return {}
    copied: dict[str, int] = {}
    conn = connect(new_db)
    try:
        conn.execute("ATTACH DATABASE ? AS old", (str(old_db),))
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for table in tables:
                    cols = [r[1] for r in conn.execute(f"PRAGMA main.table_info({table})")]
                    old_cols = {r[1] for r in conn.execute(f"PRAGMA old.table_info({table})")}
                    shared = [c for c in cols if c in old_cols]
                    if not shared:
                        continue
                    row_id = _row_id(conn, table)
                    if row_id is not None and row_id in shared:
                        copied[table] = _carry_numbered(conn, table, row_id, [c for c in shared if c != row_id])
                        continue
                    both = ", ".join(f'"{c}"' for c in shared)
                    cur = conn.execute(f'INSERT OR IGNORE INTO main."{table}" ({both}) SELECT {both} FROM old."{table}"')
                    copied[table] = max(cur.rowcount or 0, 0)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        finally:
            conn.execute("DETACH DATABASE old")
    finally:
        conn.close()
    return copied


def _row_id(conn: Connection, table: str) -> str | None:
    """The column that is `table`'s row id — an INTEGER PRIMARY KEY, as an AUTOINCREMENT id is — else None."""
    key = [(r[1], str(r[2]).upper()) for r in conn.execute(f'PRAGMA main.table_info("{table}")') if r[5]]
    return key[0][0] if len(key) == 1 and key[0][1] == "INTEGER" else None


def _carry_numbered(conn: Connection, table: str, row_id: str, columns: list[str]) -> int:
    """Carry the rows of a table numbered by the database that wrote them (an agent's diary): the same number in
    two files is two different rows — each file counted from 1 — so a row is matched by what it holds, never by
    its number. One the new file holds already (a carry done before a kill, done again) is left; any other keeps
    its number where it is free and takes the next one where another row holds it. Returns the rows copied."""
    names = ", ".join(f'"{c}"' for c in columns)
    # what the new file holds, as a multiset: two notes alike in every column are two notes
    held: Counter[tuple[Any, ...]] = Counter(tuple(r) for r in conn.execute(f'SELECT {names} FROM main."{table}"'))
    numbers = {r[0] for r in conn.execute(f'SELECT "{row_id}" FROM main."{table}"')}
    free: list[Any] = []
    taken: list[Any] = []
    for row in conn.execute(f'SELECT "{row_id}", {names} FROM old."{table}" ORDER BY "{row_id}"').fetchall():
        content = tuple(row[1:])
        if held[content]:
            held[content] -= 1
            continue
        (taken if row[0] in numbers else free).append(row)
    marks = ", ".join("?" * len(columns))
    # the free numbers first, so a number the second statement gives out is never one the first still needs
    conn.executemany(f'INSERT INTO main."{table}" ("{row_id}", {names}) VALUES (?, {marks})', [tuple(r) for r in free])
    conn.executemany(f'INSERT INTO main."{table}" ({names}) VALUES ({marks})', [tuple(r)[1:] for r in taken])
    return len(free) + len(taken)


__all__ = ["note_path", "held", "write_note", "read_note", "replace", "finish", "finish_held", "carry_rows"]


def rebuild(db: Path, suffix: str, fill: Callable[[Connection], object], aside: Path, carry: Sequence[str],
            derived: Sequence[Path]) -> Path | None:
    """A new database for `db`: made beside it (`db` + `suffix`, a killed rebuild's half-made file removed
    first: no note names it), every table the migrations make, filled by `fill(conn)` (nothing: an empty
    database the node applies its log into from the start), made one synced file, and swapped in for the old
    one through `replace` — the old kept as `aside`, this node's `carry` tables taken over. `derived` (the
    keyword index, the code and vector files) is removed first: derived from the rows being replaced, whose ids a
    replay may give to other rows. A join's start-over and a
    repair's replay both build theirs this way. Returns where the old database was kept."""
    fresh = db.with_name(db.name + suffix)
    with held(db):
        finish_held(db)
        for stale in (fresh, *(fresh.with_name(fresh.name + s) for s in ("-wal", "-shm", "-journal"))):
            stale.unlink(missing_ok=True)
        conn = connect(fresh)
        try:
            fill(conn)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("PRAGMA journal_mode = DELETE")   # one file, to be renamed into place
        finally:
            conn.close()
        fsync_file(fresh)
        for path in derived:
            shutil.rmtree(path, ignore_errors=True)
        return replace(db, fresh, aside, carry)
