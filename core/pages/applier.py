"""The pages log as it registers with the apply engine (core/replica), read off its kinds' declarations
(pages/kinds.py): the handlers (pages/handlers.py), the shapes checked before them, the tombstone's verdict.

Its records decide: each is applied once by op_id and its outcome stored in applied_ops (the engine's
DecidingApplier), so every node that applies the same log decides the same. A new kind registers nowhere
here: its declaration is enough.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from ..log import Record
from ..log.framing import Applied, Frame
from ..replica import engine
from ..replica.backend import LogBackend
from ..replica.appliers import DecidingApplier, Decision, Handler, Malformed
from ..store import Connection
from .handlers import live_children, page_create_none_purged, parent_problem  # noqa: F401  (the writer's checks)
from .kinds import KINDS

APPLIER = "applier"
LOST = "log.lost"   # a repair's tombstone (core/recover.py)

HANDLERS: dict[str, Handler] = KINDS.handlers
SHAPES = KINDS.shapes

# what a chunk with no page.purge in it applies with while no page was ever purged
_HANDLERS_NONE_PURGED = {**HANDLERS, "page.create": page_create_none_purged}
_ANY_PURGED = "SELECT EXISTS(SELECT 1 FROM deleted_pages)"


def _handlers_for(conn: Connection, records: Sequence[Record]) -> dict[str, Handler]:
    if any(r.type == "page.purge" for r in records) or conn.execute(_ANY_PURGED).fetchone()[0]:
        return HANDLERS
    return _HANDLERS_NONE_PURGED


# the pages log as it registers with the engine: its records decide, each outcome stored in applied_ops; a
# repair's tombstone carries its own outcome
PAGES = DecidingApplier(APPLIER, HANDLERS, batch=engine.TXN_RECORDS, select=_handlers_for, verdicts=KINDS.verdicts,
                        shapes=SHAPES)


def catch_up(conn: Connection, flog: LogBackend, *, batch: int | None = None,
             progress: Callable[[int], None] | None = None, outcomes: dict[str, Decision] | None = None,
             appended: Sequence[tuple[Record, Frame]] | None = None) -> int:
    """Apply the pages log past this database's position (`replica.engine.catch_up` with its handlers)."""
    return engine.catch_up(conn, flog, PAGES, batch=batch, progress=progress, outcomes=outcomes, appended=appended)


def apply_record(conn: Connection, rec: Record) -> Decision | None:
    """Apply one record inside the caller's transaction. None when its op_id was applied already."""
    return PAGES.apply_one(conn, rec)


def apply_batch(conn: Connection, records: Sequence[Record], *, careful: bool = False) -> list[Decision]:
    """Apply records in order inside the caller's transaction, as `catch_up` applies a chunk: the fast
    path, and — when it meets a malformed record — the same records again from a savepoint, each record
    in a savepoint of its own (`careful` goes there at once)."""
    if careful:
        return PAGES.apply(conn, records, careful=True)
    conn.execute("SAVEPOINT batch")
    try:
        outcomes = PAGES.apply(conn, records)
    except Malformed:
        conn.execute("ROLLBACK TO batch")
        outcomes = PAGES.apply(conn, records, careful=True)
    conn.execute("RELEASE batch")
    return outcomes


def position(conn: Connection, name: str = APPLIER) -> tuple[int, int]:
    return engine.position(conn, name)


def applied_position(conn: Connection, name: str = APPLIER) -> Applied:
    return engine.applied_position(conn, name)
