"""Giving back a record the log lost, from a database that applied it (SQLite's `.recover` spirit: what the
rows still say is not thrown away because the log's copy of it is damaged).

A database does not keep the records it applied, only what they did: the applier's outcome (`applied_ops`:
op_id, seq, type, status, result) and the rows. From those a record is rebuilt with the payload its writer
would have built (core/pages/records.py), its actor and instant read off the rows it wrote. A rebuilt record
is trusted only once a replay proves it: the repaired log, replayed into a scratch database up to the
source's position, must give the source's rows exactly (core/repair.py does that replay); anything else is
written as a tombstone.

- An **applied** record is rebuilt as itself (same op_id, type and payload shape).
- A **refused or no-op** record changed no row: it is given back as a tombstone carrying the outcome it was
  given, which every applier stores as that outcome (the same `applied_ops` row on every node).
- What cannot be rebuilt is a **tombstone**: a `log.lost` record at the lost record's seq, which every
  applier applies as "record N was lost" (an outcome row of status `lost`), so every node keeps one
  contiguous order and agrees on what it holds.
"""
from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Any

from .clock import now_ms
from .log import Record

LOST = "log.lost"               # the tombstone's record type
REPAIR_ACTOR = "crewlet"


def tombstone(seq: int, log: str, why: str, *, was: str = "") -> Record:
    """The record a repair writes where record `seq` was and nothing could give it back."""
    payload: dict[str, Any] = {"seq": seq, "log": log, "why": why}
    if was:
        payload["was"] = was
    return Record.new(LOST, REPAIR_ACTOR, payload)


@dataclass
class Given:
    """What one database gives back for one lost seq: a record (rebuilt, or an outcome tombstone), or why not."""

    record: Record | None
    how: str = ""        # recovered | outcome
    what: str = ""       # "page.create ENG/Runbook 3" — what the lost record did, by name
    why: str = ""        # when there is no record: why this database cannot give it back


def _at_of(op_id: str) -> int:
    """A record's instant as its op_id says it (12 hex digits of the writer's clock in ms, core/log/record.py)."""
    try:
        return int(op_id[:12], 16)
    except ValueError:
        return now_ms()


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


def _note(payload: dict[str, Any], message: str | None) -> dict[str, Any]:
    if message:
        payload["message"] = message
    return payload


class _CannotSay(Exception):
    """The rows do not say what the record was."""


def _revision(conn: Any, page_id: str, revision: int) -> Any:
    row = conn.execute("SELECT r.title, COALESCE(r.body, CASE WHEN p.revision = r.revision THEN p.body END) AS body, "
                       "r.author, r.at, r.message FROM revisions r JOIN pages p ON p.id = r.page_id "
                       "WHERE r.page_id = ? AND r.revision = ?", (page_id, revision)).fetchone()
    if row is None or row["body"] is None:
        raise _CannotSay(f"revision {revision} of page {page_id} is no longer in the database (purged since)")
    return row


def _page(conn: Any, page_id: str) -> Any:
    row = conn.execute("SELECT * FROM pages WHERE id = ?", (page_id,)).fetchone()
    if row is None:
        raise _CannotSay(f"page {page_id} is no longer in the database (purged since)")
    return row


