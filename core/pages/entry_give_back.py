"""How a repair gives back each entry kind the log lost (the `GiveBack` of core/replica/kinds.py), from a database
that applied it: every entry record leaves a row keyed by its op_id — an entry's history row (who, which kind of
writer, what it did, why), a corroboration, a check, a policy, a serve — so each is rebuilt as itself. An entry
added is read off its row (its body, citations and kind never change after). When the rows went with a purged
page, any record that applies and is then purged stands in: the replay proves it (core/repair.py).
"""
from __future__ import annotations

import json
from typing import Any

from ..log import Record
from ..replica.kinds import REPAIR_ACTOR, CannotSay, Related, at_of
from .entry_model import AGENT, ARCHIVE, ARCHIVED, DISPUTE, PERSON, PROPOSED, SYSTEM
from .give_back import PURGED_SINCE, _gone, _outcome, _rec

Candidates = tuple[list[Record], str]
_STAND_IN = "(not kept: purged with its page)"


def _history(conn: Any, op_id: str, entry_id: str) -> Any:
    return conn.execute("SELECT * FROM entry_history WHERE op_id = ? AND entry_id = ?", (op_id, entry_id)).fetchone()


def _purged(conn: Any, page_id: Any) -> None:
    """The rows are gone: say so unless the page they were under was purged (then a stand-in applies alike)."""
    if not isinstance(page_id, str) or _gone(conn, page_id) is None:
        raise CannotSay("its rows are no longer in the database")


def _applied(conn: Any, op_id: str) -> dict[str, Any] | None:
    """The outcome `conn` gave the record `op_id`, when it applied it (None: refused, a no-op, or not applied)."""
    row = conn.execute("SELECT status, result FROM applied_ops WHERE op_id = ?", (op_id,)).fetchone()
    if row is None or row["status"] != "applied":
        return None
    try:
        result = json.loads(row["result"] or "{}")
    except ValueError:
        return None
    return result if isinstance(result, dict) else None


def _next_edit(related: Related, entry_id: str, seq: int) -> int:
    """The seq of the entry's next edit on the log after `seq` (what it said stood until then)."""
    return min((r.seq for r in related.about(entry_id) if r.type == "entry.edit" and r.seq > seq), default=1 << 62)


def _said_then(conn: Any, related: Related, entry_id: str, page_id: Any, seq: int) -> str | None:
    """What a purged entry said just after record `seq`, when the log still says it: a later add on its page that
    the database folded into it before its next edit repeated it (folded alike: the fold is all a later record
    reads of it)."""
    until = _next_edit(related, entry_id, seq)
    for r in related.about(page_id if isinstance(page_id, str) else None):
        if r.type == "entry.add" and seq < r.seq < until and isinstance(r.payload.get("body"), str):
            out = _applied(conn, r.op_id)
            if out is not None and out.get("folded") and out.get("entry_id") == entry_id:
                return r.payload["body"]
    return None


def _text_at(conn: Any, related: Related, entry_id: str, page_id: Any, seq: int) -> str | None:
    """What a purged entry said when record `seq` applied, when the log still says it: its own add or latest edit
    before `seq`, or a repeat the database folded into it while it said the same."""
    said, since = None, 0
    for r in related.about(entry_id):
        if r.seq >= seq or r.type not in ("entry.add", "entry.edit") or r.payload.get("entry_id") != entry_id:
            continue
        out = _applied(conn, r.op_id)
        if out is not None and not out.get("folded") and isinstance(r.payload.get("body"), str) and r.seq > since:
            said, since = r.payload["body"], r.seq
    return said or _said_then(conn, related, entry_id, page_id, since)


def _stand_in(seq: int) -> str:
    # one text per record: two edits of a purged entry given back alike would make the second a no-op
    return f"{_STAND_IN} (seq {seq})"


