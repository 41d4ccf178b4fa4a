"""Diaries follow this node's database when it is replaced.

A diary is this node's own and travels on no log, so whatever starts a node's database over — a repair
that rebuilds it from the log, adopting a snapshot (which never carries diaries), a join that replays the
shared log — would leave every agent's notes in the file kept aside. Each of them calls `carry_diaries`
once the new database is in place: the notes (ids, vectors and all) are copied over from the old file,
so an agent's note ids stay valid and nothing it remembered is lost.
"""
from __future__ import annotations

import logging
from pathlib import Path

from ..store import connect, sqlite3
from ..store.db import transaction

log = logging.getLogger("crewlet.diary")

_COLUMNS = "id, agent, text, created_at, space, held, vector"


def carry_diaries(old_db: Path | str | None, new_db: Path) -> int:
    """Copy the diary rows of `old_db` (a database kept aside) into `new_db`; the number copied. A note
    already there (the same id) is left as it is. An old file that cannot be read is reported, not fatal:
    it is still kept aside, whole."""
    if old_db is None or not Path(old_db).is_file():
        return 0
    conn = connect(new_db)
    try:
        conn.execute("ATTACH DATABASE ? AS old", (str(old_db),))
        try:
            has = conn.execute("SELECT 1 FROM old.sqlite_master WHERE type = 'table' AND name = 'agent_diary'").fetchone()
            if not has:
                return 0
            with transaction(conn):
                cur = conn.execute(f"INSERT OR IGNORE INTO main.agent_diary ({_COLUMNS}) SELECT {_COLUMNS} "
                                   "FROM old.agent_diary ORDER BY id")
            return cur.rowcount or 0
        finally:
            conn.execute("DETACH DATABASE old")
    except sqlite3.Error as exc:
        log.warning("the diaries in %s could not be carried into %s: %s (the file is kept aside, whole)",
                    old_db, new_db, exc)
        return 0
    finally:
        conn.close()
