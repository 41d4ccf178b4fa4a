"""Giving back a record the log lost, from a database that applied it (SQLite's `.recover` spirit: what the
rows still say is not thrown away because the log's copy of it is damaged).

A database does not keep the records it applied, only what they did: the applier's outcome (`applied_ops`:
op_id, seq, type, status, result) and the rows. From those a record is rebuilt with the payload its writer
would have built (core/pages/records.py), its actor and instant read off the rows it wrote. A rebuilt record
is trusted only once a replay proves it: the repaired log, replayed into a scratch database up to the
source's position, must give the source's rows exactly (core/repair.py does that replay); anything else is
written as a tombstone.

How each kind is rebuilt is its declaration's (`RecordKind.give_back`, core/replica/kinds.py): the pages log's in
core/pages/give_back.py, the vector log's in core/vectors/records.py. Nothing here branches on a kind.

- An **applied** record is rebuilt as itself (same op_id, type and payload shape).
- A **refused or no-op** record changed no row: it is given back as a tombstone carrying the outcome it was
  given, which every applier stores as that outcome (the same `applied_ops` row on every node).
- What cannot be rebuilt is a **tombstone**: a `log.lost` record at the lost record's seq, which every
  applier applies as "record N was lost" (an outcome row of status `lost`), so every node keeps one
  contiguous order and agrees on what it holds.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from .log import Record
# the give-back protocol and the tombstone live with the kinds' declarations (core/replica/kinds.py); said
# here too, where the repair has always found them
from .replica.kinds import LOST, REPAIR_ACTOR, CannotSay, LogKinds, Related, at_of, tombstone  # noqa: F401


@dataclass
class Given:
    """What one database gives back for one lost seq: candidate records (rebuilt, or an outcome tombstone), the
    most likely first — the repair's replay proof chooses among them —, or why it cannot."""

    records: list[Record] = field(default_factory=list)
    how: str = ""        # recovered | outcome
    what: str = ""       # "page.create ENG/Runbook 3" — what the lost record did, by name
    why: str = ""        # when there is no record: why this database cannot give it back
    note: str = ""       # what the rows no longer say, which a candidate stands in for ("its first text …")

    @property
    def record(self) -> Record | None:
        return self.records[0] if self.records else None


def kinds_of(log: str) -> LogKinds:
    """The declared kinds of the log a person calls `log` ("pages", "vectors")."""
    if log == "pages":
        from .pages.kinds import KINDS
    elif log == "vectors":
        from .vectors.kinds import KINDS
    else:
        raise ValueError(f"no log is named {log!r} (a home has the pages and the vectors log)")
    return KINDS


def _page_name(conn: Any, page_id: str | None) -> str:
    if not page_id:
        return ""
    row = conn.execute("SELECT container, title FROM pages WHERE id = ?", (page_id,)).fetchone()
    if row is not None:
        return f"{row['container']}/{row['title']}"
    row = conn.execute("SELECT container, title FROM deleted_pages WHERE page_id = ?", (page_id,)).fetchone()
    return f"{row['container']}/{row['title']} (purged since)" if row is not None else f"page {page_id}"


def describe_page_change(conn: Any, op_type: str, result_text: str | None, status: str = "applied") -> str:
    """"page.create ENG/Runbook 3" — a change said by name (the page it touched, and the kind of change)."""
    try:
        result = json.loads(result_text or "{}")
    except ValueError:
        result = {}
    name = _page_name(conn, result.get("page_id")) if isinstance(result, dict) else ""
    if not name and isinstance(result, dict) and result.get("key"):
        name = f"space {result['key']}"
    tail = "" if status == "applied" else f" ({status})"
    return f"{op_type} {name}{tail}".strip()


def _as_outcome(op: Any, seq: int, why: str) -> Record:
    """A record that changed nothing but its outcome row (refused, no-op, or an earlier repair's tombstone),
    given back as that very outcome: every node then stores the row the node that applied it stores."""
    result = json.loads(op["result"]) if op["result"] else {}
    outcome = {"type": op["type"], "status": op["status"], "code": op["code"], "reason": op["reason"], "result": result}
    return Record(LOST, op["op_id"], REPAIR_ACTOR, at_of(op["op_id"]),
                  {"seq": seq, "log": "pages", "why": why, "outcome": outcome})