def _purged_entry(conn: Any, seq: int, op: Any, related: Related, result: dict[str, Any]) -> Candidates:
    """An entry added under a page purged since: a stand-in that every later record of it applies to as it did —
    as many citations as its later checks read, the entry it corrects, and the text a later repeat was folded
    into when the log still has that repeat — and that the purge then removes."""
    entry_id, page_id = result.get("entry_id"), result.get("page_id")
    # an agent's entry was proposed, a person's standing (its outcome says which); an agent's own later edit or
    # archive of it, applied, names the agent (only its author may)
    by = AGENT if result.get("status") == PROPOSED else PERSON
    cited, supersedes, author = 0, result.get("superseded"), REPAIR_ACTOR
    for r in related.about(entry_id):
        out = _applied(conn, r.op_id) if r.seq > seq else None
        if out is None:
            continue
        if r.type == "entry.citation_check" and type(r.payload.get("index")) is int:
            cited = max(cited, r.payload["index"])
        elif r.type == "entry.status" and out.get("superseded"):
            supersedes = supersedes or out["superseded"]
        if by == AGENT and r.type in ("entry.edit", "entry.status") and r.payload.get("by") == AGENT:
            author = r.actor
        elif r.type == "triage.decide" and out.get("status") == ARCHIVED and out.get("fold_into"):
            # triage folded it into an entry under a page that may stay: that corroboration names its author
            row = conn.execute("SELECT actor FROM entry_corroborations WHERE op_id = ?", (r.op_id,)).fetchone()
            author = row["actor"] if row is not None else author
    body = _said_then(conn, related, str(entry_id), page_id, seq) or _stand_in(seq)
    payload: dict[str, Any] = {"entry_id": entry_id, "page_id": page_id, "kind": "FACT", "body": body, "scope": None,
                               "by": by, "citations": [{"link": _STAND_IN, "kind": "issue"}] * cited}
    if supersedes:
        payload["supersedes"] = supersedes
    return [_rec(op, author, at_of(op["op_id"]), payload)], PURGED_SINCE


