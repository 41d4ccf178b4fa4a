"""The entry kinds' handlers (spec 003, issue 35): what depends on order is decided here, from the rows as they
are when the record applies, so every node decides alike — the page exists and is not purged or trashed, the
page's policy (LOCKED refuses an agent's entry; CURATED folds exact repeats and holds an agent to its budget of
proposed entries), a status change valid from the status now, who may take it (accept and verify are a person's;
an agent archives only its own entry while proposed), and the supersede rule (the old entry stays in use until a
person accepts the correction, then it is SUPERSEDED).

Each handler refuses (or finds nothing to do) before its first write. Registered by its declaration
(pages/kinds.py). The payload's outer shape is checked before a handler runs; what lies inside a list's objects
(a citation, a check) is checked here, and a bad one refused, never raised.
"""
from __future__ import annotations

import json
from typing import Any

from ..log import Record
from ..replica.appliers import Noop, Refuse
from ..repos.modules import written_scopes_meet
from ..store import Connection
from .entry_model import (ABOUT_KINDS, ACTIONS, AGENT, CHECK_RESULTS, CURATED, ENTRY_KINDS, IN_USE, LOCKED,
                          MAX_ENTRY_BODY, MAX_ENTRY_CITATIONS, OPEN, OUT_OF_USE, PERSON, POLICIES, PROPOSED,
                          STANDING, SUPERSEDED, VERIFY, WRITERS, about_links, fold_body)
from .entry_model import page_policy as policy_of
from .handlers import _live_page
from .triage_handlers import action_verdict

_ENTRY = ("SELECT id, page_id, kind, folded, citations, status, author, author_kind, supersedes, superseded_by, "
          "verified_by FROM entries WHERE id = ?")


def _by(rec: Record) -> str:
    by = rec.payload["by"]
    if by not in WRITERS:
        raise Refuse("invalid", f"{rec.type} by '{by}': a writer is one of {', '.join(WRITERS)}")
    return by


def _entry(conn: Connection, entry_id: str) -> Any:
    row = conn.execute(_ENTRY, (entry_id,)).fetchone()
    if row is None:
        raise Refuse("not_found", f"no entry {entry_id}")
    return row


def _history(conn: Connection, rec: Record, entry_id: str, by: str, action: str, before: str | None, after: str,
             reason: str | None) -> None:
    conn.execute("INSERT INTO entry_history (op_id, entry_id, seq, actor, actor_kind, at, action, from_status, "
                 "to_status, reason) VALUES (?,?,?,?,?,?,?,?,?,?)",
                 (rec.op_id, entry_id, rec.seq, rec.actor, by, rec.at, action, before, after, reason))


def _set_status(conn: Connection, rec: Record, entry_id: str, status: str, reason: str | None,
                **also: Any) -> None:
    sets = "".join(f", {column} = ?" for column in also)
    conn.execute(f"UPDATE entries SET status = ?, status_by = ?, status_at = ?, status_reason = ?, version = ?{sets} "
                 "WHERE id = ?", (status, rec.actor, rec.at, reason, rec.seq, *also.values(), entry_id))


def _retire_superseded(conn: Connection, rec: Record, by: str, new_id: str, old_id: str | None) -> str | None:
    """A person's acceptance of a correction retires what it corrects: SUPERSEDED, kept for the record. The old
    entry may be out of use already (archived, or retired by another correction): then it stays as it is."""
    if not old_id:
        return None
    old = conn.execute(_ENTRY, (old_id,)).fetchone()
    if old is None or old["status"] in OUT_OF_USE:
        return None
    reason = f"superseded by {new_id}"
    _set_status(conn, rec, old_id, SUPERSEDED, reason, superseded_by=new_id)
    _history(conn, rec, old_id, by, "supersede", old["status"], SUPERSEDED, reason)
    return old_id


