"""Consolidation on the pages log (spec 003, "Consolidation"; issue 37): its words, its two kinds' handlers, and
how a repair gives each back.

`consolidation.propose` stores a proposal — the page's new body, the STANDING entries of the page it folds in, the
revision it was made against — and changes nothing else: the page keeps its body. `consolidation.decide` is a
person's decision on one (an agent is refused here, whoever wrote the record):

- **accept**: refused if the page changed since the proposal was made (its revision is no longer the base), or if
  an entry it folds is no longer STANDING. Else one record saves the page's new body (a revision of kind
  `consolidate`) AND makes the entries CONSOLIDATED: still served, as evidence for the page.
- **decline**: the proposal is closed; nothing else changes.
- **revert**: of the accepted save, refused if the page changed since that save. The old body comes back (a
  revision of kind `revert`) and the entries the accept folded that are still CONSOLIDATED are STANDING again.
- **undo_revert**: of that revert, refused if the page changed since it. The consolidated body comes back and the
  proposal's entries that are still STANDING are folded in again (CONSOLIDATED); one archived, disputed or
  superseded meanwhile stays as it is. So a fact is never served both in the body and beside it.

Accepting is refused too when the page is generated now (core/pages/generated_handlers.py: made generated and not
taken over since the proposal): a generated page's body is written by its builds, never folded into. Every decision is decided from the rows as they stand at its seq, so every
node decides alike; each handler refuses (or finds nothing to do) before its first write.
"""
from __future__ import annotations

import json
from typing import Any

from ..log import Record
from ..replica.appliers import Noop, Refuse
from ..replica.kinds import CannotSay, Related
from ..store import Connection
from .generated_handlers import GENERATED
from .entry_handlers import _history, _set_status
from .entry_model import AGENT, CONSOLIDATED, PERSON, STANDING, WRITERS
from .give_back import _rec
from .handlers import _add_revision, _live_page

OPEN, ACCEPTED, DECLINED, REVERTED = "OPEN", "ACCEPTED", "DECLINED", "REVERTED"
STATES = (OPEN, ACCEPTED, DECLINED, REVERTED)
ACCEPT, DECLINE, REVERT, UNDO_REVERT = "accept", "decline", "revert", "undo_revert"
# action -> the state it applies from, the state it leaves
DECISIONS: dict[str, tuple[str, str]] = {
    ACCEPT: (OPEN, ACCEPTED), DECLINE: (OPEN, DECLINED), REVERT: (ACCEPTED, REVERTED), UNDO_REVERT: (REVERTED, ACCEPTED),
}
MAX_FOLDED = 200                # entries one proposal folds: a page's paragraph, not the bank
CONSOLIDATE_REVISION, REVERT_REVISION = "consolidate", "revert"     # the revisions' kinds a decision's save writes

Candidates = tuple[list[Record], str]


def _by(rec: Record) -> str:
    by = rec.payload["by"]
    if by not in WRITERS:
        raise Refuse("invalid", f"{rec.type} by '{by}': a writer is one of {', '.join(WRITERS)}")
    return by


def proposal_row(conn: Any, proposal_id: str) -> Any:
    return conn.execute("SELECT * FROM consolidation_proposals WHERE id = ?", (proposal_id,)).fetchone()


def folded_ids(row: Any, column: str = "entries") -> list[str]:
    """A proposal's entry ids (`entries`: all it folds; `folded`: those its latest accept made CONSOLIDATED)."""
    try:
        out = json.loads(row[column] or "[]")
    except ValueError:
        return []
    return [str(i) for i in out] if isinstance(out, list) else []


def _statuses(conn: Connection, ids: list[str]) -> dict[str, Any]:
    marks = ",".join("?" * len(ids))
    return {r["id"]: r for r in conn.execute(f"SELECT id, page_id, status FROM entries WHERE id IN ({marks})", ids)}


