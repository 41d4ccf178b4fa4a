"""Generated pages' records (issue 37, spec 003 "Generated pages"): their builders and their handlers.

- `page.generated` makes a page generated (`make`, with its question), changes its question (`question`: the
  question's number goes up by one, so every new question is owed its own build) or hands it to people
  (`takeover`: it is authored from then on and no build is applied to it; only a person's record may);
- `page.build` saves a build: the body its sections make, and the sections (each its text, the entries it cites
  and what it was written from). It is refused for a page taken over, and for a base revision that is not the
  page's (a person reverted or a second build landed in between: the next look builds from what is there).

The sections are kept per saved revision with the body's digest, so a revert of a refresh (a save of the body from
before it) finds that body's sections again.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

from ..log import Record
from ..replica.appliers import Noop, Refuse
from ..replica.kinds import CannotSay, Related, at_of
from ..store import Connection
from .give_back import PURGED_SINCE, _gone, _rec, _revision
from .handlers import _add_revision, _live_page

Candidates = tuple[list[Record], str]

GENERATED, AUTHORED = "generated", "authored"
ACTIONS = ("make", "question", "takeover")


def body_sha(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


# -- builders ---------------------------------------------------------------------------------------------------

def page_generated(actor: str, *, page_id: str, action: str, by_kind: str, question: str | None = None,
                   op_id: str | None = None) -> Record:
    """Make a page generated, change its question, or take it over (`by_kind`: person | agent | system)."""
    return Record.new("page.generated", actor, {"page_id": page_id, "action": action, "question": question,
                                                "by_kind": by_kind}, op_id=op_id)


def page_build(actor: str, *, page_id: str, base_revision: int, body: str, sections: list[dict[str, Any]],
               question_no: int, digest: str, built_at: int, message: str | None = None,
               op_id: str | None = None) -> Record:
    """A build of a generated page: its body and sections, the question number it answers, the digest of the
    scope's entries it read and the calendar instant it ran at (CREWLET_NOW's, in a drill)."""
    payload: dict[str, Any] = {"page_id": page_id, "base_revision": int(base_revision), "body": body,
                               "sections": sections, "question_no": int(question_no), "digest": digest,
                               "built_at": int(built_at)}
    if message:
        payload["message"] = message
    return Record.new("page.build", actor, payload, op_id=op_id)


# -- handlers ---------------------------------------------------------------------------------------------------

def _generated_row(conn: Connection, page_id: str) -> Any:
    return conn.execute("SELECT * FROM generated_pages WHERE page_id = ?", (page_id,)).fetchone()


def _changed(conn: Connection, rec: Record, page_id: str, question: str | None) -> None:
    p = rec.payload
    conn.execute("INSERT INTO generated_changes (op_id, page_id, seq, action, question, by_kind, actor, at) "
                 "VALUES (?,?,?,?,?,?,?,?)", (rec.op_id, page_id, rec.seq, p["action"], question, p["by_kind"],
                                              rec.actor, rec.at))


def handle_page_generated(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    action = p["action"]
    if action not in ACTIONS:
        raise Refuse("invalid", f"page.generated does one of {', '.join(ACTIONS)}, not {action!r}")
    page = _live_page(conn, p["page_id"])
    name = f"{page['container']}/{page['title']}"
    row = _generated_row(conn, page["id"])
    question = (p.get("question") or "").strip()
    if action == "make":
        if row is not None:
            raise Refuse("already_generated", f"{name} is already a generated page (or was one, taken over)")
        if not question:
            raise Refuse("invalid", f"a generated page needs a question: {name} was given none")
        conn.execute("INSERT INTO generated_pages (page_id, question, question_no, state, set_by, set_at, version) "
                     "VALUES (?,?,?,?,?,?,?)", (page["id"], question, 1, GENERATED, rec.actor, rec.at, rec.seq))
        _changed(conn, rec, page["id"], question)
        return {"page_id": page["id"], "question_no": 1, "state": GENERATED}
    if row is None:
        raise Refuse("not_generated", f"{name} is not a generated page")
    if row["state"] != GENERATED:
        raise Refuse("taken_over", f"{name} was taken over by a person: it is authored now")
    if action == "takeover":
        if p["by_kind"] != "person":
            raise Refuse("person_only", f"only a person can take over {name}; an agent cannot")
        conn.execute("UPDATE generated_pages SET state = ?, set_by = ?, set_at = ?, version = ? WHERE page_id = ?",
                     (AUTHORED, rec.actor, rec.at, rec.seq, page["id"]))
        _changed(conn, rec, page["id"], None)
        return {"page_id": page["id"], "state": AUTHORED}
    if not question:
        raise Refuse("invalid", f"a generated page needs a question: {name} was given none")
    if question == row["question"]:
        raise Noop(f"{name} already asks this question", {"page_id": page["id"], "question_no": row["question_no"]})
    number = row["question_no"] + 1
    conn.execute("UPDATE generated_pages SET question = ?, question_no = ?, set_by = ?, set_at = ?, version = ? "
                 "WHERE page_id = ?", (question, number, rec.actor, rec.at, rec.seq, page["id"]))
    _changed(conn, rec, page["id"], question)
    return {"page_id": page["id"], "question_no": number, "state": GENERATED}


def handle_page_build(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    page = _live_page(conn, p["page_id"], body=True)
    name = f"{page['container']}/{page['title']}"
    row = _generated_row(conn, page["id"])
    if row is None:
        raise Refuse("not_generated", f"{name} is not a generated page")
    if row["state"] != GENERATED:
        raise Refuse("taken_over", f"{name} was taken over by a person: it is not rebuilt")
    if int(p["question_no"]) > row["question_no"]:
        raise Refuse("invalid", f"{name} has asked {row['question_no']} question(s), not {p['question_no']}")
    base, current = int(p["base_revision"]), page["revision"]
    if base != current:
        raise Refuse("stale_revision", f"{name} is at revision {current}, not {base}: saved since the build read it")
    body = p["body"]
    revision = current
    saved = body != page["body"]
    if saved:
        revision = current + 1
        conn.execute("UPDATE pages SET body=?, revision=?, saved_by=?, saved_at=?, updated_at=?, version=? WHERE id=?",
                     (body, revision, rec.actor, rec.at, rec.at, rec.seq, page["id"]))
        _add_revision(conn, page["id"], revision, page["title"], rec.actor, rec.at, "save",
                      p.get("message") or "generated: refresh", previous_body=page["body"])
    conn.execute("INSERT INTO generated_builds (op_id, page_id, seq, revision, saved, body_sha, question_no, sections, "
                 "digest, built_by, built_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                 (rec.op_id, page["id"], rec.seq, revision, int(saved), body_sha(body), int(p["question_no"]),
                  json.dumps(p["sections"], sort_keys=True), p["digest"], rec.actor, int(p["built_at"])))
    conn.execute("UPDATE generated_pages SET built_at = ?, built_question_no = MAX(built_question_no, ?), "
                 "inputs_digest = ?, version = ? WHERE page_id = ?",
                 (int(p["built_at"]), int(p["question_no"]), p["digest"], rec.seq, page["id"]))
    return {"page_id": page["id"], "revision": revision, "saved": saved}


# -- give-backs (core/recover.py): each record read back from the rows it wrote ------------------------------------

def give_back_generated(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    row = conn.execute("SELECT * FROM generated_changes WHERE op_id = ?", (op["op_id"],)).fetchone()
    if row is None:
        if _gone(conn, json.loads(op["result"] or "{}").get("page_id", "")) is not None:
            raise CannotSay(f"the change is not kept: {PURGED_SINCE}")
        raise CannotSay("the generated page's change is no longer in the database")
    return [_rec(op, row["actor"], row["at"], {"page_id": row["page_id"], "action": row["action"],
                                               "question": row["question"], "by_kind": row["by_kind"]})], ""


def give_back_build(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    row = conn.execute("SELECT * FROM generated_builds WHERE op_id = ?", (op["op_id"],)).fetchone()
    if row is None:
        if _gone(conn, json.loads(op["result"] or "{}").get("page_id", "")) is not None:
            raise CannotSay(f"the build is not kept: {PURGED_SINCE}")
        raise CannotSay("the build is no longer in the database")
    revision = _revision(conn, row["page_id"], row["revision"])
    if revision is None or revision["body"] is None:
        raise CannotSay(f"revision {row['revision']} of page {row['page_id']} is no longer in the database")
    payload: dict[str, Any] = {"page_id": row["page_id"],
                               "base_revision": row["revision"] - 1 if row["saved"] else row["revision"],
                               "body": revision["body"], "sections": json.loads(row["sections"]),
                               "question_no": row["question_no"], "digest": row["digest"], "built_at": row["built_at"]}
    if row["saved"] and revision["message"]:
        payload["message"] = revision["message"]
    # a saved build's instant is its revision's; one that saved nothing kept none but its op id's
    return [_rec(op, row["built_by"], revision["at"] if row["saved"] else at_of(op["op_id"]), payload)], ""