def _checked_citations(rec: Record) -> list[dict[str, Any]]:
    citations = rec.payload.get("citations", [])
    if len(citations) > MAX_ENTRY_CITATIONS:
        raise Refuse("too_many_citations", f"{len(citations)} citations; an entry cites at most "
                     f"{MAX_ENTRY_CITATIONS}")
    return citations


def _checks(rec: Record, n_citations: int) -> list[tuple[int, str, Any, Any, Any]]:
    out = []
    for check in rec.payload.get("checks", []):
        index, result = check.get("index"), check.get("result")
        if type(index) is not int or not 1 <= index <= n_citations:
            raise Refuse("invalid", f"a check names citation {index!r}; the entry has {n_citations}")
        if result not in CHECK_RESULTS:
            raise Refuse("invalid", f"a check of citation {index} says {result!r}, not one of "
                         f"{', '.join(CHECK_RESULTS)}")
        commit, blob, message = check.get("commit"), check.get("blob"), check.get("message")
        if not all(v is None or isinstance(v, str) for v in (commit, blob, message)):
            raise Refuse("invalid", f"a check of citation {index}: commit, blob and message are text")
        out.append((index, result, commit, blob, message))
    return out


def entry_add(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    by = _by(rec)
    entry_id, kind, body, scope = p["entry_id"], p["kind"], p["body"], p.get("scope")
    if kind not in ENTRY_KINDS:
        raise Refuse("invalid_kind", f"an entry's kind is one of {', '.join(ENTRY_KINDS)}, not {kind!r}")
    folded = fold_body(body)
    if not folded:
        raise Refuse("invalid_body", "an entry says one fact: its body is empty")
    if len(body) > MAX_ENTRY_BODY:
        raise Refuse("body_too_long", f"an entry's body is at most {MAX_ENTRY_BODY} characters; this one has "
                     f"{len(body)}")
    citations = _checked_citations(rec)
    checks = _checks(rec, len(citations))
    page = _live_page(conn, p["page_id"])
    policy = policy_of(conn, page["id"])
    if policy == LOCKED and by == AGENT:
        raise Refuse("locked", f"{page['container']}/{page['title']} is LOCKED: people maintain it by hand, and an "
                     "agent adds no entry to it")
    if conn.execute("SELECT 1 FROM entries WHERE id = ?", (entry_id,)).fetchone() is not None:
        raise Refuse("exists", f"entry {entry_id} already exists")
    supersedes = p.get("supersedes")
    if supersedes:
        old = conn.execute(_ENTRY, (supersedes,)).fetchone()
        if old is None:
            raise Refuse("not_found", f"no entry {supersedes} to supersede")
        if old["status"] in OUT_OF_USE:
            raise Refuse("out_of_use", f"entry {supersedes} is {old['status']}: only an entry still in the bank "
                         "can be superseded")
        if old["folded"] == folded:
            raise Refuse("same_body", f"the correction says what entry {supersedes} says: change the body")
    elif policy != OPEN:
        # an exact repeat is not written: it counts as a corroboration of the entry it repeats
        # ... only where the two scopes meet: the same words of two modules are two facts
        same = next((r for r in conn.execute("SELECT id, page_id, scope FROM entries WHERE folded = ? AND status NOT "
                                             "IN (?, ?) ORDER BY created_at, id", (folded, *OUT_OF_USE))
                     if written_scopes_meet(scope, r["scope"])), None)
        if same is not None:
            conn.execute("INSERT INTO entry_corroborations (op_id, entry_id, actor, at) VALUES (?,?,?,?)",
                         (rec.op_id, same["id"], rec.actor, rec.at))
            return {"entry_id": same["id"], "page_id": page["id"], "folded": True}
    budget = p.get("budget")
    if policy == CURATED and by == AGENT and budget is not None:
        waiting = conn.execute("SELECT count(*) FROM entries WHERE author = ? AND page_id = ? AND status = ?",
                               (rec.actor, page["id"], PROPOSED)).fetchone()[0]
        if waiting >= budget:
            raise Refuse("budget", f"{rec.actor} has {waiting} proposed entries on {page['container']}/"
                         f"{page['title']}, its budget (PAGE_PROPOSED_ENTRY_BUDGET = {budget}): wait for a person "
                         "to decide on them, or archive your own")
    status = STANDING if by == PERSON else PROPOSED
    conn.execute("INSERT INTO entries (id, page_id, kind, body, folded, scope, citations, status, author, "
                 "author_kind, created_at, supersedes, version) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                 (entry_id, page["id"], kind, body, folded, scope, json.dumps(citations, sort_keys=True), status,
                  rec.actor, by, rec.at, supersedes, rec.seq))
    _history(conn, rec, entry_id, by, "add", None, status, None)
    for index, result, commit, blob, message in checks:
        conn.execute("INSERT INTO citation_checks (op_id, idx, entry_id, seq, result, commit_id, blob, anchor, "
                     "message, checked_at) VALUES (?,?,?,?,?,?,?,NULL,?,?)",
                     (rec.op_id, index, entry_id, rec.seq, result, commit, blob, message, rec.at))
    retired = _retire_superseded(conn, rec, by, entry_id, supersedes) if status == STANDING else None
    return {"entry_id": entry_id, "page_id": page["id"], "status": status, "superseded": retired}


