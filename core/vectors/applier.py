"""The vector log as it registers with the apply engine (core/replica), read off its kinds' declarations
(vectors/kinds.py), as pages/applier.py registers the pages log: the records file rows (a `FilingApplier`,
no outcome a writer waits for), a transaction of 500 at most.

It stands apart from records.py (the builders and handlers the declarations name) so that the declarations
import the records and this module imports the declarations: no circle between them.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from ..log import Record
from ..log.framing import Frame
from ..replica import engine
from ..replica.appliers import FilingApplier
from ..replica.backend import LogBackend
from ..replica.shapes import Shape
from ..store import Connection
from .kinds import KINDS
from .records import POSITION


def shapes() -> dict[str, Shape]:
    """Each vector-log record kind's shape, as its declaration says it."""
    return KINDS.shapes


def handlers() -> dict[str, Callable[[Connection, Record], None]]:
    """Each vector-log record kind's handler, as its declaration says it."""
    return KINDS.handlers


VECTORS = FilingApplier(POSITION, handlers, batch=500, shapes=shapes)


def catch_up(conn: Connection, vlog: LogBackend, *, batch: int | None = None,
             progress: Callable[[int], None] | None = None,
             appended: Sequence[tuple[Record, Frame]] | None = None) -> int:
    """Apply every vector record past this node's position on the vector log, exactly as the pages
    log is applied (a batch a transaction, the position and its frame's digest stored with it, damage
    stopping it after the good records; a writer's own records from memory)."""
    return engine.catch_up(conn, vlog, VECTORS, batch=batch, progress=progress, appended=appended)
