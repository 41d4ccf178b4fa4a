"""How a log's records are applied, as a log registers them with the engine: a record type's handler,
and one of two kinds of applier around the handlers.

- `DecidingApplier` — records that decide something a writer waits for (the pages log): each record is
  applied once by op_id, and what was decided (applied, refused with a code and a reason, or a no-op)
  is stored in `applied_ops` in the same transaction: the writer's answer, and what every node that
  applies the same log decides alike. A handler refuses (`Refuse`) or finds nothing to do (`Noop`)
  before its first write.
- `FilingApplier` — records that file derived state nobody waits on (the vector log): each record in a
  savepoint of its own; one of a type this build does not know, or malformed, files nothing.

Both check a record's payload against its kind's shape (shapes.py) before its handler reads it: a payload
of another shape is refused as malformed (filed as nothing), never raised out of the applier — which would
stop the log at that record on every node.

An applier is what the engine calls for each chunk of records, inside its transaction:
`apply(conn, records, careful=...)`. The fast path may raise `Malformed`; the engine then rolls the
transaction back and applies the same records again with `careful=True` (record by record, each in a
savepoint), which never raises it.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii as _escape  # what json.dumps writes a str with
from typing import Any

from ..log import Record
from ..store import Connection, sqlite3
from .shapes import Shape, shape_problem

Handler = Callable[[Connection, Record], Any]
Verdict = Callable[[Record], "Decision"]     # a record that carries its own outcome (a repair's tombstone)


@dataclass
class Decision:
    """What the applier decided for one record, stored in applied_ops: the writer's answer."""

    op_id: str
    seq: int
    type: str
    status: str                     # applied | refused | noop
    code: str | None = None
    reason: str | None = None
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status != "refused"

    @property
    def warnings(self) -> list[dict[str, str]]:
        return list(self.result.get("warnings", []))