def entry_add(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    result = _outcome(op)
    entry_id, page_id = result.get("entry_id"), result.get("page_id")
    entry = conn.execute("SELECT * FROM entries WHERE id = ?", (entry_id,)).fetchone()
    if result.get("folded"):
        # an exact repeat, folded: its own text is not kept, the entry it repeated stands for it
        row = conn.execute("SELECT actor, at FROM entry_corroborations WHERE op_id = ?", (op["op_id"],)).fetchone()
        if row is None or entry is None:
            _purged(conn, page_id)
            # folded alike into the entry as it stood then: what it said, when the log still says it
            body = _text_at(conn, related, str(entry_id), page_id, seq) or _STAND_IN
            actor, at, kind = REPAIR_ACTOR, at_of(op["op_id"]), "FACT"
        else:
            body, kind, _scope = _said_after(conn, entry, seq)     # what the entry said when it was repeated
            actor, at = row["actor"], row["at"]
        return [_rec(op, actor, at, {"entry_id": op["op_id"][:16], "page_id": page_id, "kind": kind, "body": body,
                                     "by": by, "scope": None, "citations": []}) for by in (AGENT, PERSON)], \
            "its own text is not kept: the entry it repeated stands for it"
    if entry is None:
        _purged(conn, page_id)
        return _purged_entry(conn, seq, op, related, result)
    added = _history(conn, op["op_id"], entry_id)
    if added is None:
        raise CannotSay(f"entry {entry_id} keeps no record of its adding")
    body, kind, scope = _said_after(conn, entry, added["seq"])
    payload: dict[str, Any] = {"entry_id": entry_id, "page_id": entry["page_id"], "kind": kind, "body": body,
                               "by": added["actor_kind"], "scope": scope,
                               "citations": json.loads(entry["citations"])}
    checks = []
    for c in conn.execute("SELECT * FROM citation_checks WHERE op_id = ? ORDER BY idx", (op["op_id"],)):
        check = {"index": c["idx"], "result": c["result"], "commit": c["commit_id"], "blob": c["blob"]}
        if c["message"] is not None:
            check["message"] = c["message"]
        checks.append(check)
    if checks:
        payload["checks"] = checks
    if entry["supersedes"]:
        payload["supersedes"] = entry["supersedes"]
    return [_rec(op, added["actor"], added["at"], payload)], ""


def _said_after(conn: Any, entry: Any, seq: int) -> tuple[str, str, str | None]:
    """What the entry said just after record `seq`: the next edit's before-values, else what it says now."""
    nxt = conn.execute("SELECT body_before, kind_before, scope_before FROM entry_history WHERE entry_id = ? AND "
                       "action = 'edit' AND seq > ? ORDER BY seq LIMIT 1", (entry["id"], seq)).fetchone()
    if nxt is not None:
        return nxt["body_before"], nxt["kind_before"], nxt["scope_before"]
    return entry["body"], entry["kind"], entry["scope"]


def entry_edit(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    result = _outcome(op)
    entry_id = result.get("entry_id")
    row = _history(conn, op["op_id"], entry_id)
    entry = conn.execute("SELECT * FROM entries WHERE id = ?", (entry_id,)).fetchone()
    if row is None or entry is None:
        _purged(conn, result.get("page_id"))
        body = _said_then(conn, related, str(entry_id), result.get("page_id"), seq) or _stand_in(seq)
        return [_rec(op, REPAIR_ACTOR, at_of(op["op_id"]), {"entry_id": entry_id, "body": body, "kind": "FACT",
                                                            "scope": None, "by": by}) for by in (PERSON, AGENT)], \
            PURGED_SINCE
    body, kind, scope = _said_after(conn, entry, row["seq"])
    payload: dict[str, Any] = {"entry_id": entry_id, "body": body, "kind": kind, "scope": scope,
                               "by": row["actor_kind"]}
    if row["reason"] is not None:
        payload["reason"] = row["reason"]
    return [_rec(op, row["actor"], row["at"], payload)], ""


def entry_status(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    result = _outcome(op)
    entry_id = result.get("entry_id")
    row = _history(conn, op["op_id"], entry_id)
    if row is None:
        _purged(conn, result.get("page_id"))
        # a person's, unless it gave no verdict where a person's would have (an agent's or a duty's archive or
        # dispute of an entry triage decided about): then crewlet's stands in, which may archive and dispute too
        by = [PERSON] if "verdict" in result or result.get("action") not in (ARCHIVE, DISPUTE) else [PERSON, SYSTEM]
        return [_rec(op, REPAIR_ACTOR, at_of(op["op_id"]), {"entry_id": entry_id, "action": result.get("action"),
                                                            "by": who}) for who in by], PURGED_SINCE
    payload: dict[str, Any] = {"entry_id": entry_id, "action": row["action"], "by": row["actor_kind"]}
    if row["reason"] is not None:
        payload["reason"] = row["reason"]
    return [_rec(op, row["actor"], row["at"], payload)], ""


def entry_corroborate(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    result = _outcome(op)
    row = conn.execute("SELECT * FROM entry_corroborations WHERE op_id = ?", (op["op_id"],)).fetchone()
    if row is None:
        _purged(conn, result.get("page_id"))
        return [_rec(op, REPAIR_ACTOR, at_of(op["op_id"]), {"entry_id": result.get("entry_id")})], PURGED_SINCE
    return [_rec(op, row["actor"], row["at"], {"entry_id": row["entry_id"]})], ""


def entry_citation_check(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    result = _outcome(op)
    row = conn.execute("SELECT * FROM citation_checks WHERE op_id = ?", (op["op_id"],)).fetchone()
    if row is None:
        _purged(conn, result.get("page_id"))
        return [_rec(op, REPAIR_ACTOR, at_of(op["op_id"]), {
            "entry_id": result.get("entry_id"), "index": result.get("index"), "result": result.get("result"),
            "commit": None, "blob": None})], PURGED_SINCE
    payload: dict[str, Any] = {"entry_id": row["entry_id"], "index": row["idx"], "result": row["result"],
                               "commit": row["commit_id"], "blob": row["blob"]}
    if row["anchor"] is not None:
        payload["anchor"] = json.loads(row["anchor"])
    if row["message"] is not None:
        payload["message"] = row["message"]
    # a duty's check names no writer but crewlet's: the row keeps no actor, the record's own instant does
    return [_rec(op, REPAIR_ACTOR, row["checked_at"], payload)], ""


def page_policy(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    result = _outcome(op)
    row = conn.execute("SELECT * FROM page_policies WHERE op_id = ?", (op["op_id"],)).fetchone()
    if row is None:
        _purged(conn, result.get("page_id"))
        return [_rec(op, REPAIR_ACTOR, at_of(op["op_id"]), {"page_id": result.get("page_id"),
                                                            "policy": result.get("policy"), "by": PERSON})], ""
    return [_rec(op, row["set_by"], row["set_at"], {"page_id": row["page_id"], "policy": row["policy"],
                                                    "by": PERSON})], ""


def page_about(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    result = _outcome(op)
    row = conn.execute("SELECT * FROM page_about WHERE op_id = ?", (op["op_id"],)).fetchone()
    if row is None:
        _purged(conn, result.get("page_id"))
        return [_rec(op, REPAIR_ACTOR, at_of(op["op_id"]), {
            "page_id": result.get("page_id"), "item_kind": result.get("item_kind"), "item": result.get("item"),
            "linked": bool(result.get("linked"))})], ""
    return [_rec(op, row["set_by"], row["set_at"], {"page_id": row["page_id"], "item_kind": row["item_kind"],
                                                    "item": row["item"], "linked": bool(row["linked"])})], ""


def _purged_after(conn: Any, seq: int) -> list[str]:
    """Entries that stood at record `seq` under a page purged after it (their rows went with the page), as the
    database's outcomes name them: the adds it applied before `seq`, under a page a later purge took."""
    purged = {}
    for r in conn.execute("SELECT seq, result FROM applied_ops WHERE type = 'page.purge' AND status = 'applied' "
                          "AND seq > ?", (seq,)):
        page_id = json.loads(r["result"] or "{}").get("page_id")
        if isinstance(page_id, str):
            purged[page_id] = r["seq"]
    out = []
    for r in conn.execute("SELECT result FROM applied_ops WHERE type = 'entry.add' AND status = 'applied' AND seq < ? "
                          "ORDER BY seq", (seq,)):
        added = json.loads(r["result"] or "{}")
        if added.get("page_id") in purged and not added.get("folded") and isinstance(added.get("entry_id"), str):
            out.append(added["entry_id"])
    return out


def entry_serve(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    """A serve, from its rows; the entries of it that went with a purged page since stand in for by entries that
    stood then under a purged page (their rows go with it alike: only how many it served is left to match)."""
    served = _outcome(op).get("served")
    rows = conn.execute("SELECT * FROM entry_serves WHERE op_id = ? ORDER BY rank, entry_id",
                        (op["op_id"],)).fetchall()
    missing = (served - len(rows)) if type(served) is int else 0
    listed = [{"entry_id": r["entry_id"], "rank": r["rank"]} for r in rows]
    if missing > 0:
        here = {r["entry_id"] for r in rows}
        gone = [e for e in _purged_after(conn, seq) if e not in here][:missing]
        if len(gone) < missing:
            raise CannotSay("its serve is not all in the database (entries it served went with a purged page)")
        rank = max([r["rank"] for r in rows], default=0)
        listed += [{"entry_id": e, "rank": rank + i} for i, e in enumerate(gone, 1)]
    if not rows:
        return [_rec(op, REPAIR_ACTOR, at_of(op["op_id"]), {"via": _STAND_IN, "query": None, "entries": listed})], \
            "the entries it served went with a purged page: entries that stood then under it stand in for them"
    first = rows[0]
    payload: dict[str, Any] = {"via": first["via"], "query": first["query"], "entries": listed}
    if first["run"] is not None:
        payload["run"] = first["run"]
    return [_rec(op, first["actor"], first["at"], payload)], ""