def consolidation_propose(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    by = _by(rec)
    proposal_id, body, ids = p["proposal_id"], p["body"], list(p["entries"])
    if not proposal_id.strip():
        raise Refuse("invalid", "a proposal needs an id")
    if not ids:
        raise Refuse("no_entries", "a consolidation folds at least one of the page's entries into its body")
    if len(set(ids)) != len(ids):
        raise Refuse("invalid", "a proposal names each entry it folds once")
    if len(ids) > MAX_FOLDED:
        raise Refuse("too_many_entries", f"a proposal folds at most {MAX_FOLDED} entries, not {len(ids)}")
    page = _live_page(conn, p["page_id"], body=True)
    where = f"{page['container']}/{page['title']}"
    if proposal_row(conn, proposal_id) is not None:
        raise Refuse("exists", f"proposal {proposal_id} already exists")
    base = int(p["base_revision"])
    if base != page["revision"]:
        raise Refuse("stale_revision", f"{where} is at revision {page['revision']}, not {base}: read it again and "
                     "propose against what it says now")
    if body == page["body"]:
        raise Refuse("same_body", f"the proposed body is {where}'s body already: write the entries into it")
    rows = _statuses(conn, ids)
    for entry_id in ids:
        row = rows.get(entry_id)
        if row is None:
            raise Refuse("not_found", f"no entry {entry_id}")
        if row["page_id"] != page["id"]:
            raise Refuse("other_page", f"entry {entry_id} is under another page: a consolidation folds only "
                         f"{where}'s own entries")
        if row["status"] != STANDING:
            raise Refuse("not_standing", f"entry {entry_id} is {row['status']}: only a STANDING entry is folded "
                         "into a page's body")
    conn.execute("INSERT INTO consolidation_proposals (id, page_id, base_revision, body, entries, message, "
                 "proposed_by, proposed_kind, proposed_at, propose_op, state, version) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                 (proposal_id, page["id"], base, body, json.dumps(ids), p.get("message"), rec.actor, by, rec.at,
                  rec.op_id, OPEN, rec.seq))
    return {"proposal_id": proposal_id, "page_id": page["id"], "state": OPEN, "entries": ids}


def _save(conn: Connection, rec: Record, page: Any, body: str, kind: str, message: str) -> int:
    """The page's body saved as the next revision (as page.save does, with the decision's kind)."""
    revision = page["revision"] + 1
    conn.execute("UPDATE pages SET body=?, revision=?, saved_by=?, saved_at=?, updated_at=?, version=? WHERE id=?",
                 (body, revision, rec.actor, rec.at, rec.at, rec.seq, page["id"]))
    _add_revision(conn, page["id"], revision, page["title"], rec.actor, rec.at, kind, message,
                  previous_body=page["body"])
    return revision


def _move(conn: Connection, rec: Record, ids: list[str], before: str, after: str, action: str,
          proposal_id: str) -> list[str]:
    """The entries of `ids` that are `before` now, moved to `after` (each with its history); the others stay."""
    if not ids:
        return []
    rows = _statuses(conn, ids)
    moved = [i for i in ids if i in rows and rows[i]["status"] == before]
    reason = f"consolidation {proposal_id}"
    for entry_id in moved:
        _set_status(conn, rec, entry_id, after, reason)
        _history(conn, rec, entry_id, PERSON, action, before, after, reason)
    return moved


