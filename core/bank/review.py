"""The review queue (spec 003, "The review queue"): what waits for a person, and a person's actions on it.

`Review(bank).queue()` lists the open consolidation proposals (issue 37; none until then), then every PROPOSED
entry with the reasons triage attached (its latest decision's; none when triage has not decided yet), then the
open audits (reason AUDIT). A person accepts, disputes, verifies or archives an entry, or answers an audit, from
here: each goes through the store, which refuses an agent (EntryBank's actions; the triage.audit handler), and
then `agreement.settle` records any back-off change the new verdict makes due. `status()` answers "Can triage
decide alone?" per decision type. Reads come from the rows triage's records fill (core/pages/triage_handlers.py).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..clock import calendar_now_ms
from ..errors import Invalid, NotFound, Refused
from ..pages import records
from ..pages.entry_model import PERSON, PROPOSED
from ..pages.triage_model import (ACCEPT, ANSWERS, AUDIT, CORROBORATE, HARMFUL_SIGNAL, REASONS, REFUSE,
                                  SEVERAL_CLAIMS)
from .agreement import Agreement, TypeAgreement, settle
from .entries import Entry, EntryBank
from .upkeep import HarmfulEntry, harmful_entries

_DECISION = "SELECT * FROM triage_decisions WHERE {where} ORDER BY seq DESC LIMIT 1"
_AUDIT = "SELECT answer FROM triage_audits WHERE decision_id = ?"


@dataclass(frozen=True)
class DecisionView:
    """One triage_decisions row as surfaces show it: what triage decided about an entry, and why."""

    id: str                     # the triage.decide record's op_id (the audit draw hashes it)
    entry_id: str
    mode: str                   # shadow | on, when it decided
    decision: str               # accept | corroborate | refuse | escalate
    acted: bool                 # it changed the entry
    reasons: list[str]          # escalation reasons and holds, table order
    held: list[str]             # the holds that kept a merits decision from acting
    fold_into: str | None
    refusal: str | None
    inputs: dict[str, Any]      # what it read and what each rule and judgment said
    audited: bool
    at: int
    actor: str
    entry_version: int = 0      # the entry's version as triage read it
    answer: str | None = None   # an audited decision: None while the audit is open, else agree | disagree

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "entry_id": self.entry_id, "mode": self.mode, "decision": self.decision,
                "acted": self.acted, "reasons": list(self.reasons), "held": list(self.held),
                "fold_into": self.fold_into, "refusal": self.refusal, "inputs": self.inputs,
                "audited": self.audited, "answer": self.answer, "at": self.at, "actor": self.actor,
                "entry_version": self.entry_version}


def _view(conn: Any, row: Any) -> DecisionView:
    answer = None
    if row["audited"]:
        audit = conn.execute(_AUDIT, (row["op_id"],)).fetchone()
        answer = audit["answer"] if audit is not None else None
    return DecisionView(
        id=row["op_id"], entry_id=row["entry_id"], mode=row["mode"], decision=row["decision"],
        acted=bool(row["acted"]), reasons=list(json.loads(row["reasons"] or "[]")),
        held=list(json.loads(row["held"] or "[]")), fold_into=row["fold_into"], refusal=row["refusal"],
        inputs=dict(json.loads(row["inputs"] or "{}")), audited=bool(row["audited"]), at=row["at"],
        actor=row["actor"], entry_version=row["entry_version"], answer=answer)


def latest_decision(conn: Any, entry_id: str) -> DecisionView | None:
    """The latest decision triage recorded about `entry_id` (None: it has not decided)."""
    row = conn.execute(_DECISION.format(where="entry_id = ?"), (entry_id,)).fetchone()
    return _view(conn, row) if row is not None else None


def decision_by_id(conn: Any, decision_id: str) -> DecisionView | None:
    """One decision by its id."""
    row = conn.execute(_DECISION.format(where="op_id = ?"), (decision_id,)).fetchone()
    return _view(conn, row) if row is not None else None


@dataclass(frozen=True)
class QueuedEntry:
    """A proposed entry waiting for a person, with why (its latest triage decision's reasons)."""

    entry: Entry
    reasons: list[str]
    decision: DecisionView | None       # None: triage has not decided about it yet
    stale: bool = False                 # the decision is about an earlier version (changed since): triage decides again

    def to_json(self) -> dict[str, Any]:
        return {"entry": self.entry.to_json(), "reasons": list(self.reasons), "triaged": self.decision is not None,
                "stale": self.stale, "decision": self.decision.to_json() if self.decision is not None else None}


def audit_question(view: DecisionView) -> str:
    """The one question an audit asks, with what each answer does."""
    if view.decision == ACCEPT:
        return "Triage accepted this entry on its own. Agree keeps it in use; disagree archives it."
    if view.decision == CORROBORATE:
        return (f"Triage folded this entry into {view.fold_into} as a repeat. Agree keeps it folded; "
                "disagree puts it into use.")
    if view.decision == REFUSE and view.refusal == SEVERAL_CLAIMS:
        return ("Triage refused this entry for holding more than one claim. Agree keeps it refused; "
                "disagree puts it into use.")
    return f"Triage decided {view.decision} on its own. Agree keeps what it did; disagree undoes it."


@dataclass(frozen=True)
class OpenAudit:
    """A sample of what triage did alone, for a person to agree or disagree with."""

    decision: DecisionView
    entry: Entry
    question: str

    def to_json(self) -> dict[str, Any]:
        return {"decision": self.decision.to_json(), "entry": self.entry.to_json(), "question": self.question,
                "reasons": [AUDIT], "answers": list(ANSWERS)}


@dataclass(frozen=True)
class ReviewQueue:
    proposals: list[dict[str, Any]]     # consolidation proposals: issue 37 fills them; [] until then
    entries: list[QueuedEntry]
    audits: list[OpenAudit]
    reason: str | None = None           # the filter asked for
    # HARMFUL_SIGNAL (issue 37): entries whose runs went wrong more than right, and conventions upkeep archived
    harmful: list[HarmfulEntry] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"reason": self.reason, "proposals": list(self.proposals),
                "entries": [q.to_json() for q in self.entries], "audits": [a.to_json() for a in self.audits],
                "harmful": [h.to_json() for h in self.harmful]}


