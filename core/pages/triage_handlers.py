"""The triage kinds' handlers (spec 003, issue 36): what triage decided about an entry, a person's answer to an
audit of it, a decision type's back-off state — and the verdict a person's action on an entry gives the decision
triage made about it (`action_verdict`, called by the entry.status handler and nowhere else).

Everything that depends on order is decided here from the rows as they are when the record applies, so every
node shows the same queue and the same kappa: a decision about an entry that changed since triage read it is
stale (a no-op), an undo finds the entry as triage left it or is refused. Each handler refuses (or finds nothing
to do) before its first write. Registered by its declaration (pages/kinds.py); the words are triage_model's.
"""
from __future__ import annotations

import json
from typing import Any

from ..log import Record
from ..replica.appliers import Noop, Refuse
from ..store import Connection
from .entry_model import ARCHIVED, IN_USE, OUT_OF_USE, PERSON, PROPOSED, STANDING, SYSTEM, WRITERS
from .handlers import _live_page
from .triage_model import (ACCEPT, ANSWERS, BACKS_OFF, CORROBORATE, DECISIONS, DISAGREE, ESCALATE, FROM_ACTION,
                           FROM_AUDIT, HOLDS, ON, REASONS, RECORDED_MODES, REFUSALS, REFUSE, STATES, ACTING,
                           audit_label, audited_kind, ordered_reasons, person_label, verdict_of)

_ENTRY = "SELECT id, page_id, status, author, version, supersedes FROM entries WHERE id = ?"
# what an acted decision leaves the entry as, and the history's action for it
_LEAVES = {ACCEPT: STANDING, CORROBORATE: ARCHIVED, REFUSE: ARCHIVED}
_ACTION = {ACCEPT: "triage-accept", CORROBORATE: "triage-fold", REFUSE: "triage-refuse"}
_REFUSED_FOR = {"several_claims": "several claims", "credential": "credential"}
UNDO = "triage-undo"        # the history's action when a person's disagreement with an audit undoes a decision


def _history(conn: Connection, rec: Record, entry_id: str, by: str, action: str, before: str, after: str,
             reason: str | None) -> None:
    conn.execute("INSERT INTO entry_history (op_id, entry_id, seq, actor, actor_kind, at, action, from_status, "
                 "to_status, reason) VALUES (?,?,?,?,?,?,?,?,?,?)",
                 (rec.op_id, entry_id, rec.seq, rec.actor, by, rec.at, action, before, after, reason))


def _set_status(conn: Connection, rec: Record, entry_id: str, status: str, reason: str) -> None:
    conn.execute("UPDATE entries SET status = ?, status_by = ?, status_at = ?, status_reason = ?, version = ? "
                 "WHERE id = ?", (status, rec.actor, rec.at, reason, rec.seq, entry_id))


def _entry(conn: Connection, entry_id: str) -> Any:
    row = conn.execute(_ENTRY, (entry_id,)).fetchone()
    if row is None:
        raise Refuse("not_found", f"no entry {entry_id}")
    return row


def _known(rec: Record, key: str, allowed: tuple[str, ...]) -> list[str]:
    given = rec.payload[key]
    unknown = [r for r in given if r not in allowed]
    if unknown:
        raise Refuse("invalid", f"triage.decide {key} {', '.join(map(repr, unknown))}: each is one of "
                     f"{', '.join(allowed)}")
    return ordered_reasons(given)


def _checked_decision(rec: Record) -> tuple[list[str], list[str]]:
    """The payload's words checked against triage_model's (before any row is read): its reasons and holds in
    table order, the holds among the reasons."""
    p = rec.payload
    mode, decision, refusal, fold_into = p["mode"], p["decision"], p["refusal"], p["fold_into"]
    if mode not in RECORDED_MODES:
        raise Refuse("invalid", f"a triage decision is recorded in mode {' or '.join(RECORDED_MODES)}, not {mode!r}")
    if decision not in DECISIONS:
        raise Refuse("invalid", f"triage decides one of {', '.join(DECISIONS)}, not {decision!r}")
    held = _known(rec, "held", HOLDS)
    reasons = ordered_reasons(_known(rec, "reasons", REASONS) + held)
    if (decision == CORROBORATE) != bool(fold_into):
        raise Refuse("invalid", "a fold names the entry it folds into (fold_into), and only a fold does")
    if (decision == REFUSE) != (refusal is not None):
        raise Refuse("invalid", "a refusal says why (refusal), and only a refusal does")
    if refusal is not None and refusal not in REFUSALS:
        raise Refuse("invalid", f"triage refuses for one of {', '.join(REFUSALS)}, not {refusal!r}")
    if fold_into == p["entry_id"]:
        raise Refuse("invalid", f"entry {fold_into} cannot be folded into itself")
    if p["acted"] and (mode != ON or held or decision == ESCALATE):
        raise Refuse("invalid", "triage acts only in mode on, on a decision no reason held back, and never on an "
                     "escalation (a person decides it)")
    if p["audited"] and not (p["acted"] and audited_kind(decision, refusal)):
        raise Refuse("invalid", "only a decision triage acted on is audited: an acceptance, a fold or a refusal for "
                     "several claims (never a credential refusal: a person would be shown the credential)")
    return reasons, held


