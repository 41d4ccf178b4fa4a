"""Revert a page to one of its revisions (spec 003: "Revert a refresh like any other change"; "Undo it with a revert").

    with EntryBank(node) as bank:
        done = revert_page(bank, "ENG/Deploys", 3, actor="alex")    # revision 3's body saved as the next revision

A revert is a save of the earlier body against the page's current revision (a page that moved meanwhile is the
save's own stale refusal), with the message "revert to revision N". So a generated page's refresh reverted brings
that body's sections back with it (core/bank/generated.py finds a page's sections by its body's digest).

A consolidation is different: its save also moved entries (STANDING -> CONSOLIDATED), and a plain save of the old
body would leave them folded away while the body no longer says what they say; a plain save of the consolidated
body after its revert would serve each fact twice, in the body and beside it. So when the change being undone is
a consolidation's accepted save (the page is at that proposal's applied revision and the revision asked for is
the one before it), the revert is the consolidation's own (`consolidation.decide revert`: the entries STANDING
again); when it is that consolidation's revert, it is `undo_revert` (the ones still STANDING folded again). A
revert that would jump over a consolidation, or bring back a consolidated body whose entries stand again, is
refused in one line naming the step to take instead.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import NotFound, Refused
from ..pages import rules
from ..pages.consolidation_handlers import ACCEPTED, REVERT, REVERTED, UNDO_REVERT
from ..pages.model import Page
from .consolidation import Consolidation
from .entries import EntryBank

PLAIN = "save"


@dataclass
class Reverted:
    """What a revert did: the page after it, the revision whose body it brought back, the revision it made, and
    whether it was a plain save or a consolidation's own revert / undo_revert (with that proposal's entries)."""

    page: Page
    reverted_to: int
    revision: int
    via: str                                    # "save" | "revert" | "undo_revert"
    proposal_id: str | None = None
    standing: list[str] = field(default_factory=list)       # entries put back in use as STANDING (a revert)
    consolidated: list[str] = field(default_factory=list)   # entries folded in again (an undo_revert)

    def to_json(self) -> dict[str, Any]:
        return {"page": self.page.to_json(with_body=False), "reverted_to": self.reverted_to,
                "revision": self.revision, "via": self.via, "proposal_id": self.proposal_id,
                "standing": self.standing, "consolidated": self.consolidated}


def revert_message(n: int) -> str:
    return f"revert to revision {n}"


def revert_page(bank: EntryBank, ref: str, revision: int, *, actor: str | None = None,
                base_revision: int | None = None) -> Reverted:
    """Bring back revision `revision`'s body of page `ref` as its next revision (see the module's words).
    `base_revision`: the revision the caller last saw the page at (the history it picked from); a page saved since
    is refused, as a stale save is, so a revert never undoes a change its writer did not see. None: the page's
    revision now."""
    kb = bank.kb
    who = bank._writer(actor)
    row = kb._row(ref, allow_trashed=False)
    where = f"{row['container']}/{row['title']}"
    current = int(row["revision"])
    base = current if base_revision is None else int(base_revision)
    if base != current:
        raise Refused(f"{where} is at revision {current}, not {base}: {row['saved_by']} saved since — read its "
                      "history again and revert from what it says now", code="stale_revision",
                      base_revision=base, current_revision=current)
    n = int(revision)
    if n == current:
        raise Refused(f"revision {n} is {where}'s current revision: nothing to revert — pick an earlier one "
                      "(`crewlet page history REF` lists them)", code="current_revision")
    if n > current:
        raise NotFound(f"{where} has no revision {n} (it is at {current}) — `crewlet page history REF` lists them",
                       code="no_revision")
    target = kb._revision(row["id"], n)       # a revision that is not there: its one-line NotFound
    rules.may_save(kb.company, who, row)
    routed = _consolidation_route(bank, row, n, current, target.body, where)
    if routed is not None:
        proposal_id, action = routed
        before = Consolidation(bank).show(proposal_id)
        prop = Consolidation(bank).decide(proposal_id, action, actor=actor)
        page = kb._resolve(row["id"])
        if action == REVERT:
            back = [i for i in before.folded if i not in prop.folded]
            return Reverted(page, n, page.revision, REVERT, proposal_id, standing=back)
        return Reverted(page, n, page.revision, UNDO_REVERT, proposal_id, consolidated=list(prop.folded))
    if target.body == row["body"]:
        raise Refused(f"revision {n}'s body is {where}'s body already: nothing to revert", code="same_body")
    # the body comes from the page's own history: nothing of the caller's to keep under rescued/ if refused
    page = kb.save_page(row["id"], target.body, base_revision=base, actor=actor, message=revert_message(n),
                        rescue=False)
    return Reverted(page, n, page.revision, PLAIN)


def _consolidation_route(bank: EntryBank, row: Any, n: int, current: int, body: str,
                         where: str) -> tuple[str, str] | None:
    """(proposal id, revert | undo_revert) when the change undone is a consolidation's save or its revert; None for
    a plain save; Refused when a plain save would leave a consolidation's entries at odds with the body."""
    with bank.node.lock:
        props = bank.conn.execute(
            "SELECT id, state, applied_revision, reverted_revision, body FROM consolidation_proposals "
            "WHERE page_id = ? AND state IN (?, ?)", (row["id"], ACCEPTED, REVERTED)).fetchall()
    for p in props:
        if p["state"] == ACCEPTED and p["applied_revision"] is not None and n < p["applied_revision"] <= current:
            if p["applied_revision"] == current and n == current - 1:
                return p["id"], REVERT
            step = (f"revert to revision {current - 1} first (the consolidation's own revert), then to {n}"
                    if p["applied_revision"] == current else
                    "undo the changes since it first, then revert the consolidation "
                    f"(`crewlet review proposal {p['id']} revert`)")
            raise Refused(f"revision {n} of {where} is from before consolidation {p['id']} (saved at revision "
                          f"{p['applied_revision']}): a plain save would leave its entries folded away from a body "
                          f"that no longer says what they say — {step}", code="across_consolidation")
        if p["state"] == REVERTED and p["reverted_revision"] is not None:
            if p["reverted_revision"] == current and n == current - 1:
                return p["id"], UNDO_REVERT
            if body == p["body"]:
                raise Refused(f"revision {n} of {where} is consolidation {p['id']}'s body, whose entries stand "
                              "again beside the page: a plain save would serve each fact twice — undo its revert "
                              f"instead (`crewlet review proposal {p['id']} undo-revert`)", code="across_consolidation")
    return None


__all__ = ["Reverted", "revert_page", "revert_message"]