@dataclass(frozen=True)
class TriageStatus:
    """"Can triage decide alone?": the mode, the back-off settings, and each decision type's agreement."""

    mode: str
    floor: float
    min_samples: int
    window_days: int
    types: list[TypeAgreement] = field(default_factory=list)
    open_audits: int = 0
    waiting: int = 0                    # proposed entries waiting for a person

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "floor": self.floor, "min_samples": self.min_samples,
                "window_days": self.window_days, "types": [t.to_json() for t in self.types],
                "open_audits": self.open_audits, "waiting": self.waiting}


def known_reason(reason: str) -> str:
    """`reason` as the spec's table spells it; an unknown one is refused naming the known ones."""
    said = reason.strip().upper()
    if said not in REASONS:
        raise Invalid(f"no escalation reason '{reason}' — use one of {', '.join(REASONS)}", code="unknown_reason")
    return said


class Review:
    """The review queue over an EntryBank (its node, its company's settings)."""

    def __init__(self, bank: EntryBank) -> None:
        self.bank = bank

    @property
    def _conn(self) -> Any:
        return self.bank.conn

    # -- reads ---------------------------------------------------------------------------------------------
    def queue(self, *, reason: str | None = None, actor: str | None = None) -> ReviewQueue:
        """What waits for a person, oldest first in each part. `reason`: only the entries with that reason (the
        audits when it is AUDIT; the proposals are not filtered)."""
        wanted = known_reason(reason) if reason is not None else None
        self.bank.kb.reader(actor)
        with self.bank.node.lock:
            versions = {r[0]: r[1] for r in self._conn.execute(
                "SELECT id, version FROM entries WHERE status = ? ORDER BY created_at, id", (PROPOSED,))}
            ids = list(versions)
            decided = {i: latest_decision(self._conn, i) for i in ids}
            open_audits = [r[0] for r in self._conn.execute(
                "SELECT decision_id FROM triage_audits WHERE answer IS NULL ORDER BY opened_seq, decision_id")]
        entries = []
        for entry_id in ids:
            view = decided[entry_id]
            reasons = list(view.reasons) if view is not None else []
            if wanted is not None and wanted not in reasons:
                continue
            shown = self._entry(entry_id)
            if shown is not None and shown.status == PROPOSED:      # not decided on since the look
                stale = view is not None and view.entry_version != versions[entry_id]
                entries.append(QueuedEntry(shown, reasons, view, stale))
        audits = []
        if wanted in (None, AUDIT):
            for decision_id in open_audits:
                with self.bank.node.lock:
                    view = decision_by_id(self._conn, decision_id)
                shown = self._entry(view.entry_id) if view is not None else None
                if view is not None and shown is not None:
                    audits.append(OpenAudit(view, shown, audit_question(view)))
        harmful: list[HarmfulEntry] = []
        if wanted in (None, HARMFUL_SIGNAL):
            with self.bank.node.lock:
                harmful = harmful_entries(self._conn)
        return ReviewQueue(proposals=[], entries=entries, audits=audits, reason=wanted, harmful=harmful)

    def _entry(self, entry_id: str) -> Entry | None:
        """The entry as the queue lists it: without its history, which `show` gives where one entry is read."""
        try:
            entry = self.bank.show(entry_id)
        except NotFound:            # purged with its page since the look
            return None
        entry.history = []
        return entry

    def decision(self, decision_id: str) -> DecisionView:
        """One triage decision by its id; a missing one is refused in one line."""
        with self.bank.node.lock:
            view = decision_by_id(self._conn, decision_id)
        if view is None:
            raise NotFound(f"no triage decision '{decision_id}' — `crewlet review` lists the open audits with "
                           "their decision ids", code="no_decision", decision_id=decision_id)
        return view

    def latest(self, entry_id: str, *, actor: str | None = None) -> DecisionView | None:
        """The latest decision triage recorded about an entry (None: it has not decided); a missing entry is
        refused in one line (`crewlet triage show`)."""
        self.bank.show(entry_id, actor=actor)
        with self.bank.node.lock:
            return latest_decision(self._conn, entry_id)

    def status(self, now: int | None = None) -> TriageStatus:
        """Can triage decide alone? Per decision type: kappa over the window, verdicts, state, since when, and
        whether it acts; with the mode, the back-off settings, the open audits and the entries waiting."""
        s = self.bank.kb.company.bank
        with self.bank.node.lock:
            types = Agreement(self._conn, s).figures(calendar_now_ms() if now is None else now)
            open_audits = self._conn.execute("SELECT count(*) FROM triage_audits WHERE answer IS NULL").fetchone()[0]
            waiting = self._conn.execute("SELECT count(*) FROM entries WHERE status = ?", (PROPOSED,)).fetchone()[0]
        return TriageStatus(mode=s.auto_triage, floor=s.kappa_floor, min_samples=s.kappa_min_samples,
                            window_days=s.kappa_window_days, types=types, open_audits=open_audits, waiting=waiting)

    # -- a person's actions --------------------------------------------------------------------------------
    def accept(self, entry_id: str, *, actor: str | None = None, reason: str | None = None) -> Entry:
        """A person accepts the entry (STANDING); then any back-off change its verdict makes due is recorded."""
        entry = self.bank.accept(entry_id, actor=actor, reason=reason)
        settle(self.bank)
        return entry

    def dispute(self, entry_id: str, *, actor: str | None = None, reason: str | None = None) -> Entry:
        entry = self.bank.dispute(entry_id, actor=actor, reason=reason)
        settle(self.bank)
        return entry

    def verify(self, entry_id: str, *, actor: str | None = None, reason: str | None = None) -> Entry:
        entry = self.bank.verify(entry_id, actor=actor, reason=reason)
        settle(self.bank)
        return entry

    def archive(self, entry_id: str, *, actor: str | None = None, reason: str | None = None) -> Entry:
        entry = self.bank.archive(entry_id, actor=actor, reason=reason)
        settle(self.bank)
        return entry

    def answer_audit(self, decision_id: str, answer: str, *, actor: str | None = None) -> DecisionView:
        """A person's answer to an audit: agree keeps what triage did, disagree undoes it. An agent is refused
        before anything is written (and by the store, were the record written anyway)."""
        said = answer.strip().lower()
        if said not in ANSWERS:
            raise Invalid(f"'{answer}' is no answer to an audit — answer {' or '.join(ANSWERS)}",
                          code="invalid_answer")
        who = self.bank._writer(actor)
        if who.is_agent:
            raise Refused(f"to answer an audit is a person's: {who.handle} is not a person", code="forbidden")
        self.decision(decision_id)
        out = self.bank.node.submit_one(records.triage_audit(who.handle, decision_id=decision_id, answer=said,
                                                             by=PERSON))
        if out.status == "refused":
            cls = NotFound if out.code == "not_found" else Refused
            raise cls(out.reason or "refused", code=out.code or "refused")
        settle(self.bank)
        return self.decision(decision_id)
