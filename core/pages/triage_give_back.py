"""How a repair gives back each triage kind the log lost (the `GiveBack` of core/replica/kinds.py), from a database
that applied it: a decision is its triage_decisions row (keyed by its op_id, every part of the payload kept), an
audit's answer its triage_audits row (`answer_op`), a back-off change its triage_states row. The rows a decision
or an answer wrote beside those (the entry's status and history, a corroboration, a verdict) follow from them
when the replay applies the record again. When the rows went with a purged page (an entry's triage rows go with
it by their foreign keys), the record stands in as its outcome says it applied — the purge then removes what it
wrote: the replay proves it (core/repair.py).
"""
from __future__ import annotations

import json
from typing import Any

from ..log import Record
from ..replica.kinds import REPAIR_ACTOR, CannotSay, Related, at_of
from .entry_give_back import _purged
from .entry_model import PERSON
from .give_back import PURGED_SINCE, _outcome, _rec

Candidates = tuple[list[Record], str]
_NOT_KEPT = "what triage read is not kept (its entry's page was purged since)"


def triage_decide(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    result = _outcome(op)
    row = conn.execute("SELECT * FROM triage_decisions WHERE op_id = ?", (op["op_id"],)).fetchone()
    if row is None:
        _purged(conn, result.get("page_id"))
        # it applies to the stand-in entry as it did, from its outcome: what it read is not kept
        return [_rec(op, REPAIR_ACTOR, at_of(op["op_id"]), {
            "entry_id": result.get("entry_id"), "entry_version": result.get("entry_version"),
            "mode": result.get("mode"), "decision": result.get("decision"), "acted": bool(result.get("acted")),
            "reasons": [], "held": [], "fold_into": result.get("fold_into"), "refusal": result.get("refusal"),
            "inputs": {}, "audited": bool(result.get("audited"))})], _NOT_KEPT
    return [_rec(op, row["actor"], row["at"], {
        "entry_id": row["entry_id"], "entry_version": row["entry_version"], "mode": row["mode"],
        "decision": row["decision"], "acted": bool(row["acted"]), "reasons": json.loads(row["reasons"]),
        "held": json.loads(row["held"]), "fold_into": row["fold_into"], "refusal": row["refusal"],
        "inputs": json.loads(row["inputs"]), "audited": bool(row["audited"])})], ""


def triage_audit(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    result = _outcome(op)
    row = conn.execute("SELECT * FROM triage_audits WHERE answer_op = ?", (op["op_id"],)).fetchone()
    if row is None:
        _purged(conn, result.get("page_id"))
        return [_rec(op, REPAIR_ACTOR, at_of(op["op_id"]), {"decision_id": result.get("decision_id"),
                                                            "answer": result.get("answer"), "by": PERSON})], \
            PURGED_SINCE
    # only a person answers an audit (anything else was refused, and a refusal is given back as its outcome)
    return [_rec(op, row["answered_by"], row["answered_at"], {"decision_id": row["decision_id"],
                                                              "answer": row["answer"], "by": PERSON})], ""


def triage_state(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    row = conn.execute("SELECT * FROM triage_states WHERE op_id = ?", (op["op_id"],)).fetchone()
    if row is None:
        raise CannotSay("its back-off state is no longer in the database")
    return [_rec(op, row["actor"], row["at"], {"decision_type": row["decision_type"], "state": row["state"],
                                               "figures": json.loads(row["figures"])})], ""
