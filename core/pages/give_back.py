"""How a repair gives back each pages-log record kind the log lost, from a database that applied it.

One function per kind, named by its declaration (pages/kinds.py `give_back`), each the `GiveBack` of
core/replica/kinds.py: `(conn, seq, op, related) -> (candidates, note)`, where `op` is the record's outcome row
(applied_ops) and `related` the log's intact records about the same things. A record is rebuilt as of its seq —
the rows as they were when it applied, not as they are now — with the payload its builder (records.py) would have
written and its actor and instant read off the rows it wrote; the candidates come most likely first, and the
repair's replay proof chooses among them (core/repair.py). `CannotSay` when the rows do not say what it was.

A new kind (an entry under a page) adds one function here reading its own table back, and names it in its
declaration; core/recover.py dispatches on the declarations and never changes.
"""
from __future__ import annotations

import json
import re
from typing import Any

from ..log import Record
from ..replica.kinds import REPAIR_ACTOR, CannotSay, Related, at_of, later, unique
from . import records as build

Candidates = tuple[list[Record], str]
PURGED_SINCE = "its text is not kept (the page was purged since, with its revisions)"


# -- what the rows say ---------------------------------------------------------------------------------

def _outcome(op: Any, *, salvaged: bool = False) -> Any:
    """The record's outcome (its result); a salvaged one (a warning: the writer asked for something else than what
    was done) says what it was only for the kinds that read the warning (`salvaged`)."""
    result = json.loads(op["result"] or "{}")
    if result.get("warnings") and not salvaged:
        raise CannotSay("its outcome carries a warning: what its writer asked for differs from what it did")
    return result


def _rec(op: Any, actor: str, at: int, payload: dict[str, Any]) -> Record:
    return Record(op["type"], op["op_id"], actor, int(at), payload)


def _at_if_last(row: Any, column: str, op: Any) -> int:
    """A row keeps the instant of the record that changed it last (its version): older ones are overwritten."""
    return int(row[column]) if row is not None and row["version"] == op["seq"] else at_of(op["op_id"])


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
    return unique(out)


def _parents_then(conn: Any, related: Related, page: Any, page_id: str, seq: int) -> list[str | None]:
    """Where the page may have stood just after record `seq` — most likely first. Its parent now holds unless a
    later record moved it: a later move that found it already there (a no-op) says where it was; a page purged
    later re-filed its children under its own parent; else the top, or a place a later move named."""
    moves = later(conn, related, page_id, seq, "page.move")
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
    return unique(out)


def _labels_then(conn: Any, related: Related, page: Any, page_id: str, seq: int) -> list[str]:
    """The labels a create gave: the page's labels now, less those a later record attached (labels only add)."""
    if page is None:
        return []
    now = set(json.loads(page["labels"] or "[]"))
    for after in later(conn, related, page_id, seq, "page.labels"):
        if after.applied:
            now -= {str(x).lower() for x in after.record.payload.get("labels", [])}
    return sorted(now)


def _title_then(conn: Any, related: Related, page_id: str, seq: int, gone: Any) -> str:
    """A purged page's title just after `seq`: the title the next rename replaced (its outcome says it), else the
    title it was purged under."""
    for after in later(conn, related, page_id, seq, "page.rename"):
        if after.applied and isinstance(after.result.get("old_title"), str):
            return after.result["old_title"]
    if gone is None:
        raise CannotSay(f"page {page_id} is no longer in the database")
    return str(gone["title"])


def _bodies_then(conn: Any, related: Related, page_id: str, seq: int) -> list[str]:
    """A purged page's text just after `seq` is not kept: a later save that changed nothing says what it was,
    else any text stands in (the purge left no row it could show in)."""
    found = [after.record.payload.get("body") for after in later(conn, related, page_id, seq, "page.save")
             if after.status == "noop"]
    return unique([b for b in found if isinstance(b, str)] + [""])


# -- one give-back per kind ------------------------------------------------------------------------------

