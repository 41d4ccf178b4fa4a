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
from dataclasses import dataclass, field
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


@dataclass
class Related:
    """The log's intact records that speak of the things lost records touched, in seq order: what a record
    rebuilt "as of its seq" is set against (a later move says the parent now is not the parent then; a later
    rename's outcome says the title it replaced; a later edit's actor who wrote the comment). Built by the repair
    in one walk of the log (core/repair.py `_related`)."""

    by_id: dict[str, list[Record]] = field(default_factory=dict)   # page, comment, agent or space -> its records
    purges: list[Record] = field(default_factory=list)             # every intact page.purge (they re-file children)

    def about(self, key: str | None) -> list[Record]:
        return self.by_id.get(key, []) if key else []


RELATED_KEYS = ("page_id", "comment_id", "agent_id", "key")   # the payload keys a record names its subject by


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


class _CannotSay(Exception):
    """The rows do not say what the record was."""


@dataclass
class _Later:
    """An intact record after the lost one, with what this database decided for it."""

    record: Record
    status: str | None           # None: this database has not applied it
    result: dict[str, Any]

    @property
    def applied(self) -> bool:
        return self.status == "applied"


def _later(conn: Any, related: Related, key: str | None, seq: int, kind: str | None = None) -> list[_Later]:
    out = []
    for rec in related.about(key):
        if rec.seq <= seq or (kind is not None and rec.type != kind):
            continue
        row = conn.execute("SELECT status, result FROM applied_ops WHERE op_id = ?", (rec.op_id,)).fetchone()
        result = json.loads(row["result"]) if row is not None and row["result"] else {}
        out.append(_Later(rec, row["status"] if row is not None else None, result if isinstance(result, dict) else {}))
    return out