def triage_decide(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    reasons, held = _checked_decision(rec)
    decision, acted, fold_into, refusal = p["decision"], bool(p["acted"]), p["fold_into"], p["refusal"]
    entry = _entry(conn, p["entry_id"])
    page = _live_page(conn, entry["page_id"])
    done = {"entry_id": entry["id"], "page_id": page["id"], "decision": decision, "mode": p["mode"],
            "acted": acted, "audited": bool(p["audited"]), "entry_version": p["entry_version"],
            "fold_into": fold_into, "refusal": refusal}
    if entry["status"] != PROPOSED or entry["version"] != p["entry_version"]:
        raise Noop(f"entry {entry['id']} changed since triage read it (it is {entry['status']} at version "
                   f"{entry['version']}; triage read version {p['entry_version']}): decide again", done)
    if conn.execute("SELECT 1 FROM triage_decisions WHERE entry_id = ? AND entry_version = ?",
                    (entry["id"], p["entry_version"])).fetchone() is not None:
        raise Noop(f"entry {entry['id']} was decided at version {p['entry_version']} already", done)
    status = entry["status"]
    if acted:
        if decision == ACCEPT and entry["supersedes"]:
            raise Refuse("invalid", f"entry {entry['id']} corrects {entry['supersedes']}: only a person's acceptance "
                         "retires what it corrects (SUPERSEDE_REQUEST)")
        if decision == CORROBORATE:
            target = conn.execute(_ENTRY, (fold_into,)).fetchone()
            if target is None:
                raise Refuse("not_found", f"no entry {fold_into} to fold entry {entry['id']} into")
            if target["status"] in OUT_OF_USE:
                raise Refuse("out_of_use", f"entry {fold_into} is {target['status']}: triage folds a repeat only into "
                             "an entry still in the bank")
        status = _LEAVES[decision]
        reason = ("accepted by triage" if decision == ACCEPT else f"folded into {fold_into} by triage"
                  if decision == CORROBORATE else f"refused by triage: {_REFUSED_FOR[refusal or '']}")
        _set_status(conn, rec, entry["id"], status, reason)
        _history(conn, rec, entry["id"], SYSTEM, _ACTION[decision], PROPOSED, status, reason)
        if decision == CORROBORATE:
            # the repeat counts once more for the entry it repeats, with who wrote it
            conn.execute("INSERT INTO entry_corroborations (op_id, entry_id, actor, at) VALUES (?,?,?,?)",
                         (rec.op_id, fold_into, entry["author"], rec.at))
    conn.execute("INSERT INTO triage_decisions (op_id, entry_id, entry_version, seq, actor, at, mode, decision, acted, "
                 "reasons, held, fold_into, refusal, inputs, audited) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                 (rec.op_id, entry["id"], p["entry_version"], rec.seq, rec.actor, rec.at, p["mode"], decision,
                  int(acted), json.dumps(reasons), json.dumps(held), fold_into, refusal,
                  json.dumps(p["inputs"], sort_keys=True), int(bool(p["audited"]))))
    if p["audited"]:
        conn.execute("INSERT INTO triage_audits (decision_id, entry_id, opened_seq) VALUES (?,?,?)",
                     (rec.op_id, entry["id"], rec.seq))
    return {**done, "status": status}


def _verdict(conn: Connection, rec: Record, decision: Any, label: str, verdict: str, source: str) -> None:
    conn.execute("INSERT INTO triage_verdicts (op_id, decision_id, entry_id, decision, label, verdict, source, actor, "
                 "at, seq) VALUES (?,?,?,?,?,?,?,?,?,?)",
                 (rec.op_id, decision["op_id"], decision["entry_id"], decision["decision"], label, verdict, source,
                  rec.actor, rec.at, rec.seq))


