"""Generated pages (issue 37, spec 003 "Generated pages"): a page the server writes from the entries in its scope.

    make_generated(kb, "ENG", "Deploys", question="How do we deploy?")      # a page with no body, a question
    refresh(node, page_id, chat=provider)                                   # one build: edits, not a rewrite

A page's scope is its links (`crewlet page link`, core/bank/links.py): the entries under a linked page, under the
pages of a linked space, scoped within a linked module, and under the page itself. Its body is sections, each
citing the entries it was written from and recording what it was written from (the question, and what each of
those entries said), so a refresh knows which sections changed:

- the model proposes edits to single sections (generated_model.py); a replace or remove of a section whose
  recorded inputs did not change is dropped, a new or replaced section may cite only the entries this refresh
  read (those in scope and in use), a section no edit names stays byte for byte as it was;
- no evidence (no entry in scope and in use): nothing is written;
- no model: only the sections whose entries are all out of use or out of scope are removed.

Each applied build is a `page.build` record (core/pages/generated_handlers.py): a save in the page's history when
the body changed, revertible as any save. A person may take a page over (`take_over`): it is then authored and
never rebuilt; an agent is refused.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..clock import calendar_now_ms
from ..errors import Invalid, NotFound, Refused
from ..pages.entry_model import IN_USE
from ..pages.generated_handlers import AUTHORED, GENERATED, body_sha, page_build, page_generated
from ..pages.records import new_id
from ..repos.modules import scope_matches
from .generated_model import Chat, Edit, EditsFailed, propose
from .links import MODULE, PAGE, SPACE, page_links, stored_scope

if TYPE_CHECKING:
    from ..pages.model import Page
    from ..pages.service import KnowledgeBase

MAX_QUESTION_CHARS = 1000

# what a refresh did
BUILT = "built"                # a build was applied (a save when the body changed)
UNCHANGED = "unchanged"        # nothing to do: the scope's entries and the question are as the last build read them
NO_EVIDENCE = "no_evidence"    # no entry in scope and in use: nothing written
NO_MODEL = "no_model"          # no [providers.llm]: only dead sections removed (none, when nothing is written)
FAILED = "failed"              # the model could not be reached or gave no edits: nothing written
NOT_GENERATED = "not_generated"


@dataclass(frozen=True)
class ScopeEntry:
    id: str
    kind: str
    body: str
    status: str

    @property
    def in_use(self) -> bool:
        return self.status in IN_USE


@dataclass
class RefreshOutcome:
    page_id: str
    status: str
    reason: str = ""
    revision: int | None = None
    dropped: list[str] = field(default_factory=list)   # each edit dropped, and why

    def to_json(self) -> dict[str, Any]:
        return {"page_id": self.page_id, "status": self.status, "reason": self.reason, "revision": self.revision,
                "dropped": self.dropped}


# -- reading ----------------------------------------------------------------------------------------------------

def generated_row(conn: Any, page_id: str) -> Any:
    return conn.execute("SELECT * FROM generated_pages WHERE page_id = ?", (page_id,)).fetchone()


def scope_entries(conn: Any, page_id: str) -> dict[str, ScopeEntry]:
    """Every entry in the page's scope, whatever its status, by id: under the page itself and the pages it links,
    under the pages of the spaces it links, and scoped within a module it links (an entry with no scope is not
    within a module: it would put every such entry in every page's scope)."""
    page_ids = {page_id}
    spaces: set[str] = set()
    modules = []
    for link in page_links(conn, page_id):
        if link.kind == PAGE:
            page_ids.add(link.item)
        elif link.kind == SPACE:
            spaces.add(link.item)
        elif link.kind == MODULE:
            modules.append(stored_scope(link.item))
    found: dict[str, ScopeEntry] = {}
    rows = conn.execute("SELECT e.id, e.kind, e.body, e.status, e.scope, e.page_id, p.container FROM entries e "
                        "JOIN pages p ON p.id = e.page_id WHERE p.trashed_at IS NULL").fetchall()
    for r in rows:
        within = r["page_id"] in page_ids or r["container"] in spaces or (
            r["scope"] is not None and any(scope_matches(stored_scope(r["scope"]), m) for m in modules))
        if within:
            found[r["id"]] = ScopeEntry(r["id"], r["kind"], r["body"], r["status"])
    return found


def evidence_digest(evidence: Mapping[str, ScopeEntry]) -> str:
    """What the scope's entries in use say, as one digest: a change of any (added, edited, out of use) changes it."""
    h = hashlib.sha256()
    for eid in sorted(evidence):
        h.update(json.dumps([eid, evidence[eid].body]).encode("utf-8"))
    return h.hexdigest()


def current_sections(conn: Any, page_id: str, body: str) -> list[dict[str, Any]]:
    """The sections of the page's body as it is: the newest build that saved this very body (a revert to an earlier
    body finds that body's sections); none for a body no build wrote."""
    row = conn.execute("SELECT sections FROM generated_builds WHERE page_id = ? AND body_sha = ? "
                       "ORDER BY seq DESC LIMIT 1", (page_id, body_sha(body))).fetchone()
    return json.loads(row["sections"]) if row is not None else []


def section_changed(section: Mapping[str, Any], question: str, evidence: Mapping[str, ScopeEntry]) -> bool:
    """Whether what the section was written from changed: the question, or what one of its entries says (an entry
    out of use or out of scope says nothing now)."""
    inputs = section.get("inputs") or {}
    if inputs.get("question") != question:
        return True
    said = inputs.get("entries") or {}
    return any(eid not in evidence or evidence[eid].body != said.get(eid) for eid in section.get("entries", []))


def section_dead(section: Mapping[str, Any], evidence: Mapping[str, ScopeEntry]) -> bool:
    return all(eid not in evidence for eid in section.get("entries", []))


def render(sections: list[dict[str, Any]]) -> str:
    return "\n\n".join(s["text"].strip() for s in sections)


# -- the page's view (page show, get_page, the app) --------------------------------------------------------------

def view(conn: Any, page_id: str, body: str, *, tier_of: Any = None) -> dict[str, Any] | None:
    """A generated (or taken over) page's question, state, last build and sections, each section's entries with
    their status, tier (`tier_of(entry_id)`, when given) and whether they are still in use and in scope. None for
    a page that was never generated."""
    row = generated_row(conn, page_id)
    if row is None:
        return None
    scope = scope_entries(conn, page_id)
    sections = []
    for s in current_sections(conn, page_id, body):
        cited = []
        for eid in s.get("entries", []):
            status_row = conn.execute("SELECT status FROM entries WHERE id = ?", (eid,)).fetchone()
            status = status_row["status"] if status_row is not None else "PURGED"
            in_use = status in IN_USE
            cited.append({"id": eid, "status": status, "in_use": in_use, "in_scope": eid in scope,
                          "tier": tier_of(eid) if tier_of is not None and status_row is not None else None})
        sections.append({"id": s["id"], "text": s["text"], "entries": cited,
                         "no_longer_in_use": [c["id"] for c in cited if not (c["in_use"] and c["in_scope"])]})
    return {"question": row["question"], "question_no": row["question_no"], "state": row["state"],
            "built_at": row["built_at"], "built_question_no": row["built_question_no"],
            "pending_question": row["state"] == GENERATED and row["built_question_no"] < row["question_no"],
            "sections": sections}


# -- people's acts --------------------------------------------------------------------------------------------

def _question(text: str) -> str:
    q = " ".join((text or "").split())
    if not q:
        raise Invalid("a generated page needs a question — pass --question 'What …?'", code="invalid_question")
    if len(q) > MAX_QUESTION_CHARS:
        raise Invalid(f"a question is at most {MAX_QUESTION_CHARS} characters (this one has {len(q)}) — shorten it",
                      code="invalid_question")
    return q


def make_generated(kb: KnowledgeBase, container: str, title: str, *, question: str, actor: str | None = None,
                   parent: str | None = None) -> Page:
    """A new page with no body that answers `question` from the entries in its scope: built by the page_refresh
    duty (at its next pass, then whenever its scope's entries change). A person's to make."""
    q = _question(question)
    who = kb.writer(actor)
    if who.is_agent:
        raise Refused(f"{who.handle} is an agent: only a person makes a generated page", code="person_only")
    page = kb.create_page(container, title, "", actor=who.handle, parent=parent)
    _submit(kb, page_generated(who.handle, page_id=page.id, action="make", question=q, by_kind="person"))
    return kb.resolve(page.id, actor=who.handle)


def set_question(kb: KnowledgeBase, ref: str, question: str, *, actor: str | None = None) -> dict[str, Any]:
    """Change a generated page's question: a new question is owed its own build (after the minimum interval)."""
    q = _question(question)
    who = kb.writer(actor)
    page = kb.resolve(ref, actor=who.handle)
    out = _submit(kb, page_generated(who.handle, page_id=page.id, action="question", question=q,
                                     by_kind="agent" if who.is_agent else "person"))
    return dict(out.result or {}) | {"page_id": page.id}


def take_over(kb: KnowledgeBase, ref: str, *, actor: str | None = None) -> dict[str, Any]:
    """Hand a generated page to people: authored from now on, never rebuilt. Only a person may."""
    who = kb.writer(actor)
    page = kb.resolve(ref, actor=who.handle)
    if who.is_agent:
        raise Refused(f"only a person can take over {page.container}/{page.title}; {who.handle} is an agent",
                      code="person_only")
    out = _submit(kb, page_generated(who.handle, page_id=page.id, action="takeover", by_kind="person"))
    return dict(out.result or {}) | {"page_id": page.id, "state": AUTHORED}


def _submit(kb: KnowledgeBase, rec: Any) -> Any:
    out = kb.node.submit_one(rec)
    if out.status == "refused":
        cls = NotFound if out.code in ("not_found", "purged") else Refused
        raise cls(out.reason or "refused", code=out.code or "refused")
    return out


# -- a build -----------------------------------------------------------------------------------------------------

def _section(text: str, entries: list[str], question: str, evidence: Mapping[str, ScopeEntry],
             section_id: str | None = None) -> dict[str, Any]:
    return {"id": section_id or f"s-{new_id()[:12]}", "text": text.strip(), "entries": entries,
            "inputs": {"question": question, "entries": {e: evidence[e].body for e in entries}}}


def apply_edits(sections: list[dict[str, Any]], edits: list[Edit], question: str,
                evidence: Mapping[str, ScopeEntry]) -> tuple[list[dict[str, Any]], list[str]]:
    """The sections after the edits that may be applied, and why each other one was dropped."""
    out = list(sections)
    dropped: list[str] = []
    changed = {s["id"] for s in sections if section_changed(s, question, evidence)}

    def cited(edit: Edit) -> list[str] | None:
        ids = list(dict.fromkeys(edit.entries))
        if not ids or not edit.text.strip():
            dropped.append(f"{edit.op} {edit.section or ''}: no text or no entry cited".strip())
            return None
        unread = [e for e in ids if e not in evidence]
        if unread:
            dropped.append(f"{edit.op} {edit.section or ''}: cites entries this refresh did not read: "
                           f"{', '.join(unread)}")
            return None
        return ids

    for edit in edits:
        at = next((i for i, s in enumerate(out) if s["id"] == edit.section), None)
        if edit.op in ("replace", "remove"):
            if at is None:
                dropped.append(f"{edit.op} {edit.section}: no such section")
                continue
            if edit.section not in changed:
                dropped.append(f"{edit.op} {edit.section}: what it was written from did not change")
                continue
            if edit.op == "remove":
                del out[at]
                continue
            ids = cited(edit)
            if ids is not None:
                out[at] = _section(edit.text, ids, question, evidence, section_id=edit.section)
            continue
        ids = cited(edit)
        if ids is None:
            continue
        new = _section(edit.text, ids, question, evidence)
        out.insert(len(out) if edit.section is None or at is None else at + 1, new)
        if edit.section is not None and at is None:
            dropped.append(f"insert after {edit.section}: no such section — put at the end")
    return out, dropped


def refresh(node: Any, page_id: str, *, chat: Chat | None, now: int | None = None,
            actor: str = "crewlet") -> RefreshOutcome:
    """One build of a generated page (the duty decides when). Raises nothing for the model's failures: they are
    an outcome (FAILED), so the duty can try once more."""
    now = calendar_now_ms() if now is None else now
    with node.lock:
        row = generated_row(node.conn, page_id)
        page = node.conn.execute("SELECT id, body, revision, trashed_at FROM pages WHERE id = ?", (page_id,)).fetchone()
        if row is None or page is None or row["state"] != GENERATED or page["trashed_at"] is not None:
            return RefreshOutcome(page_id, NOT_GENERATED, "not a generated page (taken over, trashed or never made)")
        scope = scope_entries(node.conn, page_id)
        sections = current_sections(node.conn, page_id, page["body"])
    question, number = row["question"], row["question_no"]
    evidence = {k: v for k, v in scope.items() if v.in_use}
    digest = evidence_digest(evidence)
    if chat is None:
        alive = [s for s in sections if not section_dead(s, evidence)]
        if len(alive) == len(sections):
            return RefreshOutcome(page_id, NO_MODEL, "no [providers.llm]: no section lost all its entries")
        return _apply(node, page, alive, row["built_question_no"], row["inputs_digest"] or "", now, actor,
                      NO_MODEL, [], "removed the sections whose entries are all out of use or out of scope")
    if not evidence:
        return RefreshOutcome(page_id, NO_EVIDENCE, "no entry in the page's scope is in use: nothing written")
    if digest == row["inputs_digest"] and row["built_question_no"] >= number:
        return RefreshOutcome(page_id, UNCHANGED, "the scope's entries and the question are as the last build read")
    shown = [{"id": s["id"], "text": s["text"], "entries": s["entries"],
              "changed": section_changed(s, question, evidence)} for s in sections]
    entries = [{"id": e.id, "kind": e.kind, "text": e.body} for e in evidence.values()]
    try:
        edits = propose(chat, question, shown, entries)
    except EditsFailed as exc:
        return RefreshOutcome(page_id, FAILED, str(exc))
    new, dropped = apply_edits(sections, edits, question, evidence)
    return _apply(node, page, new, number, digest, now, actor, BUILT, dropped, f"{len(edits)} edit(s) proposed")


def _apply(node: Any, page: Any, sections: list[dict[str, Any]], number: int, digest: str, now: int, actor: str,
           status: str, dropped: list[str], reason: str) -> RefreshOutcome:
    rec = page_build(actor, page_id=page["id"], base_revision=page["revision"], body=render(sections),
                     sections=sections, question_no=number, digest=digest, built_at=now,
                     message="generated: refresh" if status == BUILT else "generated: dead sections removed")
    out = node.submit_one(rec)
    if out.status == "refused":
        return RefreshOutcome(page["id"], FAILED, out.reason or "refused", dropped=dropped)
    return RefreshOutcome(page["id"], status, reason, revision=(out.result or {}).get("revision"), dropped=dropped)


def page_view(node: Any, page_id: str, body: str) -> dict[str, Any] | None:
    """`view` with each cited entry's trust tier (core/bank/trust.py, as `crewlet entry show` gives it): what
    `crewlet page show`, get_page and the app's page screen show under a generated page's body."""
    from .entries import EntryBank

    with node.lock:
        if generated_row(node.conn, page_id) is None:
            return None
    bank = EntryBank(node)
    try:
        def tier_of(entry_id: str) -> str | None:
            try:
                return bank.show(entry_id).tier
            except NotFound:
                return None

        with node.lock:
            return view(node.conn, page_id, body, tier_of=tier_of)
    finally:
        bank.close()


def view_lines(v: Mapping[str, Any]) -> list[str]:
    """A generated page's view as plain lines (get_page's words, the CLI's text): the question, the state and each
    section's entries with their tier, saying which are no longer in use."""
    state = ("generated: rebuilt from the entries in its scope" if v["state"] == GENERATED
             else "taken over by a person: authored, no longer rebuilt")
    lines = [f"Question: {v['question']}", f"This page is {state}."]
    if v["state"] == GENERATED and not v.get("built_question_no"):
        lines.append("Not built yet: the page-refresh duty builds it at its next pass (or `page refresh`).")
    elif v.get("pending_question"):
        lines.append("Its question changed since the last build: a build for it is owed.")
    for i, s in enumerate(v["sections"], 1):
        cites = ", ".join(f"{c['id']} ({c['tier'] or c['status']}"
                          + ("" if c["in_use"] and c["in_scope"] else
                             ", no longer in use" if not c["in_use"] else ", out of scope") + ")"
                          for c in s["entries"])
        lines.append(f"Section {i} [{s['id']}] cites: {cites or 'nothing'}")
    return lines
