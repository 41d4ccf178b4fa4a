"""Consolidation as people and agents use it (spec 003, "Consolidation"; docs/consolidation.md): `Consolidation(bank)`.

    with EntryBank(node) as bank:
        c = Consolidation(bank)
        p = c.propose("ENG/Caching", new_body, ["e1", "e2"], actor="eng-bot")   # the page does not change
        c.decide(p.id, "accept", actor="alex")        # the body saved, e1 and e2 CONSOLIDATED, in one record
        c.decide(p.id, "revert", actor="alex")        # the old body back, e1 and e2 STANDING again
        c.decide(p.id, "undo_revert", actor="alex")   # the body again; the ones still STANDING folded back

Everything is a record on the pages log (core/pages/records.py `consolidation_*`), decided by its handler from the
rows as they stand (core/pages/consolidation_handlers.py). This class asks first what depends on who acts and on
what a person can fix — an agent deciding, a page the writer may not save, an entry of another page, a body over
the size limit — and refuses in one line before anything is appended; what depends on order (the page changed
since, an entry no longer STANDING) the applier refuses, and that refusal is raised the same way.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import Invalid, NotFound, Refused
from ..pages import records, rules
from ..pages.consolidation_handlers import (ACCEPT, DECISIONS, OPEN, UNDO_REVERT, folded_ids, proposal_row)
from ..pages.entry_model import AGENT, PERSON, STANDING
from ..pages.service import _check_body
from .entries import Entry, EntryBank


@dataclass
class Proposal:
    """One consolidation proposal as it stands, with the page it is for and its decisions so far."""

    id: str
    page_id: str
    page: str                       # CONTAINER/Title
    base_revision: int
    page_revision: int              # the page's revision now
    body: str
    entries: list[str]
    message: str | None
    proposed_by: str
    proposed_kind: str
    proposed_at: int
    state: str                      # OPEN | ACCEPTED | DECLINED | REVERTED
    applied_revision: int | None
    reverted_revision: int | None
    folded: list[str]               # the entries CONSOLIDATED by it now (its latest accept or undo)
    decisions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def stale(self) -> bool:
        """An open proposal whose page changed since it was made: accepting it is refused."""
        return self.state == OPEN and self.page_revision != self.base_revision

    def to_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["stale"] = self.stale
        out["title"] = self.page
        return out


def _as_action(action: str) -> str:
    said = action.strip().lower().replace("-", "_")
    if said not in DECISIONS:
        raise Invalid(f"'{action}' is no decision on a proposal — use accept, decline, revert or undo-revert",
                      code="invalid_decision")
    return said


class Consolidation:
    """Consolidation proposals over an EntryBank (its node, its company's settings and actors)."""

    def __init__(self, bank: EntryBank) -> None:
        self.bank = bank

    @property
    def _conn(self) -> Any:
        return self.bank.conn

    # -- writes --------------------------------------------------------------------------------------------
    def propose(self, page: str, body: str, entry_ids: Sequence[str], *, actor: str | None = None,
                message: str | None = None, base_revision: int | None = None) -> Proposal:
        """Store a proposal to fold `entry_ids` (STANDING entries of `page`) into `page`'s body as `body`, made
        against `base_revision` (default: the page's revision now). The page does not change."""
        who = self.bank._writer(actor)
        ids = [i.strip() for i in entry_ids if i and i.strip()]
        if not ids:
            raise Invalid("name the entries the new body folds in (--entries ID,ID)", code="no_entries")
        if len(set(ids)) != len(ids):
            raise Invalid("an entry is named twice in --entries: name each once", code="invalid_entries")
        if not body.strip():
            raise Invalid("the proposed body is empty: a consolidation writes the entries into the page's body",
                          code="empty_body")
        _check_body(body, self.bank.kb.company.limits.page_body_bytes)
        row = self.bank._page_row(page)
        rules.may_save(self.bank.kb.company, who, row)
        for entry_id in ids:
            entry = self.bank._entry_row(entry_id)
            if entry["page_id"] != row["id"]:
                raise Refused(f"entry {entry_id} is under another page: a consolidation of "
                              f"{row['container']}/{row['title']} folds only its own entries", code="other_page")
            if entry["status"] != STANDING:
                raise Refused(f"entry {entry_id} is {entry['status']}: only a STANDING entry is folded into a page's "
                              "body", code="not_standing")
        proposal_id = records.new_id()
        base = row["revision"] if base_revision is None else int(base_revision)
        self.bank._submit(records.consolidation_propose(
            who.handle, proposal_id=proposal_id, page_id=row["id"], base_revision=base, body=body, entries=ids,
            by=AGENT if who.is_agent else PERSON, message=message))
        return self.show(proposal_id)

    def decide(self, proposal_id: str, action: str, *, actor: str | None = None) -> Proposal:
        """A person's decision: accept | decline | revert | undo_revert. An agent is refused before anything is
        written (and by the store, were the record written anyway)."""
        said = _as_action(action)
        who = self.bank._writer(actor)
        if who.is_agent:
            raise Refused(f"to {said.replace('_', ' ')} a consolidation is a person's: {who.handle} is an agent",
                          code="forbidden")
        prop = self.show(proposal_id)
        rules.may_save(self.bank.kb.company, who, self.bank._page_row(prop.page_id))
        self.bank._submit(records.consolidation_decide(who.handle, proposal_id=proposal_id, action=said, by=PERSON))
        return self.show(proposal_id)

    def consolidate_now(self, page: str, body: str, entry_ids: Sequence[str], *, actor: str | None = None,
                        message: str | None = None, base_revision: int | None = None) -> Proposal:
        """A person consolidating from the page (the app): propose and accept in one step. An agent only proposes:
        its proposal is returned open."""
        prop = self.propose(page, body, entry_ids, actor=actor, message=message, base_revision=base_revision)
        if self.bank._writer(actor).is_agent:
            return prop
        return self.decide(prop.id, ACCEPT, actor=actor)

    # -- reads ---------------------------------------------------------------------------------------------
    def show(self, proposal_id: str) -> Proposal:
        with self.bank.node.lock:
            row = proposal_row(self._conn, proposal_id)
            if row is None:
                raise NotFound(f"no consolidation proposal '{proposal_id}' — `crewlet review` lists the open ones",
                               code="no_proposal", proposal_id=proposal_id)
            return self._build(row)

    def _build(self, row: Any) -> Proposal:
        page = self._conn.execute("SELECT container, title, revision FROM pages WHERE id = ?",
                                  (row["page_id"],)).fetchone()
        decisions = [dict(d) for d in self._conn.execute(
            "SELECT action, actor, actor_kind, at, revision, seq FROM consolidation_decisions WHERE proposal_id = ? "
            "ORDER BY seq", (row["id"],))]
        return Proposal(
            id=row["id"], page_id=row["page_id"], page=f"{page['container']}/{page['title']}" if page else "",
            base_revision=row["base_revision"], page_revision=page["revision"] if page else 0, body=row["body"],
            entries=folded_ids(row), message=row["message"], proposed_by=row["proposed_by"],
            proposed_kind=row["proposed_kind"], proposed_at=row["proposed_at"], state=row["state"],
            applied_revision=row["applied_revision"], reverted_revision=row["reverted_revision"],
            folded=folded_ids(row, "folded"), decisions=decisions)

    def open_proposals(self, *, actor: str | None = None) -> list[Proposal]:
        """The open proposals, oldest first: what the review queue lists first."""
        self.bank.kb.reader(actor)
        with self.bank.node.lock:
            rows = self._conn.execute("SELECT * FROM consolidation_proposals WHERE state = ? "
                                      "ORDER BY proposed_at, id", (OPEN,)).fetchall()
            return [self._build(r) for r in rows]

    def of_page(self, page: str, *, actor: str | None = None) -> list[Proposal]:
        """Every proposal for a page, newest first."""
        self.bank.kb.reader(actor)
        row = self.bank.kb._row(page)
        with self.bank.node.lock:
            rows = self._conn.execute("SELECT * FROM consolidation_proposals WHERE page_id = ? "
                                      "ORDER BY proposed_at DESC, id", (row["id"],)).fetchall()
            return [self._build(r) for r in rows]

    def entries(self, proposal: Proposal) -> list[Entry]:
        """The entries a proposal folds, as they stand now."""
        out = []
        for entry_id in proposal.entries:
            try:
                out.append(self.bank.show(entry_id))
            except NotFound:
                continue
        return out


__all__ = ["Consolidation", "Proposal", "UNDO_REVERT"]