def give_back_page(conn: Any, seq: int, related: Related | None = None) -> Given:
    """Record `seq` of the pages log, as the database `conn` (which applied it) still knows it: candidates rebuilt
    as of its seq (`related`: the log's intact records about the same things), the most likely first."""
    related = related if related is not None else Related()
    op = conn.execute("SELECT * FROM applied_ops WHERE seq = ?", (seq,)).fetchone()
    if op is None:
        return Given(why=f"it holds no outcome of seq {seq}")
    what = describe_page_change(conn, op["type"], op["result"], op["status"])
    if op["type"] == LOST:
        # an earlier repair's tombstone: what every node stored for it is its outcome row
        return Given([_as_outcome(op, seq, "given back as its outcome (lost in an earlier repair)")], "outcome", what)
    if op["status"] != "applied":
        # a refused or no-op record wrote nothing but its outcome: give that back, as decided
        return Given([_as_outcome(op, seq, "given back as its outcome (it changed nothing)")], "outcome", what)
    kinds = kinds_of("pages")
    give = kinds.give_back(op["type"])
    if give is None:
        declared = kinds.kinds.get(op["type"])
        why = f": {declared.give_back}" if declared is not None else ""
        return Given(what=what, why=f"a {op['type']} record is not one a database can rebuild{why}")
    try:
        candidates, note = give(conn, seq, op, related)
        return Given(candidates, "recovered", what, note=note)
    except CannotSay as exc:
        return Given(what=what, why=str(exc))
    except (KeyError, TypeError, ValueError) as exc:
        return Given(what=what, why=f"its rows do not say what it was ({exc!r})")


def give_back_vector(conn: Any, seq: int, related: Related | None = None) -> Given:
    """Record `seq` of the vector log, as the database `conn` still holds what it filed: a vector log keeps no
    outcome naming a record's kind, so each kind that can be given back is asked in turn (a vector.put whose
    vector the database still holds)."""
    related = related if related is not None else Related()
    whys = []
    for _kind, give in kinds_of("vectors").givers():
        try:
            candidates, note = give(conn, seq, None, related)
        except CannotSay as exc:
            whys.append(str(exc))
            continue
        first = candidates[0].payload
        what = f"{candidates[0].type} of {_page_name(conn, first.get('source_id'))} ({first.get('space')})"
        return Given(candidates, "recovered", what, note=note)
    return Given(why="; ".join(whys) or f"no vector-log record of seq {seq} can be given back")


_FIELD = {name: re.compile(rb'"' + name.encode() + rb'":"((?:[^"\\]|\\.){1,300})"')
          for name in ("type", "container", "title", "page_id", "source_id", "comment_id")}


def guess_what(data: bytes, conn: Any | None = None) -> str:
    """What a damaged frame probably held, read off its bytes (a flipped bit leaves most of the JSON legible):
    "page.create ENG/Runbook 3 (read from the damaged bytes)". Empty when nothing legible is there."""
    found: dict[str, str] = {}
    for name, pattern in _FIELD.items():
        m = pattern.search(data)
        if m:
            try:
                found[name] = json.loads(b'"' + m.group(1) + b'"')
            except ValueError:
                found[name] = m.group(1).decode("utf-8", "replace")
    kind = found.get("type", "")
    if not re.fullmatch(r"[a-z]+\.[a-z]+", kind):
        return ""
    name = ""
    if found.get("container") and found.get("title"):
        name = f"{found['container']}/{found['title']}"
    elif found.get("page_id") or found.get("source_id"):
        name = _page_name(conn, found.get("page_id") or found.get("source_id")) if conn is not None else (
            f"page {found.get('page_id') or found.get('source_id')}")
    return f"{kind} {name}".strip() + " (read from the damaged bytes)"