def consolidation_decide(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    by = _by(rec)
    proposal_id, action = p["proposal_id"], p["action"]
    if action not in DECISIONS:
        raise Refuse("invalid", f"a proposal is decided by {', '.join(DECISIONS)}, not {action!r}")
    if by != PERSON:
        who = "an agent" if by == AGENT else "crewlet itself"
        raise Refuse("forbidden", f"to {action.replace('_', ' ')} a consolidation is a person's: {rec.actor} is {who}")
    prop = proposal_row(conn, proposal_id)
    if prop is None:
        raise Refuse("not_found", f"no proposal {proposal_id}")
    source, target = DECISIONS[action]
    done = {"proposal_id": proposal_id, "page_id": prop["page_id"], "action": action, "state": prop["state"]}
    if prop["state"] == target:
        raise Noop(f"proposal {proposal_id} is {prop['state']} already", done)
    if prop["state"] != source:
        raise Refuse("invalid_state", f"proposal {proposal_id} is {prop['state']}: '{action.replace('_', ' ')}' "
                     f"applies only to one {source}")
    page = _live_page(conn, prop["page_id"], body=True)
    where = f"{page['container']}/{page['title']}"
    revision: int | None = None
    folded = folded_ids(prop, "folded")
    sets: dict[str, Any] = {}
    if action == DECLINE:
        pass        # closed: the page and the entries stay as they are
    elif action == ACCEPT:
        if page["revision"] != prop["base_revision"]:
            raise Refuse("page_changed", f"{where} changed since the proposal was made (revision "
                         f"{prop['base_revision']}, now {page['revision']}): decline it and propose again")
        generated = conn.execute("SELECT state FROM generated_pages WHERE page_id = ?", (page["id"],)).fetchone()
        if generated is not None and generated["state"] == GENERATED:
            raise Refuse("generated", f"{where} is a generated page now: its body is written by its builds from "
                         "the entries in its scope, not folded into; decline the proposal (or take the page over "
                         "with `crewlet page takeover`, then propose again)")
        ids = folded_ids(prop)
        rows = _statuses(conn, ids)
        for entry_id in ids:
            row = rows.get(entry_id)
            if row is None or row["status"] != STANDING:
                status = row["status"] if row is not None else "gone"
                raise Refuse("entry_not_standing", f"entry {entry_id} is {status} now, no longer STANDING: decline "
                             "the proposal and propose again without it")
        revision = _save(conn, rec, page, prop["body"], CONSOLIDATE_REVISION, f"consolidation {proposal_id}")
        folded = _move(conn, rec, ids, STANDING, CONSOLIDATED, "consolidate", proposal_id)
        sets = {"old_body": page["body"], "applied_revision": revision, "folded": json.dumps(folded)}
    elif action == REVERT:
        if page["revision"] != prop["applied_revision"]:
            raise Refuse("page_changed", f"{where} changed since the consolidation was saved (revision "
                         f"{prop['applied_revision']}, now {page['revision']}): a revert would undo that change")
        revision = _save(conn, rec, page, prop["old_body"] or "", REVERT_REVISION,
                         f"revert of consolidation {proposal_id}")
        back = _move(conn, rec, folded, CONSOLIDATED, STANDING, "unconsolidate", proposal_id)
        sets = {"reverted_revision": revision, "folded": json.dumps([])}
        done["unfolded"] = back
    else:   # UNDO_REVERT
        if page["revision"] != prop["reverted_revision"]:
            raise Refuse("page_changed", f"{where} changed since the revert (revision {prop['reverted_revision']}, "
                         f"now {page['revision']}): undoing it would undo that change")
        revision = _save(conn, rec, page, prop["body"], CONSOLIDATE_REVISION,
                         f"consolidation {proposal_id}, its revert undone")
        folded = _move(conn, rec, folded_ids(prop), STANDING, CONSOLIDATED, "consolidate", proposal_id)
        sets = {"applied_revision": revision, "folded": json.dumps(folded)}
    assigns = "".join(f", {column} = ?" for column in sets)
    conn.execute(f"UPDATE consolidation_proposals SET state = ?, version = ?{assigns} WHERE id = ?",
                 (target, rec.seq, *sets.values(), proposal_id))
    conn.execute("INSERT INTO consolidation_decisions (op_id, proposal_id, seq, action, actor, actor_kind, at, "
                 "revision) VALUES (?,?,?,?,?,?,?,?)",
                 (rec.op_id, proposal_id, rec.seq, action, rec.actor, by, rec.at, revision))
    out = {**done, "state": target, "revision": revision}
    if action in (ACCEPT, UNDO_REVERT):
        out["consolidated"] = folded
    return out


# -- a repair's give-back: each record read off the rows it wrote ---------------------------------------------

def give_back_propose(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    prop = conn.execute("SELECT * FROM consolidation_proposals WHERE propose_op = ?", (op["op_id"],)).fetchone()
    if prop is None:
        raise CannotSay("its proposal's row is no longer in the database")
    payload: dict[str, Any] = {"proposal_id": prop["id"], "page_id": prop["page_id"],
                               "base_revision": prop["base_revision"], "body": prop["body"],
                               "entries": folded_ids(prop), "by": prop["proposed_kind"]}
    if prop["message"] is not None:
        payload["message"] = prop["message"]
    return [_rec(op, prop["proposed_by"], prop["proposed_at"], payload)], ""


def give_back_decide(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    row = conn.execute("SELECT * FROM consolidation_decisions WHERE op_id = ?", (op["op_id"],)).fetchone()
    if row is None:
        raise CannotSay("its decision's row is no longer in the database")
    payload = {"proposal_id": row["proposal_id"], "action": row["action"], "by": row["actor_kind"]}
    return [_rec(op, row["actor"], row["at"], payload)], ""
