"""The applier: records, in log order, into the node's SQLite.

Every decision that depends on order — a title claimed first-writer-wins, a save against a stale
revision, two moves that would make a cycle, a restore racing a purge — is taken here, from the
rows as they are when the record applies, so every node that applies the same log decides the same.
A record is idempotent by op_id: applying it twice changes nothing.
"""
from __future__ import annotations

import gc
import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii as _escape  # what json.dumps writes a str with
from typing import Any

from ..log import FileLog, LogCorrupt, LogDamage, Record
from ..log.check import Applied
from ..log.framing import Frame, frame_digest
from ..store import Connection, sqlite3, transaction
from .model import clean_title, normalise_title

log = logging.getLogger("crewlet.applier")

APPLIER = "applier"


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


class _Refuse(Exception):
    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason = code, reason


class _Noop(Exception):
    def __init__(self, reason: str, result: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.reason, self.result = reason, result or {}


# -- helpers ---------------------------------------------------------------------------------

# the columns a handler reads of a page (not `*`: every column read is a Python object built), and the
# body only for the handlers that need it (a save compares it, a save or a rename keeps it in the
# revision it replaces): a body can be megabytes of overflow pages
_PAGE = "SELECT id, container, address, title, revision, parent_id, saved_by, trashed_at, labels FROM pages WHERE id = ?"
_PAGE_AND_BODY = ("SELECT id, container, address, title, revision, parent_id, saved_by, trashed_at, labels, body "
                  "FROM pages WHERE id = ?")


def _page(conn: Connection, page_id: str, *, body: bool = False) -> Any:
    return conn.execute(_PAGE_AND_BODY if body else _PAGE, (page_id,)).fetchone()


def _live_page(conn: Connection, page_id: str, *, allow_trashed: bool = False, body: bool = False) -> Any:
    row = _page(conn, page_id, body=body)
    if row is None:
        marker = conn.execute("SELECT title, purged_by FROM deleted_pages WHERE page_id = ?", (page_id,)).fetchone()
        if marker:
            raise _Refuse("purged", f"page {page_id} ('{marker['title']}') was purged by {marker['purged_by']}")
        raise _Refuse("not_found", f"no page {page_id}")
    if row["trashed_at"] is not None and not allow_trashed:
        raise _Refuse("trashed", f"page {row['container']}/{row['title']} is in the trash — restore it first")
    return row


def _is_descendant_or_self(conn: Connection, candidate: str, page_id: str) -> bool:
    """Is `candidate` the page itself or somewhere beneath it? Walks up from the candidate."""
    seen: set[str] = set()
    cur: str | None = candidate
    while cur is not None and cur not in seen:
        if cur == page_id:
            return True
        seen.add(cur)
        row = conn.execute("SELECT parent_id FROM pages WHERE id = ?", (cur,)).fetchone()
        cur = row["parent_id"] if row else None
    return False


_PARENT = "SELECT container, title, trashed_at FROM pages WHERE id = ?"


def parent_problem(conn: Connection, container: str, parent_id: str | None, page_id: str | None) -> str | None:
    """Why `parent_id` cannot hold a page of `container` (None when it can). Shared by the writer's
    check and the applier's salvage so the two never disagree."""
    if parent_id is None:
        return None
    row = conn.execute(_PARENT, (parent_id,)).fetchone()
    if row is None:
        return f"parent_id {parent_id} names no page"
    # the field is named (the spec), the pages by their addresses as a person typed them (ids are the log's)
    parent = f"{row['container']}/{row['title']}"
    if row["container"] != container:
        return f"parent_id names {parent}, which is in {row['container']}, not {container}"
    if row["trashed_at"] is not None:
        return f"parent_id names {parent}, which is in the trash"
    if page_id is not None and _is_descendant_or_self(conn, parent_id, page_id):
        if parent_id == page_id:
            return f"parent_id names {parent} itself: a page filed under itself would make a cycle"
        page = conn.execute(_PARENT, (page_id,)).fetchone()
        moved = f"{page['container']}/{page['title']}" if page is not None else page_id
        return f"parent_id names {parent}, which is beneath {moved}: filing {moved} there would make a cycle"
    return None


def _add_revision(conn: Connection, page_id: str, revision: int, title: str, author: str,
                  at: int, kind: str, message: str | None, *, previous_body: str | None = None) -> None:
    """Record revision N. The current revision's body is the page's own (stored once, not twice: an
    import of 14k pages would otherwise write every body a third time); the revision it replaces
    takes its body into its own row here."""
    if previous_body is not None:
        conn.execute("UPDATE revisions SET body = ? WHERE page_id = ? AND revision = ?",
                     (previous_body, page_id, revision - 1))
    conn.execute(
        "INSERT INTO revisions (page_id, revision, title, body, author, at, kind, message) VALUES (?,?,?,NULL,?,?,?,?)",
        (page_id, revision, title, author, at, kind, message or None),
    )


def _claim(conn: Connection, container: str, address: str, page_id: str) -> None:
    holder = conn.execute(
        "SELECT id, title, trashed_at FROM pages WHERE container = ? AND address = ? AND id != ?",
        (container, address, page_id),
    ).fetchone()
    if holder:
        where = " (in the trash: restore or purge it)" if holder["trashed_at"] is not None else ""
        raise _Refuse("title_taken", f"{container}/{holder['title']} already exists{where} — choose another title")


# -- one handler per record type -------------------------------------------------------------

def _container_declare(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    row = conn.execute("SELECT * FROM containers WHERE key = ?", (p["key"],)).fetchone()
    epoch = int(p.get("chart_epoch", 0))
    if row is not None:
        if epoch < row["chart_epoch"]:
            raise _Noop("a configuration activated later already named this container")
        if (row["name"], row["purpose"], row["lead"], row["chart_epoch"]) == (p["name"], p.get("purpose", ""), p.get("lead"), epoch):
            raise _Noop("the container already says this")
    conn.execute(
        "INSERT INTO containers (key, name, purpose, lead, chart_epoch) VALUES (?,?,?,?,?) "
        "ON CONFLICT(key) DO UPDATE SET name=excluded.name, purpose=excluded.purpose, lead=excluded.lead, "
        "chart_epoch=excluded.chart_epoch",
        (p["key"], p["name"], p.get("purpose", ""), p.get("lead"), epoch),
    )
    return {"key": p["key"]}


def _page_create(conn: Connection, rec: Record) -> dict[str, Any]:
    return _create(conn, rec, purges=True)


def _page_create_none_purged(conn: Connection, rec: Record) -> dict[str, Any]:
    """`_page_create` where no page was ever purged: the caller knows `deleted_pages` is empty and
    stays so (no page.purge in the records it applies), so the lookup that would refuse a purged id
    is left out (one statement of three a create)."""
    return _create(conn, rec, purges=False)


def _create(conn: Connection, rec: Record, *, purges: bool) -> dict[str, Any]:
    p = rec.payload
    page_id, container = p["page_id"], p["container"]
    title = clean_title(p["title"])
    address = normalise_title(title)
    parent_id = p.get("parent_id")
    body = p.get("body", "")
    raw_labels = p.get("labels", [])
    labels = "[]" if raw_labels == [] else json.dumps(sorted({str(x).lower() for x in raw_labels}))
    warnings: list[dict[str, str]] = []
    # A purged id is refused first (a lookup in a table that is mostly empty), then one INSERT claims the
    # id and the address; only a create that inserted nothing asks why (the same three refusals, in the
    # same order). INSERT … VALUES, not INSERT … SELECT … WHERE NOT EXISTS: the SELECT form measured
    # 4 µs a row slower. The parent is checked before the INSERT (it writes nothing) and its salvage
    # said only once the page is created.
    if purges and conn.execute(_PURGED, (page_id,)).fetchone() is not None:
        raise _Refuse("purged", f"page {page_id} was purged; it cannot be created again")
    problem = parent_problem(conn, container, parent_id, None) if parent_id is not None else None
    if problem:
        parent_id = None  # the writer checked it; a race since then files the page at the top, identically everywhere
    inserted = conn.execute(_INSERT_PAGE, (page_id, container, address, title, body, parent_id, rec.actor, rec.at,
                                           labels, rec.seq)).rowcount
    if inserted != 1:
        _refuse_create(conn, page_id, container, address)
        raise RuntimeError(f"page.create {page_id} inserted nothing and no rule refused it")  # pragma: no cover
    if problem:
        warnings.append({"code": "pages_parent_salvaged",
                         "message": f"{problem}; the page was created at the top of {container}"})
        log.warning("pages_parent_salvaged page=%s: %s", page_id, problem)
    _add_revision(conn, page_id, 1, title, rec.actor, rec.at, "create", p.get("message"))
    return {"page_id": page_id, "revision": 1, "warnings": warnings}


_PURGED = "SELECT 1 FROM deleted_pages WHERE page_id = ?"
_INSERT_PAGE = (
    "INSERT INTO pages (id, container, address, title, body, revision, parent_id, created_by, created_at, "
    "saved_by, saved_at, updated_at, trashed_at, trashed_by, labels, version) "
    "VALUES (?1,?2,?3,?4,?5,1,?6,?7,?8,?7,?8,?8,NULL,NULL,?9,?10) ON CONFLICT DO NOTHING")


def _refuse_create(conn: Connection, page_id: str, container: str, address: str) -> None:
    """Refuse a create whose id was purged, whose id exists, or whose address is held — in that order."""
    purged, exists, holder = conn.execute(
        "SELECT EXISTS(SELECT 1 FROM deleted_pages WHERE page_id = ?1), EXISTS(SELECT 1 FROM pages WHERE id = ?1), "
        "EXISTS(SELECT 1 FROM pages WHERE container = ?2 AND address = ?3 AND id != ?1)",
        (page_id, container, address)).fetchone()
    if purged:
        raise _Refuse("purged", f"page {page_id} was purged; it cannot be created again")
    if exists:
        raise _Refuse("exists", f"page {page_id} already exists")
    if holder:
        _claim(conn, container, address, page_id)  # names the holder in the refusal


def _page_save(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    row = _live_page(conn, p["page_id"], body=True)
    base, current = int(p["base_revision"]), row["revision"]
    if base != current:
        raise _Refuse(
            "stale_revision",
            f"{row['container']}/{row['title']} is at revision {current}, not {base}: "
            f"{row['saved_by']} saved since — merge your text into revision {current} and save again",
        )
    body = p["body"]
    if body == row["body"]:
        raise _Noop("the body is unchanged", {"page_id": row["id"], "revision": current})
    revision = current + 1
    conn.execute(
        "UPDATE pages SET body=?, revision=?, saved_by=?, saved_at=?, updated_at=?, version=? WHERE id=?",
        (body, revision, rec.actor, rec.at, rec.at, rec.seq, row["id"]),
    )
    _add_revision(conn, row["id"], revision, row["title"], rec.actor, rec.at, "save", p.get("message"),
                  previous_body=row["body"])
    return {"page_id": row["id"], "revision": revision}


def _page_rename(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    row = _live_page(conn, p["page_id"], body=True)
    title = clean_title(p["title"])
    if title == row["title"]:
        raise _Noop("the page already has this title", {"page_id": row["id"], "revision": row["revision"]})
    address = normalise_title(title)
    if address != row["address"]:
        _claim(conn, row["container"], address, row["id"])
    revision = row["revision"] + 1
    conn.execute(
        "UPDATE pages SET title=?, address=?, revision=?, saved_by=?, saved_at=?, updated_at=?, version=? WHERE id=?",
        (title, address, revision, rec.actor, rec.at, rec.at, rec.seq, row["id"]),
    )
    _add_revision(conn, row["id"], revision, title, rec.actor, rec.at, "rename", p.get("message"),
                  previous_body=row["body"])
    return {"page_id": row["id"], "revision": revision, "old_title": row["title"]}


def _page_move(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    row = _live_page(conn, p["page_id"])
    parent_id = p.get("parent_id")
    if parent_id == row["parent_id"]:
        raise _Noop("the page is already there", {"page_id": row["id"]})
    problem = parent_problem(conn, row["container"], parent_id, row["id"])
    if problem:
        # two sound moves raced (A under B here, B under A elsewhere): leave the page where it was
        log.warning("pages_parent_salvaged page=%s: %s", row["id"], problem)
        return {"page_id": row["id"], "parent_id": row["parent_id"], "warnings": [
            {"code": "pages_parent_salvaged", "message": f"{problem}; the page was left where it was"}]}
    # a move is not a change to what the page says: saved_at stays
    conn.execute("UPDATE pages SET parent_id=?, updated_at=?, version=? WHERE id=?", (parent_id, rec.at, rec.seq, row["id"]))
    return {"page_id": row["id"], "parent_id": parent_id}


def live_children(conn: Connection, page_id: str) -> int:
    return conn.execute("SELECT count(*) FROM pages WHERE parent_id = ? AND trashed_at IS NULL", (page_id,)).fetchone()[0]


def _page_trash(conn: Connection, rec: Record) -> dict[str, Any]:
    row = _live_page(conn, rec.payload["page_id"], allow_trashed=True)
    if row["trashed_at"] is not None:
        raise _Noop("the page is already in the trash", {"page_id": row["id"]})
    n = live_children(conn, row["id"])
    if n:
        # a trashed page's children would be pages no walk of the container reaches
        raise _Refuse("has_children", f"{row['container']}/{row['title']} has {n} page(s) under it — move or trash them first")
    conn.execute("UPDATE pages SET trashed_at=?, trashed_by=?, updated_at=?, version=? WHERE id=?",
                 (rec.at, rec.actor, rec.at, rec.seq, row["id"]))
    return {"page_id": row["id"]}


def _page_restore(conn: Connection, rec: Record) -> dict[str, Any]:
    row = _live_page(conn, rec.payload["page_id"], allow_trashed=True)
    if row["trashed_at"] is None:
        raise _Noop("the page is not in the trash", {"page_id": row["id"]})
    if row["parent_id"] is not None:
        parent = _page(conn, row["parent_id"])
        if parent is not None and parent["trashed_at"] is not None:
            raise _Refuse("parent_trashed", f"its parent '{parent['title']}' ({parent['id']}) is in the trash — restore that first")
    conn.execute("UPDATE pages SET trashed_at=NULL, trashed_by=NULL, updated_at=?, version=? WHERE id=?",
                 (rec.at, rec.seq, row["id"]))
    return {"page_id": row["id"]}


def _page_purge(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    row = _live_page(conn, p["page_id"], allow_trashed=True)
    cutoff = p.get("cutoff")
    if row["trashed_at"] is None:
        if cutoff is not None:
            # the reaper chose it from the trash; a restore landed first
            raise _Refuse("not_due", f"{row['container']}/{row['title']} was restored before this purge; not purged")
        raise _Refuse("not_trashed", f"{row['container']}/{row['title']} is not in the trash — trash it first")
    if cutoff is not None and row["trashed_at"] > int(cutoff):
        # decided in the snapshot this record applies in: a restore (or a re-trash) landed first
        raise _Refuse("not_due", f"{row['container']}/{row['title']} was trashed after the cutoff; not purged")
    # its children go to its own parent (or the top) rather than pointing at nothing
    conn.execute("UPDATE pages SET parent_id=?, version=? WHERE parent_id=?", (row["parent_id"], rec.seq, row["id"]))
    conn.execute("DELETE FROM page_links WHERE src = ?", (row["id"],))
    conn.execute("DELETE FROM pages WHERE id = ?", (row["id"],))  # revisions and comments cascade
    conn.execute(
        "INSERT OR REPLACE INTO deleted_pages (page_id, container, title, purged_by, purged_at, reason) VALUES (?,?,?,?,?,?)",
        (row["id"], row["container"], row["title"], rec.actor, rec.at, p.get("reason", "")),
    )
    return {"page_id": row["id"]}


def _page_labels(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    row = _live_page(conn, p["page_id"], allow_trashed=True)
    labels = sorted(set(json.loads(row["labels"])) | {str(x).lower() for x in p["labels"]})
    if labels == json.loads(row["labels"]):
        raise _Noop("labels already attached", {"page_id": row["id"]})
    conn.execute("UPDATE pages SET labels=?, updated_at=?, version=? WHERE id=?", (json.dumps(labels), rec.at, rec.seq, row["id"]))
    return {"page_id": row["id"], "labels": labels}


def _comment_add(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    row = _live_page(conn, p["page_id"])
    if conn.execute("SELECT 1 FROM comments WHERE id = ?", (p["comment_id"],)).fetchone():
        raise _Refuse("exists", f"comment {p['comment_id']} already exists")
    conn.execute("INSERT INTO comments (id, page_id, author, body, created_at) VALUES (?,?,?,?,?)",
                 (p["comment_id"], row["id"], rec.actor, p["body"], rec.at))
    return {"comment_id": p["comment_id"], "page_id": row["id"]}


def _comment(conn: Connection, comment_id: str) -> Any:
    c = conn.execute("SELECT * FROM comments WHERE id = ?", (comment_id,)).fetchone()
    if c is None:
        raise _Refuse("not_found", f"no comment {comment_id}")
    return c


def _comment_edit(conn: Connection, rec: Record) -> dict[str, Any]:
    c = _comment(conn, rec.payload["comment_id"])
    if c["author"] != rec.actor:
        raise _Refuse("forbidden", f"comment {c['id']} is {c['author']}'s; only its author edits it")
    conn.execute("UPDATE comments SET body=?, edited_at=? WHERE id=?", (rec.payload["body"], rec.at, c["id"]))
    return {"comment_id": c["id"]}


def _comment_remove(conn: Connection, rec: Record) -> dict[str, Any]:
    c = _comment(conn, rec.payload["comment_id"])
    conn.execute("DELETE FROM comments WHERE id=?", (c["id"],))
    return {"comment_id": c["id"]}


def _knowledge_read(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    if not p.get("pages"):
        raise _Noop("a read of nothing is not a read")
    conn.execute("INSERT INTO knowledge_reads (op_id, actor, at, via, query, pages, backend, turn, phase) "
                 "VALUES (?,?,?,?,?,?,?,?,?)",
                 (rec.op_id, rec.actor, rec.at, p["via"], p.get("query"), json.dumps(p["pages"]),
                  p.get("backend", "native"), p.get("turn"), p.get("phase")))
    return {}


def _onboarding_mark(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    conn.execute(
        "INSERT INTO agent_onboarding_markers (agent_id, chain_hash, marked_at) VALUES (?,?,?) "
        "ON CONFLICT(agent_id) DO UPDATE SET chain_hash=excluded.chain_hash, marked_at=excluded.marked_at",
        (p["agent_id"], p["chain_hash"], rec.at),
    )
    return {}


HANDLERS: dict[str, Callable[[Connection, Record], dict[str, Any]]] = {
    "container.declare": _container_declare,
    "page.create": _page_create,
    "page.save": _page_save,
    "page.rename": _page_rename,
    "page.move": _page_move,
    "page.trash": _page_trash,
    "page.restore": _page_restore,
    "page.purge": _page_purge,
    "page.labels": _page_labels,
    "comment.add": _comment_add,
    "comment.edit": _comment_edit,
    "comment.remove": _comment_remove,
    "knowledge.read": _knowledge_read,
    "onboarding.mark": _onboarding_mark,
}


# what a chunk with no page.purge in it applies with while no page was ever purged
_HANDLERS_NONE_PURGED = {**HANDLERS, "page.create": _page_create_none_purged}


def _handlers_for(conn: Connection, records: Sequence[Record]) -> dict[str, Callable[[Connection, Record], dict[str, Any]]]:
    if any(r.type == "page.purge" for r in records) or conn.execute(_ANY_PURGED).fetchone()[0]:
        return HANDLERS
    return _HANDLERS_NONE_PURGED


_ANY_PURGED = "SELECT EXISTS(SELECT 1 FROM deleted_pages)"


# Exceptions a malformed payload raises (a missing key, a list where text belongs, an int past 64 bits
# that SQLite refuses): the record is refused as malformed, never half-applied, and never stops the log.
_MALFORMED = (KeyError, TypeError, ValueError, OverflowError,
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


LOST = "log.lost"   # a repair's tombstone (core/recover.py)


def _lost(rec: Record) -> Decision:
    """A tombstone a repair wrote where record `seq` was: "record N was lost" — or, when a database that
    applied a refused or no-op record gave back the outcome it was given, that very outcome (every node then
    stores the same row as the node that applied the original)."""
    p = rec.payload
    kept = p.get("outcome")
    if isinstance(kept, dict):
        result = kept.get("result")
        return Decision(rec.op_id, rec.seq, str(kept["type"]), str(kept["status"]), kept.get("code"), kept.get("reason"),
                        dict(result) if isinstance(result, dict) else {})
    why = str(p.get("why") or "damaged in the log")
    was = f" ({p['was']})" if p.get("was") else ""
    return Decision(rec.op_id, rec.seq, LOST, "lost", "lost", f"record {rec.seq} was lost from the log{was}: {why}")


def _decide(conn: Connection, rec: Record, handlers: dict[str, Callable[[Connection, Record], dict[str, Any]]] = HANDLERS
            ) -> Decision:
    """Run a record's handler. A handler refuses (or finds nothing to do) BEFORE its first write, so a
    _Refuse or _Noop leaves no row behind and needs no savepoint; anything else propagates."""
    if rec.type == LOST:
        return _lost(rec)
    handler = handlers.get(rec.type)
    try:
        if handler is None:
            raise _Refuse("unknown_record", f"record type '{rec.type}' is not known to this build — upgrade crewlet")
        return Decision(rec.op_id, rec.seq, rec.type, "applied", result=handler(conn, rec))
    except _Refuse as r:
        return Decision(rec.op_id, rec.seq, rec.type, "refused", r.code, r.reason)
    except _Noop as n:
        return Decision(rec.op_id, rec.seq, rec.type, "noop", None, n.reason, n.result)


def _decide_carefully(conn: Connection, rec: Record) -> Decision:
    """As `_decide`, inside a savepoint of its own, so a malformed record's partial writes are undone."""
    conn.execute("SAVEPOINT rec")
    try:
        outcome = _decide(conn, rec)
    except _MALFORMED as exc:
        conn.execute("ROLLBACK TO rec")
        outcome = Decision(rec.op_id, rec.seq, rec.type, "refused", "malformed", f"malformed {rec.type} record: {exc!r}")
    conn.execute("RELEASE rec")
    return outcome


def apply_record(conn: Connection, rec: Record) -> Decision | None:
    """Apply one record inside the caller's transaction. None when its op_id was applied already."""
    if conn.execute("SELECT 1 FROM applied_ops WHERE op_id = ?", (rec.op_id,)).fetchone():
        return None
    outcome = _decide_carefully(conn, rec)
    conn.execute(_INSERT_OUTCOME, _outcome_row(outcome))
    return outcome


def _applied_already(conn: Connection, records: Sequence[Record]) -> set[str]:
    """The op_ids among `records` this database applied before (one query, whatever the batch size)."""
    ids = json.dumps([r.op_id for r in records])
    return {row[0] for row in conn.execute(
        "SELECT op_id FROM applied_ops WHERE op_id IN (SELECT value FROM json_each(?))", (ids,))}


def apply_batch(conn: Connection, records: Sequence[Record], *, careful: bool = False) -> list[Decision]:
    """Apply records in order inside the caller's transaction; returns the outcome of each record
    decided here (a record whose op_id was applied before — earlier, or earlier in this batch — is
    skipped, as `apply_record` skips it).

    The fast path runs each handler with no savepoint of its own (handlers refuse before writing) and
    stores every outcome with one executemany. A malformed record — the one case that can leave a
    handler's writes half done — rolls the batch back and applies it again record by record, each in
    its own savepoint (`careful`): the same outcomes `apply_record` decides, one at a time. Here the
    batch is rolled back to a savepoint; `catch_up` instead rolls back its whole transaction and runs
    the batch again carefully, so the fast path holds no savepoint open (a savepoint spanning a batch
    makes SQLite journal every page the batch touches, which costs more than it saves on a large log)."""
    if not records:
        return []
    done = _applied_already(conn, records)
    if careful:
        outcomes = _apply_each(conn, records, set(done), _decide_carefully)
    else:
        conn.execute("SAVEPOINT batch")
        try:
            outcomes = _apply_each(conn, records, set(done), _decide)
        except _MALFORMED:
            conn.execute("ROLLBACK TO batch")
            outcomes = _apply_each(conn, records, set(done), _decide_carefully)
        conn.execute("RELEASE batch")
    conn.executemany(_INSERT_OUTCOME, [_outcome_row(o) for o in outcomes])
    return outcomes


def _apply_fast(conn: Connection, records: Sequence[Record]) -> list[Decision]:
    """The fast path with no savepoint: a malformed record raises, and the caller's transaction must be
    rolled back and the batch applied again with `apply_batch(..., careful=True)`."""
    done = _applied_already(conn, records)
    handlers = _handlers_for(conn, records)
    outcomes = _apply_each(conn, records, set(done), lambda c, rec: _decide(c, rec, handlers))
    conn.executemany(_INSERT_OUTCOME, [_outcome_row(o) for o in outcomes])
    return outcomes


def _apply_each(conn: Connection, records: Sequence[Record], done: set[str],
                decide: Callable[[Connection, Record], Decision]) -> list[Decision]:
    outcomes = []
    for rec in records:
        if rec.op_id in done:
            continue
        done.add(rec.op_id)
        outcomes.append(decide(conn, rec))
    return outcomes


def position(conn: Connection, name: str = APPLIER) -> tuple[int, int]:
    row = conn.execute("SELECT seq, byte_offset FROM log_position WHERE name = ?", (name,)).fetchone()
    return (row["seq"], row["byte_offset"]) if row else (0, 0)


def applied_position(conn: Connection, name: str = APPLIER) -> Applied:
    """Where this database is on a log, with the start and digest of the last frame it applied
    (None for a position stored before they were kept)."""
    row = conn.execute("SELECT * FROM log_position WHERE name = ?", (name,)).fetchone()
    if row is None:
        return Applied()
    keys = row.keys()
    start = row["frame_offset"] if "frame_offset" in keys else None
    digest = row["digest"] if "digest" in keys else None
    return Applied(row["seq"], row["byte_offset"], start, digest)


def store_position(conn: Connection, seq: int, frame: Frame, name: str = APPLIER) -> None:
    """Inside the transaction that applied the record of `frame`: the position, and what the
    frame was, so an open can tell the log still holds that very record there."""
    conn.execute(
        "INSERT INTO log_position (name, seq, byte_offset, frame_offset, digest) VALUES (?,?,?,?,?) "
        "ON CONFLICT(name) DO UPDATE SET seq=excluded.seq, byte_offset=excluded.byte_offset, "
        "frame_offset=excluded.frame_offset, digest=excluded.digest",
        (name, seq, frame.end, frame.offset, frame_digest(frame.body)),
    )


# How much one catch_up transaction holds. Each commit writes every page the transaction dirtied,
# and a log's records land all over the tables and indexes (page ids and op_ids are random), so a
# small transaction writes the same index pages again and again: at 2,000 records a transaction a
# 100,000-record log wrote 2 GB for a 106 MB database, at 20,000 about 500 MB. A transaction also
# ends after TXN_SECONDS, so another writer waiting for the lock waits about that long at most.
TXN_RECORDS = 20_000
TXN_SECONDS = 1.0
# Records are decoded and applied a chunk at a time inside a transaction: memory stays bounded
# whatever the transaction holds (a chunk ends at CHUNK_RECORDS or once CHUNK_BYTES of bodies).
CHUNK_RECORDS = 2_000
CHUNK_BYTES = 16 * 1024 * 1024

Pairs = Iterator[tuple[Record, Frame]]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Automatic garbage collection off while records are applied: a record allocates a dozen
    containers (its payload, its outcome, their rows) that reference counting frees, and the collector
    they set off found nothing to collect yet took 4% of a batch (more in the app, whose heap it walks).
    Turned back on only by the caller that turned it off (nested or concurrent users leave it be)."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _as_decoded(rec: Record) -> bool:
    """Is `rec` exactly what decoding its own body gives back, so applying it is applying the body?
    True for the records writers build — every field of its exact JSON type, a flat payload of text,
    numbers, booleans, nulls and lists of text — where the JSON round trip is the identity (key order
    aside, which no handler reads in a flat payload). Anything else (a tuple, a str or int subclass,
    nested objects) is decoded from its body, as a reader of the file would."""
    if (type(rec.type) is not str or type(rec.op_id) is not str or type(rec.actor) is not str
            or type(rec.at) is not int or type(rec.version) is not int or type(rec.node) is not str
            or type(rec.payload) is not dict):
        return False
    for key, value in rec.payload.items():
        kind = type(value)
        if type(key) is not str:
            return False
        if kind is str or kind is int or value is None or kind is bool or kind is float:
            continue
        if kind is list and all(type(item) is str for item in value):
            continue
        return False
    return True


def _past(flog: FileLog, seq: int, offset: int, known: Sequence[tuple[Record, Frame]] | None) -> Pairs:
    """Every (record, frame) past the position (seq, offset). `known` are the records this process just
    appended with their frames, still in memory: while they continue the log exactly from the position
    they are applied from memory — the record itself when it is what its body decodes to
    (`_as_decoded`), else decoded from the frame's bytes, the very bytes a reader of the file gets —
    instead of read back; whatever lies past them, or any position they do not continue, is read from
    the log with every check a read makes."""
    if known:
        i = seq + 1 - known[0][1].seq
        if 0 <= i < len(known) and known[i][1].offset == offset:
            from_body = Record.from_body
            for rec, frame in known[i:]:
                if not _as_decoded(rec):
                    try:
                        rec = from_body(frame.body, frame.seq)
                    except ValueError as exc:
                        raise LogCorrupt(flog.path, frame.offset, frame.seq, f"undecodable record body: {exc}") from exc
                yield rec, frame
            seq, offset = known[-1][1].seq, known[-1][1].end
    yield from flog.read_frames(after=seq, start_offset=offset, exact=True)


def _chunk(pairs: Pairs, limit: int) -> tuple[list[Record], Frame | None, bool, LogDamage | None]:
    """Up to `limit` records (fewer once CHUNK_BYTES of bodies are read), the frame of the last, whether
    the log ended, and the damage reading stopped at (the records before it are good and are applied)."""
    records: list[Record] = []
    last: Frame | None = None
    size = 0
    try:
        for rec, frame in pairs:
            records.append(rec)
            last = frame
            size += len(frame.body)
            if len(records) >= limit or size >= CHUNK_BYTES:
                return records, last, False, None
    except LogDamage as exc:
        return records, last, True, exc
    return records, last, True, None


def catch_up(conn: Connection, flog: FileLog, *, batch: int = TXN_RECORDS,
             progress: Callable[[int], None] | None = None,
             outcomes: dict[str, Decision] | None = None, name: str = APPLIER,
             apply: Callable[[Connection, Record], Decision | None] | None = None,
             appended: Sequence[tuple[Record, Frame]] | None = None) -> int:
    """Apply every record past this node's position, at most `batch` records a transaction (and
    TXN_SECONDS), storing the new position in the same transaction. Returns how many records were
    applied. `outcomes`, when given, collects what was decided for each op_id applied here (a writer
    reads its answer without a query). `appended`, the records a writer just appended with their
    frames (`FileLog.append_frames`), are applied from memory when they continue from the position
    (see `_past`).

    Damage in the log (a bad frame, a seq that skips, repeats or goes backwards) stops the applier
    there: every good record before it is applied and committed, then the damage is raised.

    A malformed record makes the fast path (no savepoint) give up: the transaction is rolled back and
    run again with the chunk that held it applied record by record (`apply_batch(careful=True)`).

    `name` and `apply` serve another log the same way (the vector log: its own position row, its own
    records, applied one at a time by `apply`); the pages log is applied a chunk at a time."""
    with gc_paused():
        return _catch_up(conn, flog, batch, progress, outcomes, name, apply, appended)


def _catch_up(conn: Connection, flog: FileLog, batch: int, progress: Callable[[int], None] | None,
              outcomes: dict[str, Decision] | None, name: str,
              apply: Callable[[Connection, Record], Decision | None] | None,
              appended: Sequence[tuple[Record, Frame]] | None) -> int:
    applied = 0
    careful: list[tuple[int, int]] = []  # seq ranges (first, last) of chunks that held a malformed record
    chunk_limit = max(1, min(batch, CHUNK_RECORDS))
    while True:
        damage: LogDamage | None = None
        decided_here: list[Decision] = []
        ended = False
        n = 0
        try:
            with transaction(conn):
                seq, offset = position(conn, name)
                pairs = _past(flog, seq, offset, appended)
                started = time.monotonic()
                last: Frame | None = None
                while True:
                    records, end, ended, damage = _chunk(pairs, min(chunk_limit, batch - n))
                    if not records:
                        break
                    first, final = records[0].seq, records[-1].seq
                    if apply is not None:
                        decided_here += [o for o in (apply(conn, rec) for rec in records) if o is not None]
                    elif any(a <= final and first <= b for a, b in careful):
                        decided_here += apply_batch(conn, records, careful=True)
                    else:
                        try:
                            decided_here += _apply_fast(conn, records)
                        except _MALFORMED:
                            careful.append((first, final))
                            raise _GiveUp() from None
                    n += len(records)
                    last = end
                    if ended or n >= batch or time.monotonic() - started >= TXN_SECONDS:
                        break
                if last is not None:
                    store_position(conn, last.seq, last, name)
        except _GiveUp:
            continue  # rolled back: the same records again, that chunk record by record
        # only once committed is an outcome decided (a COMMIT a full disk refuses decides nothing)
        if outcomes is not None:
            outcomes.update((o.op_id, o) for o in decided_here)
        applied += n
        if progress and n:
            progress(n)
        if damage is not None:
            raise damage
        if ended or n == 0:
            return applied


class _GiveUp(Exception):
    """The fast path met a malformed record: roll the transaction back and apply its chunk carefully."""


def outcome_of(conn: Connection, op_id: str) -> Decision | None:
    row = conn.execute("SELECT * FROM applied_ops WHERE op_id = ?", (op_id,)).fetchone()
    if row is None:
        return None
    return Decision(row["op_id"], row["seq"], row["type"], row["status"], row["code"], row["reason"],
                   json.loads(row["result"]) if row["result"] else {})