def container_declare(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    result = _outcome(op)
    c = conn.execute("SELECT * FROM containers WHERE key = ?", (result["key"],)).fetchone()
    if c is None:
        raise CannotSay(f"space {result['key']} is not in the database")
    at = at_of(op["op_id"])
    same = {"key": c["key"], "name": c["name"], "purpose": c["purpose"], "lead": c["lead"]}
    return [_rec(op, REPAIR_ACTOR, at, same | {"chart_epoch": c["chart_epoch"]}),
            _rec(op, REPAIR_ACTOR, at, same | {"chart_epoch": 0}),
            _rec(op, REPAIR_ACTOR, at, {"key": c["key"], "name": c["key"], "purpose": "", "lead": None,
                                        "chart_epoch": 0})], ""


def page_create(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    result = _outcome(op, salvaged=True)
    page_id = result.get("page_id")
    page, gone = _page(conn, page_id), _gone(conn, page_id)
    if page is None and gone is None:
        raise CannotSay(f"page {page_id} is no longer in the database")
    first = _revision(conn, page_id, 1) if page is not None else None
    container = (page or gone)["container"]
    note = ""
    if first is not None and first["body"] is not None:
        title, bodies, actor, at, message = first["title"], [first["body"]], first["author"], first["at"], first["message"]
    else:
        title, bodies = _title_then(conn, related, page_id, seq, gone), _bodies_then(conn, related, page_id, seq)
        actor, at, message = REPAIR_ACTOR, at_of(op["op_id"]), None
        note = PURGED_SINCE
    parents = _parents_then(conn, related, page, page_id, seq)
    if result.get("warnings"):
        asked: list[str | None] = list(_salvaged_parents(conn, result))
        parents = asked or parents
    labels = _labels_then(conn, related, page, page_id, seq)
    out = []
    for parent in parents:
        for body in bodies:
            r = build.page_create(actor, page_id=page_id, container=container, title=title, body=body,
                                  parent_id=parent, message=message, labels=labels, op_id=op["op_id"])
            out.append(_rec(op, actor, at, r.payload))
    return out, note


def _saved(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    """A save or a rename: the revision it wrote says it (both keep the body they replaced in that revision)."""
    kind, result = op["type"], _outcome(op)
    page_id, revision = result.get("page_id"), int(result["revision"])
    row = _revision(conn, page_id, revision)
    if row is not None and row["body"] is not None:
        if kind == "page.save":
            payload = build.page_save(row["author"], page_id=page_id, base_revision=revision - 1, body=row["body"],
                                      message=row["message"]).payload
        else:
            payload = {"page_id": page_id, "title": row["title"]}
            if row["message"]:
                payload["message"] = row["message"]
        return [_rec(op, row["author"], row["at"], payload)], ""
    gone = _gone(conn, page_id)
    if gone is None:
        raise CannotSay(f"revision {revision} of page {page_id} is no longer in the database")
    at = at_of(op["op_id"])
    if kind == "page.save":
        return [_rec(op, REPAIR_ACTOR, at, {"page_id": page_id, "base_revision": revision - 1, "body": b})
                for b in _bodies_then(conn, related, page_id, seq)], PURGED_SINCE
    return [_rec(op, REPAIR_ACTOR, at, {"page_id": page_id,
                                        "title": _title_then(conn, related, page_id, seq, gone)})], ""


page_save = page_rename = _saved


def page_move(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    result = _outcome(op, salvaged=True)
    page_id = result.get("page_id")
    at = _at_if_last(_page(conn, page_id), "updated_at", op)
    if result.get("warnings"):   # salvaged: it asked for a parent that would not do, and stayed where it was
        asked = _salvaged_parents(conn, result)
        if not asked:
            raise CannotSay("its outcome does not say where it was asked to go")
        return [_rec(op, REPAIR_ACTOR, at, {"page_id": page_id, "parent_id": a}) for a in asked], ""
    return [_rec(op, REPAIR_ACTOR, at, {"page_id": page_id, "parent_id": result.get("parent_id")})], ""


def page_trash(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    page_id = _outcome(op).get("page_id")
    page = _page(conn, page_id)
    out = []
    if page is not None and page["trashed_at"] is not None:
        out.append(_rec(op, page["trashed_by"], page["trashed_at"], {"page_id": page_id}))
    out.append(_rec(op, REPAIR_ACTOR, at_of(op["op_id"]), {"page_id": page_id}))
    return out, ""


def page_restore(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    page_id = _outcome(op).get("page_id")
    return [_rec(op, REPAIR_ACTOR, _at_if_last(_page(conn, page_id), "updated_at", op), {"page_id": page_id})], ""


def page_purge(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    page_id = _outcome(op).get("page_id")
    gone = _gone(conn, page_id)
    if gone is None:
        raise CannotSay(f"no purge marker for page {page_id}")
    return [_rec(op, gone["purged_by"], gone["purged_at"], {"page_id": page_id, "reason": gone["reason"]})], ""


def page_labels(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    result = _outcome(op)
    page_id = result.get("page_id")
    return [_rec(op, REPAIR_ACTOR, _at_if_last(_page(conn, page_id), "updated_at", op),
                 {"page_id": page_id, "labels": list(result["labels"])})], ""


REMOVED_SINCE = "its text is not kept (the comment was removed since)"


def comment_add(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    result = _outcome(op)
    comment_id = result["comment_id"]
    c = conn.execute("SELECT * FROM comments WHERE id = ?", (comment_id,)).fetchone()
    if c is not None:
        note = "" if c["edited_at"] is None else "its first text is not kept: the comment's text as edited since stands for it"
        return [_rec(op, c["author"], c["created_at"], {"comment_id": comment_id, "page_id": c["page_id"],
                                                        "body": c["body"]})], note
    authors = [after.record.actor for after in later(conn, related, comment_id, seq, "comment.edit") if after.applied]
    return [_rec(op, a, at_of(op["op_id"]), {"comment_id": comment_id, "page_id": result["page_id"], "body": ""})
            for a in unique(authors + [REPAIR_ACTOR])], REMOVED_SINCE


def comment_edit(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    comment_id = _outcome(op)["comment_id"]
    c = conn.execute("SELECT * FROM comments WHERE id = ?", (comment_id,)).fetchone()
    if c is not None:
        if not any(after.applied for after in later(conn, related, comment_id, seq, "comment.edit")):
            return [_rec(op, c["author"], c["edited_at"], {"comment_id": comment_id, "body": c["body"]})], ""
        return ([_rec(op, c["author"], at_of(op["op_id"]), {"comment_id": comment_id, "body": c["body"]})],
                "its text is not kept: the comment's text as edited since stands for it")
    # removed since: whoever wrote it edited it (an edit by anyone else is refused)
    authors = [r.actor for r in related.about(comment_id) if r.type == "comment.add"]
    authors += [after.record.actor for after in later(conn, related, comment_id, 0, "comment.edit") if after.applied]
    return [_rec(op, a, at_of(op["op_id"]), {"comment_id": comment_id, "body": ""})
            for a in unique(authors + [REPAIR_ACTOR])], REMOVED_SINCE


def comment_remove(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    return [_rec(op, REPAIR_ACTOR, at_of(op["op_id"]), {"comment_id": _outcome(op)["comment_id"]})], ""


def knowledge_read(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    _outcome(op)
    r = conn.execute("SELECT * FROM knowledge_reads WHERE op_id = ?", (op["op_id"],)).fetchone()
    if r is None:
        raise CannotSay("its read is not in the database")
    payload = {"via": r["via"], "pages": json.loads(r["pages"]), "backend": r["backend"]}
    for key in ("query", "turn", "phase"):
        if r[key] is not None:
            payload[key] = r[key]
    return [_rec(op, r["actor"], r["at"], payload)], ""


def onboarding_mark(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    """Its outcome names no agent: the marks now (an agent keeps its latest), the one made at this record's instant
    first, and the agents a later mark overwrote."""
    _outcome(op)
    at = at_of(op["op_id"])
    marks = conn.execute("SELECT agent_id, chain_hash, marked_at FROM agent_onboarding_markers "
                         "ORDER BY abs(marked_at - ?), agent_id", (at,)).fetchall()
    out = [_rec(op, m["agent_id"], m["marked_at"], {"agent_id": m["agent_id"], "chain_hash": m["chain_hash"]})
           for m in marks if abs(int(m["marked_at"]) - at) <= 2]
    every = related.of_kind("onboarding.mark")
    # the agents in the order the log first names them, those with a mark after this one
    overwritten = [a for a in unique([r.payload.get("agent_id") for r in every])
                   if any(r.seq > seq and r.payload.get("agent_id") == a for r in every)]
    out += [_rec(op, a, at, {"agent_id": a, "chain_hash": ""}) for a in overwritten if isinstance(a, str)]
    if not out:
        raise CannotSay("an onboarding mark keeps only its latest instant")
    return out[:12], "" if len(out) == 1 else "its agent is not kept: the marks now stand for it"
