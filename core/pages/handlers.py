"""The pages log's records as the apply engine (core/replica) applies them: one handler per record type, each
named by its kind's declaration (pages/kinds.py), which is where a new kind registers its handler.

Every decision that depends on order — a title claimed first-writer-wins, a save against a stale
revision, two moves that would make a cycle, a restore racing a purge — is taken here, from the
rows as they are when the record applies, so every node that applies the same log decides the same.
A record is idempotent by op_id: applying it twice changes nothing (the engine's DecidingApplier).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
import logging
from typing import Any

from ..log import Record
from ..replica.appliers import Decision, Handler, malformed
from ..replica.appliers import Noop as _Noop
from ..replica.appliers import Refuse as _Refuse
from ..store import Connection
from ..replica.kinds import LOST, LOST_OUTCOME
from ..replica.shapes import shape_problem
from .model import clean_title, normalise_title

log = logging.getLogger("crewlet.applier")


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

def container_declare(conn: Connection, rec: Record) -> dict[str, Any]:
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


def page_create(conn: Connection, rec: Record) -> dict[str, Any]:
    return _create(conn, rec, purges=True)


def page_create_none_purged(conn: Connection, rec: Record) -> dict[str, Any]:
    """`page_create` where no page was ever purged: the caller knows `deleted_pages` is empty and
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


def page_save(conn: Connection, rec: Record) -> dict[str, Any]:
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


def page_rename(conn: Connection, rec: Record) -> dict[str, Any]:
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


def page_move(conn: Connection, rec: Record) -> dict[str, Any]:
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


def page_trash(conn: Connection, rec: Record) -> dict[str, Any]:
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


def page_restore(conn: Connection, rec: Record) -> dict[str, Any]:
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


def purging(under_page: Sequence[str]) -> Handler:
    """The page.purge handler, deleting the rows under the page with `under_page` (statements taking the page's
    id, as pages/kinds.py `PURGED_WITH_PAGE` declares them per table) before the page's own row: handed in by the
    declaration, so this module never imports the declarations that import it."""
    statements = tuple(under_page)

    def page_purge(conn: Connection, rec: Record) -> dict[str, Any]:
        return _page_purge(conn, rec, statements)

    return page_purge


def _page_purge(conn: Connection, rec: Record, under_page: Sequence[str]) -> dict[str, Any]:
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
    for statement in under_page:
        conn.execute(statement, (row["id"],))
    conn.execute("DELETE FROM pages WHERE id = ?", (row["id"],))  # the tables declared BY_FOREIGN_KEY cascade
    conn.execute(
        "INSERT OR REPLACE INTO deleted_pages (page_id, container, title, purged_by, purged_at, reason) VALUES (?,?,?,?,?,?)",
        (row["id"], row["container"], row["title"], rec.actor, rec.at, p.get("reason", "")),
    )
    return {"page_id": row["id"]}


def page_labels(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    row = _live_page(conn, p["page_id"], allow_trashed=True)
    labels = sorted(set(json.loads(row["labels"])) | {str(x).lower() for x in p["labels"]})
    if labels == json.loads(row["labels"]):
        raise _Noop("labels already attached", {"page_id": row["id"]})
    conn.execute("UPDATE pages SET labels=?, updated_at=?, version=? WHERE id=?", (json.dumps(labels), rec.at, rec.seq, row["id"]))
    return {"page_id": row["id"], "labels": labels}


def comment_add(conn: Connection, rec: Record) -> dict[str, Any]:
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


def comment_edit(conn: Connection, rec: Record) -> dict[str, Any]:
    c = _comment(conn, rec.payload["comment_id"])
    if c["author"] != rec.actor:
        raise _Refuse("forbidden", f"comment {c['id']} is {c['author']}'s; only its author edits it")
    conn.execute("UPDATE comments SET body=?, edited_at=? WHERE id=?", (rec.payload["body"], rec.at, c["id"]))
    return {"comment_id": c["id"]}


def comment_remove(conn: Connection, rec: Record) -> dict[str, Any]:
    c = _comment(conn, rec.payload["comment_id"])
    conn.execute("DELETE FROM comments WHERE id=?", (c["id"],))
    return {"comment_id": c["id"]}


def knowledge_read(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    if not p.get("pages"):
        raise _Noop("a read of nothing is not a read")
    conn.execute("INSERT INTO knowledge_reads (op_id, actor, at, via, query, pages, backend, turn, phase) "
                 "VALUES (?,?,?,?,?,?,?,?,?)",
                 (rec.op_id, rec.actor, rec.at, p["via"], p.get("query"), json.dumps(p["pages"]),
                  p.get("backend", "native"), p.get("turn"), p.get("phase")))
    return {}


def onboarding_mark(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    conn.execute(
        "INSERT INTO agent_onboarding_markers (agent_id, chain_hash, marked_at) VALUES (?,?,?) "
        "ON CONFLICT(agent_id) DO UPDATE SET chain_hash=excluded.chain_hash, marked_at=excluded.marked_at",
        (p["agent_id"], p["chain_hash"], rec.at),
    )
    return {}


def lost(rec: Record) -> Decision:
    """A tombstone a repair wrote where record `seq` was: "record N was lost" — or, when a database that
    applied a refused or no-op record gave back the outcome it was given, that very outcome (every node then
    stores the same row as the node that applied the original). A verdict: it writes no row of its own."""
    p = rec.payload
    kept = p.get("outcome")
    if isinstance(kept, dict):
        problem = shape_problem(kept, LOST_OUTCOME)
        if problem is not None:
            raise malformed(rec, f"its outcome: {problem}")
        result = kept.get("result")
        return Decision(rec.op_id, rec.seq, str(kept["type"]), str(kept["status"]), kept.get("code"), kept.get("reason"),
                        dict(result) if isinstance(result, dict) else {})
    why = str(p.get("why") or "damaged in the log")
    was = f" ({p['was']})" if p.get("was") else ""
    return Decision(rec.op_id, rec.seq, LOST, "lost", "lost", f"record {rec.seq} was lost from the log{was}: {why}")