def _unique(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def _revision(conn: Any, page_id: str, revision: int) -> Any:
    """Revision N of a page as it was written (its title, body, author, instant, note), or None when the page
    was purged since (its revisions went with it)."""
    return conn.execute("SELECT r.title, COALESCE(r.body, CASE WHEN p.revision = r.revision THEN p.body END) AS body, "
                        "r.author, r.at, r.message FROM revisions r JOIN pages p ON p.id = r.page_id "
                        "WHERE r.page_id = ? AND r.revision = ?", (page_id, revision)).fetchone()


def _page(conn: Any, page_id: str) -> Any:
    return conn.execute("SELECT * FROM pages WHERE id = ?", (page_id,)).fetchone()


def _gone(conn: Any, page_id: str) -> Any:
    return conn.execute("SELECT * FROM deleted_pages WHERE page_id = ?", (page_id,)).fetchone()


_NAMES_NO_PAGE = re.compile(r"parent_id (\S+) names no page")
_NAMES = re.compile(r"parent_id names (.+?)(?:, which| itself)")


def _salvaged_parents(conn: Any, result: dict[str, Any]) -> list[str]:
    """The parent a record asked for when the applier salvaged it (its outcome's warning names it: by id when it
    named no page, else by address): the pages that could have been meant."""
    out: list[str] = []
    for w in result.get("warnings", []):
        message = str(w.get("message", "")) if isinstance(w, dict) else ""
        m = _NAMES_NO_PAGE.search(message)
        if m:
            out.append(m.group(1))
            continue
        m = _NAMES.search(message)
        if m and "/" in m.group(1):
            container, title = m.group(1).split("/", 1)
            out += [r[0] for r in conn.execute("SELECT id FROM pages WHERE container = ? AND title = ?", (container, title))]
            out += [r[0] for r in conn.execute("SELECT page_id FROM deleted_pages WHERE container = ? AND title = ?",
                                               (container, title))]
    return _unique(out)


def _parents_then(conn: Any, related: Related, page: Any, page_id: str, seq: int) -> list[str | None]:
    """Where the page may have stood just after record `seq` — most likely first. Its parent now holds unless a
    later record moved it: a later move that found it already there (a no-op) says where it was; a page purged
    later re-filed its children under its own parent; else the top, or a place a later move named."""
    moves = _later(conn, related, page_id, seq, "page.move")
    out: list[str | None] = []
    for m in moves:
        if m.status == "noop":
            out.append(m.record.payload.get("parent_id"))
        if m.applied:
            break
    moved_since = any(m.applied for m in moves)
    if page is not None and not moved_since:
        out.append(page["parent_id"])
    purged_since = [r for r in related.purges if r.seq > seq]
    refiled_by = [r for r in purged_since if page is not None and page["version"] == r.seq]
    out += [r.payload.get("page_id") for r in refiled_by + (purged_since if len(purged_since) <= 8 else [])]
    out.append(None)
    out += [m.record.payload.get("parent_id") for m in moves]
    if page is not None:
        out.append(page["parent_id"])
    return _unique(out)


def _labels_then(conn: Any, related: Related, page: Any, page_id: str, seq: int) -> list[str]:
    """The labels a create gave: the page's labels now, less those a later record attached (labels only add)."""
    if page is None:
        return []
    now = set(json.loads(page["labels"] or "[]"))
    for later in _later(conn, related, page_id, seq, "page.labels"):
        if later.applied:
            now -= {str(x).lower() for x in later.record.payload.get("labels", [])}
    return sorted(now)


def _title_then(conn: Any, related: Related, page_id: str, seq: int, gone: Any) -> str:
    """A purged page's title just after `seq`: the title the next rename replaced (its outcome says it), else the
    title it was purged under."""
    for later in _later(conn, related, page_id, seq, "page.rename"):
        if later.applied and isinstance(later.result.get("old_title"), str):
            return later.result["old_title"]
    if gone is None:
        raise _CannotSay(f"page {page_id} is no longer in the database")
    return str(gone["title"])


def _bodies_then(conn: Any, related: Related, page_id: str, seq: int) -> list[str]:
    """A purged page's text just after `seq` is not kept: a later save that changed nothing says what it was,
    else any text stands in (the purge left no row it could show in)."""
    found = [later.record.payload.get("body") for later in _later(conn, related, page_id, seq, "page.save")
             if later.status == "noop"]
    return _unique([b for b in found if isinstance(b, str)] + [""])


def _page_candidates(conn: Any, op: Any, related: Related) -> tuple[list[Record], str]:
    """The applied page-log record `op` (its applied_ops row) rebuilt as of its seq — the rows as they were when it
    applied, not as they are now — as candidates, most likely first, and what the rows no longer say."""
    from .pages import records as build

    kind, op_id, seq = op["type"], op["op_id"], op["seq"]
    result = json.loads(op["result"] or "{}")
    page_id = result.get("page_id")
    if result.get("warnings") and kind not in ("page.create", "page.move"):
        raise _CannotSay("its outcome carries a warning: what its writer asked for differs from what it did")

    def rec(actor: str, at: int, payload: dict[str, Any]) -> Record:
        return Record(kind, op_id, actor, int(at), payload)

    def at_if_last(row: Any, column: str) -> int:
        # a row keeps the instant of the record that changed it last (its version): older ones are overwritten
        return int(row[column]) if row is not None and row["version"] == seq else _at_of(op_id)

    if kind == "page.create":
        page, gone = _page(conn, page_id), _gone(conn, page_id)
        if page is None and gone is None:
            raise _CannotSay(f"page {page_id} is no longer in the database")
        first = _revision(conn, page_id, 1) if page is not None else None
        container = (page or gone)["container"]
        note = ""
        if first is not None and first["body"] is not None:
            title, bodies, actor, at, message = first["title"], [first["body"]], first["author"], first["at"], first["message"]
        else:
            title, bodies = _title_then(conn, related, page_id, seq, gone), _bodies_then(conn, related, page_id, seq)
            actor, at, message = REPAIR_ACTOR, _at_of(op_id), None
            note = "its text is not kept (the page was purged since, with its revisions)"
        parents = _parents_then(conn, related, page, page_id, seq)
        if result.get("warnings"):
            parents = _salvaged_parents(conn, result) or parents
        labels = _labels_then(conn, related, page, page_id, seq)
        out = []
        for parent in parents:
            for body in bodies:
                r = build.page_create(actor, page_id=page_id, container=container, title=title, body=body,
                                      parent_id=parent, message=message, labels=labels, op_id=op_id)
                out.append(rec(actor, at, r.payload))
        return out, note
    if kind in ("page.save", "page.rename"):
        revision = int(result["revision"])
        row = _revision(conn, page_id, revision)
        if row is not None and row["body"] is not None:
            if kind == "page.save":
                payload = build.page_save(row["author"], page_id=page_id, base_revision=revision - 1, body=row["body"],
                                          message=row["message"]).payload
            else:
                payload = {"page_id": page_id, "title": row["title"]}
                if row["message"]:
                    payload["message"] = row["message"]
            return [rec(row["author"], row["at"], payload)], ""
        gone = _gone(conn, page_id)
        if gone is None:
            raise _CannotSay(f"revision {revision} of page {page_id} is no longer in the database")
        note = "its text is not kept (the page was purged since, with its revisions)"
        if kind == "page.save":
            return [rec(REPAIR_ACTOR, _at_of(op_id), {"page_id": page_id, "base_revision": revision - 1, "body": b})
                    for b in _bodies_then(conn, related, page_id, seq)], note
        return [rec(REPAIR_ACTOR, _at_of(op_id), {"page_id": page_id,
                                                  "title": _title_then(conn, related, page_id, seq, gone)})], ""
    if kind == "page.move":
        page = _page(conn, page_id)
        at = at_if_last(page, "updated_at")
        if result.get("warnings"):   # salvaged: it asked for a parent that would not do, and stayed where it was
            asked = _salvaged_parents(conn, result)
            if not asked:
                raise _CannotSay("its outcome does not say where it was asked to go")
            return [rec(REPAIR_ACTOR, at, {"page_id": page_id, "parent_id": a}) for a in asked], ""
        return [rec(REPAIR_ACTOR, at, {"page_id": page_id, "parent_id": result.get("parent_id")})], ""
    if kind == "page.trash":
        page = _page(conn, page_id)
        out = []
        if page is not None and page["trashed_at"] is not None:
            out.append(rec(page["trashed_by"], page["trashed_at"], {"page_id": page_id}))
        out.append(rec(REPAIR_ACTOR, _at_of(op_id), {"page_id": page_id}))
        return out, ""
    if kind == "page.restore":
        return [rec(REPAIR_ACTOR, at_if_last(_page(conn, page_id), "updated_at"), {"page_id": page_id})], ""
    if kind == "page.purge":
        gone = _gone(conn, page_id)
        if gone is None:
            raise _CannotSay(f"no purge marker for page {page_id}")
        return [rec(gone["purged_by"], gone["purged_at"], {"page_id": page_id, "reason": gone["reason"]})], ""
    if kind == "page.labels":
        return [rec(REPAIR_ACTOR, at_if_last(_page(conn, page_id), "updated_at"),
                    {"page_id": page_id, "labels": list(result["labels"])})], ""
    if kind == "comment.add":
        comment_id = result["comment_id"]
        c = conn.execute("SELECT * FROM comments WHERE id = ?", (comment_id,)).fetchone()
        if c is not None:
            note = "" if c["edited_at"] is None else "its first text is not kept: the comment's text as edited since stands for it"
            return [rec(c["author"], c["created_at"], {"comment_id": comment_id, "page_id": c["page_id"], "body": c["body"]})], note
        authors = [later.record.actor for later in _later(conn, related, comment_id, seq, "comment.edit") if later.applied]
        return [rec(a, _at_of(op_id), {"comment_id": comment_id, "page_id": result["page_id"], "body": ""})
                for a in _unique(authors + [REPAIR_ACTOR])], "its text is not kept (the comment was removed since)"
    if kind == "comment.edit":
        comment_id = result["comment_id"]
        c = conn.execute("SELECT * FROM comments WHERE id = ?", (comment_id,)).fetchone()
        if c is not None:
            if not any(later.applied for later in _later(conn, related, comment_id, seq, "comment.edit")):
                return [rec(c["author"], c["edited_at"], {"comment_id": comment_id, "body": c["body"]})], ""
            return ([rec(c["author"], _at_of(op_id), {"comment_id": comment_id, "body": c["body"]})],
                    "its text is not kept: the comment's text as edited since stands for it")
        # removed since: whoever wrote it edited it (an edit by anyone else is refused)
        authors = [r.actor for r in related.about(comment_id) if r.type == "comment.add"]
        authors += [later.record.actor for later in _later(conn, related, comment_id, 0, "comment.edit") if later.applied]
        return [rec(a, _at_of(op_id), {"comment_id": comment_id, "body": ""}) for a in _unique(authors + [REPAIR_ACTOR])], (
            "its text is not kept (the comment was removed since)")
    if kind == "comment.remove":
        return [rec(REPAIR_ACTOR, _at_of(op_id), {"comment_id": result["comment_id"]})], ""
    if kind == "knowledge.read":
        r = conn.execute("SELECT * FROM knowledge_reads WHERE op_id = ?", (op_id,)).fetchone()
        if r is None:
            raise _CannotSay("its read is not in the database")
        payload = {"via": r["via"], "pages": json.loads(r["pages"]), "backend": r["backend"]}
        for key in ("query", "turn", "phase"):
            if r[key] is not None:
                payload[key] = r[key]
        return [rec(r["actor"], r["at"], payload)], ""
    if kind == "onboarding.mark":
        # its outcome names no agent; the marks now (an agent keeps its latest), the one made at this record's
        # instant first, and the agents a later mark overwrote
        at = _at_of(op_id)
        marks = conn.execute("SELECT agent_id, chain_hash, marked_at FROM agent_onboarding_markers "
                             "ORDER BY abs(marked_at - ?), agent_id", (at,)).fetchall()
        out = [rec(m["agent_id"], m["marked_at"], {"agent_id": m["agent_id"], "chain_hash": m["chain_hash"]})
               for m in marks if abs(int(m["marked_at"]) - at) <= 2]
        overwritten = _unique([r.payload.get("agent_id") for key, rs in related.by_id.items() for r in rs
                               if r.type == "onboarding.mark" and r.seq > seq])
        out += [rec(a, at, {"agent_id": a, "chain_hash": ""}) for a in overwritten if isinstance(a, str)]
        if not out:
            raise _CannotSay("an onboarding mark keeps only its latest instant")
        return out[:12], "" if len(out) == 1 else "its agent is not kept: the marks now stand for it"
    if kind == "container.declare":
        c = conn.execute("SELECT * FROM containers WHERE key = ?", (result["key"],)).fetchone()
        if c is None:
            raise _CannotSay(f"space {result['key']} is not in the database")
        at = _at_of(op_id)
        same = {"key": c["key"], "name": c["name"], "purpose": c["purpose"], "lead": c["lead"]}
        return [rec(REPAIR_ACTOR, at, same | {"chart_epoch": c["chart_epoch"]}),
                rec(REPAIR_ACTOR, at, same | {"chart_epoch": 0}),
                rec(REPAIR_ACTOR, at, {"key": c["key"], "name": c["key"], "purpose": "", "lead": None, "chart_epoch": 0})], ""
    raise _CannotSay(f"a {kind} record is not one a database can rebuild")


def _as_outcome(op: Any, seq: int, why: str) -> Record:
    """A record that changed nothing but its outcome row (refused, no-op, or an earlier repair's tombstone),
    given back as that very outcome: every node then stores the row the node that applied it stores."""
    result = json.loads(op["result"]) if op["result"] else {}
    outcome = {"type": op["type"], "status": op["status"], "code": op["code"], "reason": op["reason"], "result": result}
    return Record(LOST, op["op_id"], REPAIR_ACTOR, _at_of(op["op_id"]),
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
    try:
        candidates, note = _page_candidates(conn, op, related)
        return Given(candidates, "recovered", what, note=note)
    except _CannotSay as exc:
        return Given(what=what, why=str(exc))
    except (KeyError, TypeError, ValueError) as exc:
        return Given(what=what, why=f"its rows do not say what it was ({exc!r})")


def give_back_vector(conn: Any, seq: int, related: Related | None = None) -> Given:
    """Record `seq` of the vector log, when it was a vector.put whose vector the database still holds."""
    row = conn.execute("SELECT * FROM vectors WHERE seq = ?", (seq,)).fetchone()
    if row is None:
        return Given(why=f"it holds no vector filed by seq {seq} (a later put replaced it, or it was no put)")
    what = f"vector.put of {_page_name(conn, row['source_id'])} ({row['space']})"
    payload = {"source_id": row["source_id"], "kind": row["kind"], "space": row["space"], "container": row["container"],
               "revision": row["revision"], "digest": row["digest"], "bytes": row["bytes"], "bucket": row["bucket"],
               "dims": row["dims"], "vector": base64.b64encode(bytes(row["vector"])).decode("ascii")}
    from .vectors.records import DUTY_ACTOR

    return Given([Record.new("vector.put", DUTY_ACTOR, payload)], "recovered", what)


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