def _rebuild_page_record(conn: Any, op: Any) -> Record:
    """The applied page-log record `op` (its applied_ops row), rebuilt from the rows it wrote."""
    kind, op_id, seq = op["type"], op["op_id"], op["seq"]
    result = json.loads(op["result"] or "{}")
    page_id = result.get("page_id")
    if result.get("warnings"):
        raise _CannotSay("its outcome carries a warning: what its writer asked for differs from what it did")

    def rec(actor: str, at: int, payload: dict[str, Any]) -> Record:
        return Record(kind, op_id, actor, int(at), payload)

    def at_if_last(row: Any, column: str) -> int:
        # a row keeps the instant of the record that changed it last (its version): older ones are overwritten
        return int(row[column]) if row["version"] == seq else _at_of(op_id)

    if kind == "page.create":
        page, first = _page(conn, page_id), _revision(conn, page_id, 1)
        payload: dict[str, Any] = {"page_id": page_id, "container": page["container"], "title": first["title"],
                                   "body": first["body"], "parent_id": page["parent_id"]}
        _note(payload, first["message"])
        labels = json.loads(page["labels"] or "[]")
        if labels:
            payload["labels"] = labels
        return rec(first["author"], first["at"], payload)
    if kind in ("page.save", "page.rename"):
        revision = int(result["revision"])
        row = _revision(conn, page_id, revision)
        if kind == "page.save":
            payload = _note({"page_id": page_id, "base_revision": revision - 1, "body": row["body"]}, row["message"])
        else:
            payload = {"page_id": page_id, "title": row["title"]}
        return rec(row["author"], row["at"], payload)
    if kind == "page.move":
        page = _page(conn, page_id)
        return rec(REPAIR_ACTOR, at_if_last(page, "updated_at"), {"page_id": page_id, "parent_id": result.get("parent_id")})
    if kind == "page.trash":
        page = _page(conn, page_id)
        if page["version"] == seq and page["trashed_at"] is not None:
            return rec(page["trashed_by"], page["trashed_at"], {"page_id": page_id})
        return rec(REPAIR_ACTOR, _at_of(op_id), {"page_id": page_id})
    if kind == "page.restore":
        page = _page(conn, page_id)
        return rec(REPAIR_ACTOR, at_if_last(page, "updated_at"), {"page_id": page_id})
    if kind == "page.purge":
        gone = conn.execute("SELECT purged_by, purged_at, reason FROM deleted_pages WHERE page_id = ?",
                            (page_id,)).fetchone()
        if gone is None:
            raise _CannotSay(f"no purge marker for page {page_id}")
        return rec(gone["purged_by"], gone["purged_at"], {"page_id": page_id, "reason": gone["reason"]})
    if kind == "page.labels":
        page = _page(conn, page_id)
        return rec(REPAIR_ACTOR, at_if_last(page, "updated_at"), {"page_id": page_id, "labels": list(result["labels"])})
    if kind == "comment.add":
        c = conn.execute("SELECT * FROM comments WHERE id = ?", (result["comment_id"],)).fetchone()
        if c is None or c["edited_at"] is not None:
            raise _CannotSay(f"comment {result['comment_id']} was edited or removed since: its first text is gone")
        return rec(c["author"], c["created_at"], {"comment_id": c["id"], "page_id": c["page_id"], "body": c["body"]})
    if kind == "comment.edit":
        c = conn.execute("SELECT * FROM comments WHERE id = ?", (result["comment_id"],)).fetchone()
        if c is None:
            raise _CannotSay(f"comment {result['comment_id']} was removed since")
        return rec(c["author"], c["edited_at"], {"comment_id": c["id"], "body": c["body"]})
    if kind == "comment.remove":
        return rec(REPAIR_ACTOR, _at_of(op_id), {"comment_id": result["comment_id"]})
    if kind == "knowledge.read":
        r = conn.execute("SELECT * FROM knowledge_reads WHERE op_id = ?", (op_id,)).fetchone()
        if r is None:
            raise _CannotSay("its read is not in the database")
        payload = {"via": r["via"], "pages": json.loads(r["pages"]), "backend": r["backend"]}
        for key in ("query", "turn", "phase"):
            if r[key] is not None:
                payload[key] = r[key]
        return rec(r["actor"], r["at"], payload)
    if kind == "onboarding.mark":
        raise _CannotSay("an onboarding mark keeps only its latest instant")
    if kind == "container.declare":
        c = conn.execute("SELECT * FROM containers WHERE key = ?", (result["key"],)).fetchone()
        if c is None:
            raise _CannotSay(f"space {result['key']} is not in the database")
        return rec(REPAIR_ACTOR, _at_of(op_id), {"key": c["key"], "name": c["name"], "purpose": c["purpose"],
                                                  "lead": c["lead"], "chart_epoch": c["chart_epoch"]})
    raise _CannotSay(f"a {kind} record is not one a database can rebuild")


def give_back_page(conn: Any, seq: int) -> Given:
    """Record `seq` of the pages log, as the database `conn` (which applied it) still knows it."""
    op = conn.execute("SELECT * FROM applied_ops WHERE seq = ?", (seq,)).fetchone()
    if op is None:
        return Given(None, why=f"it holds no outcome of seq {seq}")
    what = describe_page_change(conn, op["type"], op["result"], op["status"])
    if op["type"] == LOST:
        return Given(None, what=what, why=f"seq {seq} was lost in an earlier repair already")
    if op["status"] != "applied":
        # a refused or no-op record wrote nothing but its outcome: give that back, as decided
        result = json.loads(op["result"]) if op["result"] else {}
        outcome = {"type": op["type"], "status": op["status"], "code": op["code"], "reason": op["reason"], "result": result}
        record = Record(LOST, op["op_id"], REPAIR_ACTOR, _at_of(op["op_id"]),
                        {"seq": seq, "log": "pages", "why": "given back as its outcome (it changed nothing)",
                         "outcome": outcome})
        return Given(record, "outcome", what)
    try:
        return Given(_rebuild_page_record(conn, op), "recovered", what)
    except _CannotSay as exc:
        return Given(None, what=what, why=str(exc))
    except (KeyError, TypeError, ValueError) as exc:
        return Given(None, what=what, why=f"its rows do not say what it was ({exc!r})")


def give_back_vector(conn: Any, seq: int) -> Given:
    """Record `seq` of the vector log, when it was a vector.put whose vector the database still holds."""
    row = conn.execute("SELECT * FROM vectors WHERE seq = ?", (seq,)).fetchone()
    if row is None:
        return Given(None, why=f"it holds no vector filed by seq {seq} (a later put replaced it, or it was no put)")
    what = f"vector.put of {_page_name(conn, row['source_id'])} ({row['space']})"
    payload = {"source_id": row["source_id"], "kind": row["kind"], "space": row["space"], "container": row["container"],
               "revision": row["revision"], "digest": row["digest"], "bytes": row["bytes"], "bucket": row["bucket"],
               "dims": row["dims"], "vector": base64.b64encode(bytes(row["vector"])).decode("ascii")}
    from .vectors.records import DUTY_ACTOR

    return Given(Record.new("vector.put", DUTY_ACTOR, payload), "recovered", what)


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