def entry_status(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    by = _by(rec)
    action, reason = p["action"], p.get("reason")
    if action not in ACTIONS:
        raise Refuse("invalid", f"an entry's status changes by {', '.join(ACTIONS)}, not {action!r}")
    entry = _entry(conn, p["entry_id"])
    _live_page(conn, entry["page_id"])
    sources, target, who = ACTIONS[action]
    if by not in who:
        raise Refuse("forbidden", f"to {action} an entry is a person's: {rec.actor} is an agent")
    if by == AGENT and (entry["author"] != rec.actor or entry["status"] != PROPOSED):
        whose = "its own" if entry["author"] == rec.actor else f"{entry['author']}'s"
        raise Refuse("forbidden", f"an agent archives only its own entries while proposed; entry {entry['id']} is "
                     f"{whose} and {entry['status']}")
    before = entry["status"]
    after = target or (STANDING if before == PROPOSED else before)
    done = {"entry_id": entry["id"], "page_id": entry["page_id"], "action": action, "status": before}
    expect = p.get("expect")
    if expect is not None and expect != before:
        raise Noop(f"entry {entry['id']} is {before} now, not {expect} as {rec.actor} found it: left as it is", done)
    if action == VERIFY and entry["verified_by"] is not None and before in sources:
        raise Noop(f"entry {entry['id']} was verified by {entry['verified_by']} already", done)
    if before == after and action != VERIFY:
        raise Noop(f"entry {entry['id']} is {before} already", done)
    if before not in sources:
        raise Refuse("invalid_status", f"entry {entry['id']} is {before}: '{action}' applies only to an entry "
                     f"{' or '.join(sources)}")
    extra: dict[str, Any] = {"verified_by": rec.actor, "verified_at": rec.at} if action == VERIFY else {}
    _set_status(conn, rec, entry["id"], after, reason, **extra)
    _history(conn, rec, entry["id"], by, action, before, after, reason)
    retired = None
    if after in IN_USE and before not in IN_USE:
        retired = _retire_superseded(conn, rec, by, entry["id"], entry["supersedes"])
    out = {**done, "status": after, "from": before, "superseded": retired}
    verdict = action_verdict(conn, rec, entry["id"], by, after)     # a person's action judges triage's decision
    return {**out, "verdict": verdict} if verdict is not None else out


def entry_edit(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    by = _by(rec)
    body, kind, scope, reason = p["body"], p["kind"], p.get("scope"), p.get("reason")
    entry = _entry(conn, p["entry_id"])
    page = _live_page(conn, entry["page_id"])
    if by == AGENT and (entry["author"] != rec.actor or entry["status"] != PROPOSED):
        whose = "its own" if entry["author"] == rec.actor else f"{entry['author']}'s"
        raise Refuse("forbidden", f"an agent changes only its own entries while proposed; entry {entry['id']} is "
                     f"{whose} and {entry['status']}")
    if entry["status"] in OUT_OF_USE:
        raise Refuse("out_of_use", f"entry {entry['id']} is {entry['status']}: kept for the record as it was")
    if by == AGENT and policy_of(conn, page["id"]) == LOCKED:
        raise Refuse("locked", f"{page['container']}/{page['title']} is LOCKED: an agent changes no entry on it")
    if kind not in ENTRY_KINDS:
        raise Refuse("invalid_kind", f"an entry's kind is one of {', '.join(ENTRY_KINDS)}, not {kind!r}")
    folded = fold_body(body)
    if not folded:
        raise Refuse("invalid_body", "an entry says one fact: its body is empty")
    if len(body) > MAX_ENTRY_BODY:
        raise Refuse("body_too_long", f"an entry's body is at most {MAX_ENTRY_BODY} characters; this one has "
                     f"{len(body)}")
    before = conn.execute("SELECT body, kind, scope FROM entries WHERE id = ?", (entry["id"],)).fetchone()
    done = {"entry_id": entry["id"], "page_id": entry["page_id"]}
    if (before["body"], before["kind"], before["scope"]) == (body, kind, scope):
        raise Noop(f"entry {entry['id']} says this already", done)
    if folded != entry["folded"]:
        same = next((r for r in conn.execute(   # the same id on every node: it is in the refusal
            "SELECT id, scope FROM entries WHERE folded = ? AND id != ? AND status NOT IN (?, ?) ORDER BY created_at, id",
            (folded, entry["id"], *OUT_OF_USE)) if written_scopes_meet(scope, r["scope"])), None)
        if same is not None and policy_of(conn, page["id"]) != OPEN:
            raise Refuse("repeat", f"entry {same['id']} says this already: corroborate it, or archive this one")
    conn.execute("UPDATE entries SET body = ?, folded = ?, kind = ?, scope = ?, version = ? WHERE id = ?",
                 (body, folded, kind, scope, rec.seq, entry["id"]))
    conn.execute("INSERT INTO entry_history (op_id, entry_id, seq, actor, actor_kind, at, action, from_status, "
                 "to_status, reason, body_before, kind_before, scope_before) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                 (rec.op_id, entry["id"], rec.seq, rec.actor, by, rec.at, "edit", entry["status"], entry["status"],
                  reason, before["body"], before["kind"], before["scope"]))
    return done


def entry_corroborate(conn: Connection, rec: Record) -> dict[str, Any]:
    entry = _entry(conn, rec.payload["entry_id"])
    if entry["status"] in OUT_OF_USE:
        raise Refuse("out_of_use", f"entry {entry['id']} is {entry['status']}: a repeat of it is a new entry")
    conn.execute("INSERT INTO entry_corroborations (op_id, entry_id, actor, at) VALUES (?,?,?,?)",
                 (rec.op_id, entry["id"], rec.actor, rec.at))
    return {"entry_id": entry["id"], "page_id": entry["page_id"]}


def _anchor(raw: Any) -> str | None:
    if raw is None:
        return None
    path, lines = raw.get("path"), raw.get("lines")
    if not (isinstance(path, str) and path and isinstance(lines, list) and len(lines) == 2
            and all(type(n) is int for n in lines) and 1 <= lines[0] <= lines[1]):
        raise Refuse("invalid", "an anchor is {path, lines: [start, end]}, 1-based")
    return json.dumps({"path": path, "lines": lines}, sort_keys=True)


def entry_citation_check(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    entry = _entry(conn, p["entry_id"])
    index, result = p["index"], p["result"]
    n = len(json.loads(entry["citations"] or "[]"))
    if not 1 <= index <= n:
        raise Refuse("invalid", f"entry {entry['id']} has {n} citation(s); there is no citation {index}")
    if result not in CHECK_RESULTS:
        raise Refuse("invalid", f"a check says one of {', '.join(CHECK_RESULTS)}, not {result!r}")
    anchor = _anchor(p.get("anchor"))
    conn.execute("INSERT INTO citation_checks (op_id, idx, entry_id, seq, result, commit_id, blob, anchor, message, "
                 "checked_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                 (rec.op_id, index, entry["id"], rec.seq, result, p.get("commit"), p.get("blob"), anchor,
                  p.get("message"), rec.at))
    return {"entry_id": entry["id"], "page_id": entry["page_id"], "index": index, "result": result}


def page_policy(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    by = _by(rec)
    policy = p["policy"]
    if policy not in POLICIES:
        raise Refuse("invalid", f"a page's entry policy is one of {', '.join(POLICIES)}, not {policy!r}")
    page = _live_page(conn, p["page_id"])
    if by != PERSON:
        raise Refuse("forbidden", f"a page's entry policy is a person's to set: {rec.actor} is not a person")
    before = policy_of(conn, page["id"])
    if before == policy:
        raise Noop(f"{page['container']}/{page['title']} is {policy} already", {"page_id": page["id"],
                                                                                 "policy": policy})
    conn.execute("INSERT INTO page_policies (op_id, page_id, seq, policy, set_by, set_at) VALUES (?,?,?,?,?,?)",
                 (rec.op_id, page["id"], rec.seq, policy, rec.actor, rec.at))
    return {"page_id": page["id"], "policy": policy, "from": before}


def page_about(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    kind, item, linked = p["item_kind"], p["item"].strip(), bool(p["linked"])
    if kind not in ABOUT_KINDS:
        raise Refuse("invalid", f"a page is about one of {', '.join(ABOUT_KINDS)}, not {kind!r}")
    if not item:
        raise Refuse("invalid", f"a page linked to an empty {kind}")
    page = _live_page(conn, p["page_id"])
    if kind == "page" and linked:
        if item == page["id"]:
            raise Refuse("invalid", f"{page['container']}/{page['title']} cannot be about itself")
        _live_page(conn, item)
    now = about_links(conn, page["id"])
    if ((kind, item) in now) == linked:
        raise Noop(f"{page['container']}/{page['title']} is {'already' if linked else 'not'} linked to {kind} "
                   f"{item}", {"page_id": page["id"], "item_kind": kind, "item": item, "linked": linked})
    conn.execute("INSERT INTO page_about (op_id, page_id, seq, item_kind, item, linked, set_by, set_at) "
                 "VALUES (?,?,?,?,?,?,?,?)", (rec.op_id, page["id"], rec.seq, kind, item, int(linked), rec.actor,
                                              rec.at))
    return {"page_id": page["id"], "item_kind": kind, "item": item, "linked": linked}


def entry_serve(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    served: dict[str, int] = {}
    for item in p["entries"]:
        entry_id, rank = item.get("entry_id"), item.get("rank")
        if isinstance(entry_id, str) and type(rank) is int and entry_id not in served:
            served[entry_id] = rank
    known = [e for e in served if conn.execute("SELECT 1 FROM entries WHERE id = ?", (e,)).fetchone() is not None]
    if not known:
        raise Noop("a serve of no entry in the bank is not a serve")
    conn.executemany("INSERT INTO entry_serves (op_id, entry_id, actor, at, via, query, rank, run) "
                     "VALUES (?,?,?,?,?,?,?,?)",
                     [(rec.op_id, e, rec.actor, rec.at, p["via"], p.get("query"), served[e], p.get("run"))
                      for e in known])
    return {"served": len(known)}