def triage_audit(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    answer, by, decision_id = p["answer"], p["by"], p["decision_id"]
    if answer not in ANSWERS:
        raise Refuse("invalid", f"an audit is answered {' or '.join(ANSWERS)}, not {answer!r}")
    if by not in WRITERS:
        raise Refuse("invalid", f"triage.audit by '{by}': a writer is one of {', '.join(WRITERS)}")
    if by != PERSON:
        raise Refuse("forbidden", f"to answer an audit is a person's: {rec.actor} is not a person")
    audit = conn.execute("SELECT * FROM triage_audits WHERE decision_id = ?", (decision_id,)).fetchone()
    if audit is None:
        raise Refuse("not_found", f"no audit of decision {decision_id}")
    decision = conn.execute("SELECT * FROM triage_decisions WHERE op_id = ?", (decision_id,)).fetchone()
    done = {"decision_id": decision_id, "entry_id": audit["entry_id"], "answer": answer}
    if audit["answer"] is not None:
        if audit["answer"] == answer:
            raise Noop(f"the audit of decision {decision_id} was answered {answer} already", done)
        raise Refuse("answered", f"the audit of decision {decision_id} was answered {audit['answer']} by "
                     f"{audit['answered_by']}; it stays answered")
    entry = _entry(conn, audit["entry_id"])
    label = audit_label(decision["decision"], answer)
    status = entry["status"]
    if answer == DISAGREE:
        _live_page(conn, entry["page_id"])      # an undo changes the entry: not under a page in the trash
        left = _LEAVES[decision["decision"]]
        if entry["status"] != left:
            raise Refuse("changed_since", f"entry {entry['id']} is {entry['status']}, no longer {left} as triage left "
                         "it: a person changed it since, so there is nothing to undo")
        status = ARCHIVED if decision["decision"] == ACCEPT else STANDING
        reason = f"{rec.actor} disagreed with triage's {decision['decision']} (audit)"
        _set_status(conn, rec, entry["id"], status, reason)
        _history(conn, rec, entry["id"], PERSON, UNDO, left, status, reason)
        # a fold undone: the entry is no repeat, so it no longer counts for the one it was folded into
        conn.execute("DELETE FROM entry_corroborations WHERE op_id = ?", (decision_id,))
    conn.execute("UPDATE triage_audits SET answer = ?, answered_by = ?, answered_at = ?, answer_op = ? "
                 "WHERE decision_id = ?", (answer, rec.actor, rec.at, rec.op_id, decision_id))
    _verdict(conn, rec, decision, label, verdict_of(decision["decision"], label, False), FROM_AUDIT)
    return {**done, "page_id": entry["page_id"], "status": status}


def triage_state(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    kind, state = p["decision_type"], p["state"]
    if kind not in BACKS_OFF:
        raise Refuse("invalid", f"a back-off state is kept for {', '.join(BACKS_OFF)}, not {kind!r} (escalation is "
                     "measured and never backs off)")
    if state not in STATES:
        raise Refuse("invalid", f"a decision type's state is one of {', '.join(STATES)}, not {state!r}")
    done = {"decision_type": kind, "state": state}
    if current_state(conn, kind) == state:
        raise Noop(f"triage's {kind} decisions are {state} already", done)
    conn.execute("INSERT INTO triage_states (op_id, decision_type, state, figures, actor, at, seq) "
                 "VALUES (?,?,?,?,?,?,?)",
                 (rec.op_id, kind, state, json.dumps(p["figures"], sort_keys=True), rec.actor, rec.at, rec.seq))
    return done


def current_state(conn: Connection, decision_type: str) -> str:
    """A decision type's back-off state now: its latest change, else acting."""
    row = conn.execute("SELECT state FROM triage_states WHERE decision_type = ? ORDER BY seq DESC LIMIT 1",
                       (decision_type,)).fetchone()
    return row[0] if row is not None else ACTING


def action_verdict(conn: Connection, rec: Record, entry_id: str, by: str, after: str) -> dict[str, str] | None:
    """The verdict a person's status action (record `rec`, leaving the entry `after`) gives the latest decision
    triage recorded about the entry, when that decision has none from a person's action yet: one per decision.
    Written in the entry.status handler's transaction, after its own rows; None when it gives none."""
    if by != PERSON:
        return None
    decision = conn.execute("SELECT * FROM triage_decisions WHERE entry_id = ? ORDER BY seq DESC LIMIT 1",
                            (entry_id,)).fetchone()
    if decision is None or conn.execute("SELECT 1 FROM triage_verdicts WHERE decision_id = ? AND source = ?",
                                        (decision["op_id"], FROM_ACTION)).fetchone() is not None:
        return None
    edited = conn.execute("SELECT 1 FROM entry_history WHERE entry_id = ? AND action = 'edit' AND actor_kind = ? "
                          "AND seq > ? LIMIT 1", (entry_id, PERSON, decision["seq"])).fetchone() is not None
    label = person_label(decision["decision"], after in IN_USE, edited)
    verdict = verdict_of(decision["decision"], label, edited)
    _verdict(conn, rec, decision, label, verdict, FROM_ACTION)
    return {"decision_id": decision["op_id"], "label": label, "verdict": verdict}
