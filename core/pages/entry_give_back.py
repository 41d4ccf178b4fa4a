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
from .entry_model import AGENT, PERSON
from .give_back import PURGED_SINCE, _gone, _outcome, _rec

Candidates = tuple[list[Record], str]
_STAND_IN = "(not kept: purged with its page)"


def _history(conn: Any, op_id: str, entry_id: str) -> Any:
    return conn.execute("SELECT * FROM entry_history WHERE op_id = ? AND entry_id = ?", (op_id, entry_id)).fetchone()


def _purged(conn: Any, page_id: Any) -> None:
    """The rows are gone: say so unless the page they were under was purged (then a stand-in applies alike)."""
    if not isinstance(page_id, str) or _gone(conn, page_id) is None:
        raise CannotSay("its rows are no longer in the database")


def entry_add(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    result = _outcome(op)
    entry_id, page_id = result.get("entry_id"), result.get("page_id")
    entry = conn.execute("SELECT * FROM entries WHERE id = ?", (entry_id,)).fetchone()
    if result.get("folded"):
        # an exact repeat, folded: its own text is not kept, the entry it repeated stands for it
        row = conn.execute("SELECT actor, at FROM entry_corroborations WHERE op_id = ?", (op["op_id"],)).fetchone()
        if row is None or entry is None:
            _purged(conn, page_id)
            actor, at, body, kind = REPAIR_ACTOR, at_of(op["op_id"]), _STAND_IN, "FACT"
        else:
            body, kind, _scope = _said_after(conn, entry, seq)     # what the entry said when it was repeated
            actor, at = row["actor"], row["at"]
        return [_rec(op, actor, at, {"entry_id": op["op_id"][:16], "page_id": page_id, "kind": kind, "body": body,
                                     "by": by, "scope": None, "citations": []}) for by in (AGENT, PERSON)], \
            "its own text is not kept: the entry it repeated stands for it"
    if entry is None:
        _purged(conn, page_id)
        return [_rec(op, REPAIR_ACTOR, at_of(op["op_id"]), {
            "entry_id": entry_id, "page_id": page_id, "kind": "FACT", "body": _STAND_IN, "by": by, "scope": None,
            "citations": []}) for by in (AGENT, PERSON)], PURGED_SINCE
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
        return [_rec(op, REPAIR_ACTOR, at_of(op["op_id"]), {"entry_id": entry_id, "body": _STAND_IN, "kind": "FACT",
                                                            "scope": None, "by": PERSON})], PURGED_SINCE
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
        return [_rec(op, REPAIR_ACTOR, at_of(op["op_id"]), {"entry_id": entry_id, "action": result.get("action"),
                                                            "by": PERSON})], PURGED_SINCE
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


def entry_serve(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    _outcome(op)
    rows = conn.execute("SELECT * FROM entry_serves WHERE op_id = ? ORDER BY rank, entry_id",
                        (op["op_id"],)).fetchall()
    if not rows:
        raise CannotSay("its serve is not in the database (its entries went with a purged page)")
    first = rows[0]
    payload: dict[str, Any] = {"via": first["via"], "query": first["query"],
                               "entries": [{"entry_id": r["entry_id"], "rank": r["rank"]} for r in rows]}
    if first["run"] is not None:
        payload["run"] = first["run"]
    return [_rec(op, first["actor"], first["at"], payload)], ""