class Refuse(Exception):
    """Raised by a handler, before its first write: the record is refused (`code`, `reason`)."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason = code, reason


class Noop(Exception):
    """Raised by a handler, before its first write: the record changes nothing (`result` is still told)."""

    def __init__(self, reason: str, result: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.reason, self.result = reason, result or {}


class Malformed(Exception):
    """The fast path met a malformed record: the engine rolls back and applies the chunk carefully."""


# Exceptions a malformed payload raises where its kind's shape (shapes.py, checked first) cannot see it (an
# int past 64 bits that SQLite refuses, a bad base64 text): the record is refused as malformed, never
# half-applied, and never stops the log.
MALFORMED = (KeyError, TypeError, ValueError, OverflowError,
             sqlite3.InterfaceError, sqlite3.ProgrammingError, sqlite3.IntegrityError)
_INSERT_OUTCOME = "INSERT INTO applied_ops (op_id, seq, type, status, code, reason, result) VALUES (?,?,?,?,?,?,?)"


def _result_json(result: dict[str, Any]) -> str:
    """`json.dumps(result)`, byte for byte (the stored text is compared between nodes), spelled out for
    the flat results almost every record has — text, integers, null, an empty list — which json.dumps
    takes twice as long to write; anything else goes to json.dumps."""
    parts = []
    for key, value in result.items():
        kind = type(value)
        if kind is str:
            text = _escape(value)
        elif kind is int:
            text = int.__repr__(value)
        elif value is None:
            text = "null"
        elif kind is list and not value:
            text = "[]"
        else:
            return json.dumps(result)
        if type(key) is not str:
            return json.dumps(result)
        parts.append(f"{_escape(key)}: {text}")
    return "{" + ", ".join(parts) + "}"


def _outcome_row(o: Decision) -> tuple:
    return (o.op_id, o.seq, o.type, o.status, o.code, o.reason, _result_json(o.result) if o.result else None)


def outcome_of(conn: Connection, op_id: str) -> Decision | None:
    """What was decided for `op_id`, if this database applied it."""
    row = conn.execute("SELECT * FROM applied_ops WHERE op_id = ?", (op_id,)).fetchone()
    if row is None:
        return None
    return Decision(row["op_id"], row["seq"], row["type"], row["status"], row["code"], row["reason"],
                    json.loads(row["result"]) if row["result"] else {})


def applied_already(conn: Connection, records: Sequence[Record]) -> set[str]:
    """The op_ids among `records` this database applied before (one query, whatever the batch size)."""
    ids = json.dumps([r.op_id for r in records])
    return {row[0] for row in conn.execute(
        "SELECT op_id FROM applied_ops WHERE op_id IN (SELECT value FROM json_each(?))", (ids,))}


def malformed(rec: Record, why: str) -> Refuse:
    return Refuse("malformed", f"malformed {rec.type} record: {why}")


def decide(conn: Connection, rec: Record, handlers: Mapping[str, Handler],
           verdicts: Mapping[str, Verdict] | None = None, shapes: Mapping[str, Shape] | None = None) -> Decision:
    """Run a record's handler. A payload not of its kind's shape is refused as malformed before the handler
    reads it. A handler refuses (or finds nothing to do) BEFORE its first write, so a Refuse or Noop leaves
    no row behind and needs no savepoint; anything else propagates. A record of a type in `verdicts` writes
    no row and carries its own outcome (a repair's tombstone)."""
    try:
        shape = shapes.get(rec.type) if shapes else None
        if shape is not None:
            problem = shape_problem(rec.payload, shape)
            if problem is not None:
                raise malformed(rec, problem)
        if verdicts and rec.type in verdicts:
            return verdicts[rec.type](rec)
        handler = handlers.get(rec.type)
        if handler is None:
            raise Refuse("unknown_record", f"record type '{rec.type}' is not known to this build — upgrade crewlet")
        return Decision(rec.op_id, rec.seq, rec.type, "applied", result=handler(conn, rec))
    except Refuse as r:
        return Decision(rec.op_id, rec.seq, rec.type, "refused", r.code, r.reason)
    except Noop as n:
        return Decision(rec.op_id, rec.seq, rec.type, "noop", None, n.reason, n.result)


def decide_carefully(conn: Connection, rec: Record, handlers: Mapping[str, Handler],
                     verdicts: Mapping[str, Verdict] | None = None, shapes: Mapping[str, Shape] | None = None
                     ) -> Decision:
    """As `decide`, inside a savepoint of its own, so a malformed record's partial writes are undone."""
    conn.execute("SAVEPOINT rec")
    try:
        outcome = decide(conn, rec, handlers, verdicts, shapes)
    except MALFORMED as exc:
        conn.execute("ROLLBACK TO rec")
        outcome = Decision(rec.op_id, rec.seq, rec.type, "refused", "malformed", f"malformed {rec.type} record: {exc!r}")
    conn.execute("RELEASE rec")
    return outcome


def _apply_each(conn: Connection, records: Sequence[Record], done: set[str],
                decide_one: Callable[[Connection, Record], Decision]) -> list[Decision]:
    outcomes = []
    for rec in records:
        if rec.op_id in done:
            continue
        done.add(rec.op_id)
        outcomes.append(decide_one(conn, rec))
    return outcomes


class DecidingApplier:
    """A log whose records decide (see the module's docstring). `select(conn, records)`, when given, picks
    the handlers a fast chunk runs with (the pages log leaves out a lookup while no page was ever purged);
    the careful path always runs `handlers`."""

    def __init__(self, position: str, handlers: Mapping[str, Handler], *, batch: int,
                 select: Callable[[Connection, Sequence[Record]], Mapping[str, Handler]] | None = None,
                 verdicts: Mapping[str, Verdict] | None = None, shapes: Mapping[str, Shape] | None = None) -> None:
        self.position = position        # this log's row in log_position
        self.handlers = handlers
        self.batch = batch              # records one transaction holds at most
        self.select = select
        self.verdicts = verdicts or {}
        self.shapes = shapes or {}      # each kind's payload, checked before its handler reads it

    def apply(self, conn: Connection, records: Sequence[Record], *, careful: bool = False) -> list[Decision]:
        """Apply `records` in order inside the caller's transaction; returns the outcome of each record
        decided here (a record whose op_id was applied before — earlier, or earlier in these records — is
        skipped). The fast path runs each handler with no savepoint of its own (handlers refuse before
        writing) and stores every outcome with one executemany; a malformed record raises `Malformed`
        (the caller rolls back and applies again with `careful`, each record in its own savepoint: a
        savepoint spanning a chunk makes SQLite journal every page the chunk touches)."""
        if not records:
            return []
        done = applied_already(conn, records)
        handlers, verdicts, shapes = self.handlers, self.verdicts, self.shapes
        if careful:
            outcomes = _apply_each(conn, records, set(done),
                                   lambda c, rec: decide_carefully(c, rec, handlers, verdicts, shapes))
        else:
            if self.select is not None:
                handlers = self.select(conn, records)
            try:
                outcomes = _apply_each(conn, records, set(done), lambda c, rec: decide(c, rec, handlers, verdicts, shapes))
            except MALFORMED as exc:
                raise Malformed(str(exc)) from exc
        conn.executemany(_INSERT_OUTCOME, [_outcome_row(o) for o in outcomes])
        return outcomes

    def apply_one(self, conn: Connection, rec: Record) -> Decision | None:
        """Apply one record inside the caller's transaction, carefully. None when its op_id was applied."""
        if conn.execute("SELECT 1 FROM applied_ops WHERE op_id = ?", (rec.op_id,)).fetchone():
            return None
        outcome = decide_carefully(conn, rec, self.handlers, self.verdicts, self.shapes)
        conn.execute(_INSERT_OUTCOME, _outcome_row(outcome))
        return outcome


class FilingApplier:
    """A log whose records file derived state (see the module's docstring); `handlers()` gives the handler
    of each record type when first asked (a handler module may load what only applying it needs)."""

    def __init__(self, position: str, handlers: Callable[[], Mapping[str, Handler]], *, batch: int,
                 shapes: Callable[[], Mapping[str, Shape]] | None = None) -> None:
        self.position = position
        self.handlers = handlers
        self.batch = batch
        self.shapes = shapes or dict      # each kind's payload, checked before its handler reads it

    def apply(self, conn: Connection, records: Sequence[Record], *, careful: bool = False) -> list[Decision]:
        for rec in records:
            self.apply_one(conn, rec)
        return []   # a filed record decides nothing a writer waits for

    def apply_one(self, conn: Connection, rec: Record) -> None:
        handler = self.handlers().get(rec.type)
        if handler is None:
            return  # a record type of a later build: nothing this build can file
        shape = self.shapes().get(rec.type)
        if shape is not None and shape_problem(rec.payload, shape) is not None:
            return  # malformed: filed as nothing, before its handler reads it
        conn.execute("SAVEPOINT filed")
        try:
            handler(conn, rec)
        except MALFORMED:
            conn.execute("ROLLBACK TO filed")  # malformed where no shape can see it: filed as nothing
        conn.execute("RELEASE filed")
