"""Entries as people and agents use them: `EntryBank(node)`, over the same node a `KnowledgeBase` writes through.

Every write is a record on the pages log (core/pages/records.py `entry_*`, `page_policy`): this class asks the
rules that depend on who acts and on the configuration (`rules.acting`; accept, verify and dispute are a
person's; the citations read in the repositories), refuses with one line before anything is appended, and leaves
what depends on order to the applier (core/pages/entry_handlers.py), whose refusal it raises the same way. Reads
come from the tables those records fill, with each entry's trust tier derived (trust.py).
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..clock import calendar_now_ms
from ..config import Actor, remote_site
from ..errors import CrewletError, Invalid, NotFound, Refused
from ..pages import records
from ..pages.entry_model import (ACCEPT, ACTIONS, AGENT, ARCHIVE, CHANGED, DISPUTE, DISPUTED, FACT, GONE, HELD,
                                 IN_USE, LOCKED, OPEN, OUT_OF_USE, PERSON, POLICIES, PROPOSED, SYSTEM_ACTOR, VERIFY,
                                 fold_body, page_policy)
from ..pages.rules import acting
from ..pages.service import KnowledgeBase, Writer
from ..replica.appliers import Decision
from ..repos.modules import written_scopes_meet
from ..repos import (HOLDS, NOT_READ_YET, CitationCheck, Repositories, Repository, Unreadable,
                     check_citations, first_failure, parse_scope)
from .links import MODULE, PAGE, SPACE, PageLink, page_links
from .decay import asked_of_a_person
from .neighbours import NeighbourFinder
from .repositories import open_repositories
from ..text.claims import check_entry_body
from .trust import TIER_RANK, CitationState, trust_tier

_REFUSED_BODIES = ("entry_credential", "entry_several_claims")



@dataclass
class Entry:
    """One entry as it stands, with its tier and each citation's last check."""

    id: str
    page_id: str
    page: str                       # CONTAINER/Title
    kind: str
    body: str
    scope: str | None
    status: str
    author: str
    author_kind: str
    created_at: int
    supersedes: str | None
    superseded_by: str | None
    verified_by: str | None
    verified_at: int | None
    status_by: str | None
    status_at: int | None
    status_reason: str | None
    corroborations: int
    corroborated_by: list[str]
    citations: list[CitationState]
    tier: str
    history: list[dict[str, Any]] = field(default_factory=list)
    folded: bool = False            # this add was an exact repeat, counted as a corroboration of this entry

    @property
    def in_use(self) -> bool:
        return self.status in IN_USE

    def to_json(self, now: int | None = None) -> dict[str, Any]:
        now = calendar_now_ms() if now is None else now
        out = {k: v for k, v in self.__dict__.items() if k not in ("citations", "history")}
        out["citations"] = [c.to_json(now) for c in self.citations]
        if self.history:
            out["history"] = self.history
        return out


class SimilarEntries(CrewletError):
    """Nothing written: entries in the bank say nearly the same. `similar`: (entry, similarity), nearest first."""

    code = "similar_entries"

    def __init__(self, message: str, *, similar: list[tuple[Entry, float]], **details: Any) -> None:
        super().__init__(message, fix="if yours is a different fact, write it again saying it is distinct; if it "
                                      "corrects one of them, supersede that entry", **details)
        self.similar = similar


@dataclass
class NeedsPerson:
    entry: Entry
    reasons: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"entry": self.entry.to_json(), "reasons": self.reasons}


def _check_record(check: CitationCheck) -> dict[str, Any]:
    """A check at write as the entry.add record carries it (a link that holds is held: nothing to re-read)."""
    out: dict[str, Any] = {"index": check.index, "result": HELD if check.outcome == HOLDS else NOT_READ_YET,
                           "commit": check.commit, "blob": check.blob}
    if check.message:
        out["message"] = check.message
    return out


class EntryBank:
    """The entries of a node's knowledge base. `repositories`: the company's repositories by name (citations are
    read there at write); None opens the configured ones ([repositories.NAME]) at the first read and `close()`
    ends their processes. `budget`: PAGE_PROPOSED_ENTRY_BUDGET, the proposed entries one agent may leave on one
    CURATED page; None reads the bank's setting ([knowledge] or the environment) at each add."""

    def __init__(self, node: Writer, *, repositories: Mapping[str, Repository] | None = None,
                 budget: int | None = None, neighbours: NeighbourFinder | None = None) -> None:
        self.node = node
        self.kb = KnowledgeBase(node)
        self._repositories = repositories
        self._owned: Repositories | None = None
        self._budget = budget
        # who finds the entries near a new one (core/bank/neighbours.py); a test may give one its own provider
        self.neighbours = neighbours or NeighbourFinder(node)

    @property
    def repositories(self) -> Mapping[str, Repository]:
        if self._repositories is None:
            self._owned = open_repositories(self.kb.company.repositories)
            self._repositories = self._owned
        return self._repositories

    @property
    def budget(self) -> int:
        return self._budget if self._budget is not None else self.kb.company.bank.page_proposed_entry_budget

    def close(self) -> None:
        """End the processes of the repositories this bank opened itself."""
        if self._owned is not None:
            self._owned.close()
            self._owned, self._repositories = None, None

    def __enter__(self) -> EntryBank:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def conn(self) -> Any:
        return self.node.conn

    # -- who acts ------------------------------------------------------------------------------------------
    def _writer(self, handle: str | None) -> Actor:
        site = remote_site(self.kb.company)
        if site is not None:
            raise site.refusal(write=True)
        return acting(self.kb.company, handle, knowledge=True)

    @staticmethod
    def _by(who: Actor) -> str:
        return AGENT if who.is_agent else PERSON

    def _submit(self, rec: Any) -> Decision:
        out = self.node.submit_one(rec)
        if out.status == "refused":
            cls = NotFound if out.code in ("not_found", "purged") else Refused
            raise cls(out.reason or "refused", code=out.code or "refused")
        return out

    def _page_row(self, ref: str) -> Any:
        return self.kb._row(ref, allow_trashed=False)

    def _entry_row(self, entry_id: str) -> Any:
        with self.node.lock:
            row = self.conn.execute("SELECT * FROM entries WHERE id = ?", (entry_id,)).fetchone()
        if row is None:
            raise NotFound(f"no entry '{entry_id}' — `crewlet entries PAGE` lists a page's entries",
                           code="no_entry", entry_id=entry_id)
        return row

    # -- writes --------------------------------------------------------------------------------------------
    def add(self, page: str, body: str, *, kind: str = FACT, scope: str | None = None,
            citations: Sequence[Mapping[str, Any]] | None = None, supersedes: str | None = None,
            distinct: bool = False, actor: str | None = None) -> Entry:
        """Add one fact under `page`. An agent's is PROPOSED, a person's STANDING. An exact repeat (folded
        whitespace and case) of an entry in the bank is not written: it counts as that entry's corroboration, and
        that entry comes back with `folded` set. A citation that does not hold refuses the write, naming it; one in
        a repository that cannot be read just now is written as not read yet. Entries in use nearer by meaning than
        KNOWLEDGE_SIMILARITY_THRESHOLD raise `SimilarEntries` (nothing written) unless `distinct` or a supersede."""
        who = self._writer(actor)
        refusal = check_entry_body(body, kind or FACT)
        if refusal is not None:
            # the body's shape is the caller's to fix (Invalid); a credential or several claims is refused by rule
            cls = Refused if refusal.code in _REFUSED_BODIES else Invalid
            raise cls(refusal.message, code=refusal.code)
        kind, body = (kind or FACT).strip().upper(), body.strip()
        row = self._page_row(page)
        with self.node.lock:
            policy = page_policy(self.conn, row["id"])
        if policy == LOCKED and who.is_agent:
            raise Refused(f"{row['container']}/{row['title']} is LOCKED: people maintain it by hand, and an agent "
                          "adds no entry to it", code="locked")
        parsed = parse_scope(scope, list(self.repositories))
        old = self._entry_row(supersedes) if supersedes else None
        if old is not None and old["status"] in OUT_OF_USE:
            raise Refused(f"entry {supersedes} is {old['status']}: only an entry still in the bank can be superseded",
                          code="out_of_use")
        if old is None and policy != OPEN:
            stored = str(parsed) if parsed is not None else None
            with self.node.lock:      # as the applier decides: the first repeat in a scope that meets this one's
                same = next((r for r in self.conn.execute(
                    "SELECT id, scope FROM entries WHERE folded = ? AND status NOT IN (?, ?) ORDER BY created_at, id",
                    (fold_body(body), *OUT_OF_USE)) if written_scopes_meet(stored, r["scope"])), None)
            if same is not None:
                self._submit(records.entry_corroborate(who.handle, entry_id=same["id"]))
                return self._folded(same["id"])
        if old is None and policy != OPEN and not distinct:
            self._refuse_neighbours(body, str(parsed) if parsed is not None else None)
        checks = check_citations(list(citations) if citations is not None else None, self.repositories)
        failed = first_failure(checks)
        if failed is not None:
            raise Refused(failed.message, code="citation_failed", citation=failed.index)
        entry_id = records.new_id()
        out = self._submit(records.entry_add(
            who.handle, entry_id=entry_id, page_id=row["id"], kind=kind, body=body, by=self._by(who),
            scope=str(parsed) if parsed is not None else None,
            citations=[dict(c.citation.to_json()) if c.citation is not None else {} for c in checks],
            checks=[_check_record(c) for c in checks], supersedes=supersedes,
            budget=self.budget))      # the applier holds it to it where the page is CURATED when it applies
        if out.result.get("folded"):          # a repeat landed first, between our look and the append
            return self._folded(out.result["entry_id"])
        return self.show(entry_id)

    def _refuse_neighbours(self, body: str, scope: str | None) -> None:
        """Repeats by meaning (spec 003, "Repeats before write"): entries in the bank nearer than
        KNOWLEDGE_SIMILARITY_THRESHOLD are returned to the writer in SimilarEntries, nothing written."""
        threshold = self.kb.company.bank.similarity_threshold
        found = self.neighbours.find(body, scope=scope, threshold=threshold)
        if not found.similar:
            return
        near: list[tuple[Entry, float]] = []
        for entry_id, similarity, _how in found.similar:
            try:
                near.append((self.show(entry_id), similarity))
            except NotFound:            # gone since the look
                continue
        if not near:
            return
        hows = {how for _e, _s, how in found.similar}
        said = "; ".join(f"{e.id} under {e.page} ({e.status}, {s:.2f}): {' '.join(e.body.split())[:80]}"
                         for e, s in near)
        raise SimilarEntries(
            f"nothing written: {len(near)} entr{'y' if len(near) == 1 else 'ies'} in the bank "
            f"{'says' if len(near) == 1 else 'say'} nearly the same "
            f"(by {' and '.join(sorted(hows))}, KNOWLEDGE_SIMILARITY_THRESHOLD = {threshold:g}) — {said}",
            similar=near, compared=found.note, entry_ids=[e.id for e, _s in near])

    def _folded(self, entry_id: str) -> Entry:
        entry = self.show(entry_id)
        entry.folded = True
        return entry

    def supersede(self, entry_id: str, body: str, *, kind: str | None = None, scope: str | None = None,
                  citations: Sequence[Mapping[str, Any]] | None = None, distinct: bool = False,
                  actor: str | None = None) -> Entry:
        """A correction of `entry_id`, under the same page: the old entry stays in use until a person accepts the
        correction (a person's correction is accepted as it is written)."""
        old = self._entry_row(entry_id)
        return self.add(old["page_id"], body, kind=kind or old["kind"],
                        scope=scope if scope is not None else old["scope"], citations=citations,
                        supersedes=entry_id, distinct=distinct, actor=actor)

    def edit(self, entry_id: str, *, body: str | None = None, kind: str | None = None, scope: str | None = None,
             actor: str | None = None, reason: str | None = None) -> Entry:
        """Change what an entry says (what is not given stays): an agent's own entry while proposed, or any entry
        in the bank by a person. Its citations stay; new evidence is a correction (`supersede`)."""
        who = self._writer(actor)
        row = self._entry_row(entry_id)
        if who.is_agent and (row["author"] != who.handle or row["status"] != PROPOSED):
            raise Refused(f"an agent changes only its own entries while proposed; entry {entry_id} is "
                          f"{row['author']}'s and {row['status']}", code="forbidden")
        new_body = row["body"] if body is None else body
        new_kind = row["kind"] if kind is None else kind
        refusal = check_entry_body(new_body, new_kind)
        if refusal is not None:
            cls = Refused if refusal.code in _REFUSED_BODIES else Invalid
            raise cls(refusal.message, code=refusal.code)
        if scope is None:
            new_scope = row["scope"]
        else:
            parsed = parse_scope(scope, list(self.repositories))
            new_scope = str(parsed) if parsed is not None else None
        self._submit(records.entry_edit(who.handle, entry_id=entry_id, body=new_body.strip(),
                                        kind=new_kind.strip().upper(), scope=new_scope, by=self._by(who),
                                        reason=reason))
        return self.show(entry_id)

    def _status(self, entry_id: str, action: str, actor: str | None, reason: str | None) -> Entry:
        who = self._writer(actor)
        row = self._entry_row(entry_id)
        _sources, _target, allowed = ACTIONS[action]
        if who.is_agent and AGENT not in allowed:
            raise Refused(f"to {action} an entry is a person's: {who.handle} is an agent", code="forbidden")
        if who.is_agent and (row["author"] != who.handle or row["status"] != PROPOSED):
            raise Refused(f"an agent archives only its own entries while proposed; entry {entry_id} is "
                          f"{row['author']}'s and {row['status']}", code="forbidden")
        self._submit(records.entry_status(who.handle, entry_id=entry_id, action=action, by=self._by(who),
                                          reason=reason))
        return self.show(entry_id)

    def accept(self, entry_id: str, *, actor: str | None = None, reason: str | None = None) -> Entry:
        """A person accepts a proposed (or disputed, or archived) entry: STANDING; a correction it is retires what
        it supersedes."""
        return self._status(entry_id, ACCEPT, actor, reason)

    def verify(self, entry_id: str, *, actor: str | None = None, reason: str | None = None) -> Entry:
        """A person confirmed the entry: HUMAN_VERIFIED (a proposed one is accepted too)."""
        return self._status(entry_id, VERIFY, actor, reason)

    def dispute(self, entry_id: str, *, actor: str | None = None, reason: str | None = None) -> Entry:
        """A person says it contradicts the code or another entry: DISPUTED, held back until resolved."""
        return self._status(entry_id, DISPUTE, actor, reason)

    def archive(self, entry_id: str, *, actor: str | None = None, reason: str | None = None) -> Entry:
        """Out of use: a person's, or an agent's own entry while still proposed."""
        return self._status(entry_id, ARCHIVE, actor, reason)

    def set_policy(self, page: str, policy: str, *, actor: str | None = None) -> str:
        """A page's entry policy (open | curated | locked): a person's. Returns the policy in force."""
        who = self._writer(actor)
        policy = policy.strip().upper()
        if policy not in POLICIES:
            raise Invalid(f"policy '{policy.lower()}' is not one — use open, curated or locked", code="invalid_policy")
        if who.is_agent:
            raise Refused(f"a page's entry policy is a person's to set: {who.handle} is an agent", code="forbidden")
        row = self._page_row(page)
        self._submit(records.page_policy(who.handle, page_id=row["id"], policy=policy, by=PERSON))
        return policy

    def link_page(self, page: str, *, module: str | None = None, space: str | None = None,
                  page_ref: str | None = None, remove: bool = False, actor: str | None = None) -> list[PageLink]:
        """Link `page` to one item it is about (a module's folder, a space, another page), or remove the link;
        returns the page's links after. Whoever may write the page may link it."""
        given = [(k, v) for k, v in ((MODULE, module), (SPACE, space), (PAGE, page_ref)) if v is not None]
        if len(given) != 1:
            raise Invalid("link a page to one item: a module (--module FOLDER), a space (--space KEY) or a page "
                          "(--page REF)", code="invalid_link")
        kind, raw = given[0]
        who = self._writer(actor)
        row = self._page_row(page)
        if kind == MODULE:
            parsed = parse_scope(raw, list(self.repositories))
            if parsed is None:
                raise Invalid("--module needs a folder (apps/server, or NAME:apps/server)", code="invalid_link")
            item = str(parsed)
        elif kind == SPACE:
            key = raw.strip().upper()
            with self.node.lock:
                known = self.conn.execute("SELECT 1 FROM containers WHERE key = ?", (key,)).fetchone()
            if known is None:
                raise NotFound(f"no space '{raw}' — `crewlet spaces` lists them", code="no_space")
            item = key
        else:
            item = self._page_row(raw)["id"]
        self._submit(records.page_about(who.handle, page_id=row["id"], item_kind=kind, item=item, linked=not remove))
        return self.links(row["id"])

    def links(self, page: str) -> list[PageLink]:
        """What `page` is linked to now."""
        row = self._page_row(page)
        with self.node.lock:
            return page_links(self.conn, row["id"])

    def policy(self, page: str, *, actor: str | None = None) -> str:
        self.kb.reader(actor)
        row = self.kb._row(page)
        with self.node.lock:
            return page_policy(self.conn, row["id"])

    def record_check(self, entry_id: str, index: int, result: str, *, commit: str | None = None,
                     blob: str | None = None, anchor: Mapping[str, Any] | None = None,
                     message: str | None = None) -> None:
        """What a read of citation `index` found (the recheck duty's; written as crewlet)."""
        self._submit(records.entry_citation_check(SYSTEM_ACTOR, entry_id=entry_id, index=index, result=result,
                                                  commit=commit, blob=blob,
                                                  anchor=dict(anchor) if anchor is not None else None,
                                                  message=message))

    def record_serve(self, handle: str, via: str, entries: Sequence[Entry], *, query: str | None = None,
                     run: str | None = None) -> None:
        """One act of serving `entries` (ranked in their order) to `handle` by a tool: on the log, not waiting for
        the disk flush (as a knowledge.read: an audit on the path of the answer)."""
        if not entries:
            return
        listed = [{"entry_id": e.id, "rank": i + 1} for i, e in enumerate(entries)]
        self.node.submit([records.entry_serve(handle, via=via, entries=listed, query=query, run=run)], sync=False)

    # -- reads ---------------------------------------------------------------------------------------------
    def head_blobs(self, citations: Sequence[Mapping[str, Any]],
                   anchors: Mapping[int, Mapping[str, Any] | None] | None = None) -> dict[int, str | None]:
        """Each code citation's file blob at its repository's branch head now (where a recheck re-anchored it, the
        file it stands in now): what a serve compares with the blob last checked. A repository that cannot be
        read just now is left out (its last check stands)."""
        out: dict[int, str | None] = {}
        for index, cit in enumerate(citations, 1):
            repo = self.repositories.get(str(cit.get("repository"))) if "path" in cit else None
            if repo is None:
                continue
            anchor = (anchors or {}).get(index)
            path = str((anchor or {}).get("path") or cit["path"])
            try:
                out[index] = repo.blob_id(repo.head(), path)
            except Unreadable:
                continue
        return out

    def show(self, entry_id: str, *, at_head: bool = False, actor: str | None = None) -> Entry:
        """One entry with its citations (each with every check), its corroborations and its history. `at_head`:
        each cited file is read at its branch head, and a file changed since its last check says so (the entry
        then serves as UNGROUNDED until rechecked)."""
        self.kb.reader(actor)
        row = self._entry_row(entry_id)
        head_blobs = self._head_blobs_of(row) if at_head else None
        with self.node.lock:
            entry = self._build(row, head_blobs=head_blobs, every_check=True)
            entry.history = [dict(h) for h in self.conn.execute(
                "SELECT seq, actor, actor_kind, at, action, from_status, to_status, reason FROM entry_history "
                "WHERE entry_id = ? ORDER BY seq", (entry_id,))]
        return entry

    def _head_blobs_of(self, row: Any) -> dict[int, str | None]:
        """`head_blobs` of an entry's citations, each read where its last check anchored it."""
        with self.node.lock:
            anchors = {c["idx"]: json.loads(c["anchor"]) if c["anchor"] else None for c in self.conn.execute(
                "SELECT idx, anchor FROM citation_checks WHERE entry_id = ? ORDER BY seq", (row["id"],))}
        return self.head_blobs(json.loads(row["citations"] or "[]"), anchors)

    def entries(self, page: str, *, statuses: Sequence[str] | None = IN_USE, at_head: bool = False,
                actor: str | None = None) -> list[Entry]:
        """A page's entries (in use by default; `statuses=None`: all), verified and grounded first, then newest.
        `at_head`: each cited file read at its branch head, as `show` reads it (a file changed since its last
        check says so, and the entry ranks as UNGROUNDED)."""
        self.kb.reader(actor)
        row = self.kb._row(page)
        with self.node.lock:
            if statuses is None:
                rows = self.conn.execute("SELECT * FROM entries WHERE page_id = ?", (row["id"],)).fetchall()
            else:
                marks = ",".join("?" * len(statuses))
                rows = self.conn.execute(f"SELECT * FROM entries WHERE page_id = ? AND status IN ({marks})",
                                         (row["id"], *statuses)).fetchall()
        # git is read outside the node's lock: a slow repository holds up no other reader or writer
        heads = {r["id"]: self._head_blobs_of(r) for r in rows} if at_head else {}
        with self.node.lock:
            out = [self._build(r, head_blobs=heads.get(r["id"])) for r in rows]
        return sorted(out, key=lambda e: (TIER_RANK[e.tier], -e.created_at, e.id))

    def needs_person(self, *, actor: str | None = None) -> list[NeedsPerson]:
        """What waits for a person: proposed entries, disputed ones, entries in use whose cited code changed
        or went (no model judged it), and verified entries decay would have archived: each with why."""
        self.kb.reader(actor)
        with self.node.lock:
            asked = asked_of_a_person(self.conn, self.kb.company.bank, calendar_now_ms())
            rows = self.conn.execute("SELECT * FROM entries WHERE status IN (?, ?, ?, ?) ORDER BY created_at, id",
                                     (PROPOSED, DISPUTED, *IN_USE)).fetchall()
            out = []
            for r in rows:
                entry = self._build(r)
                reasons = []
                if entry.status == PROPOSED:
                    reasons.append("proposed: waits for a person to accept it")
                    if entry.supersedes:
                        reasons.append(f"a correction of {entry.supersedes}: only a person's acceptance retires it")
                elif entry.status == DISPUTED:
                    reasons.append(f"disputed{': ' + entry.status_reason if entry.status_reason else ''}")
                reasons += [f"citation {c.index}: the cited lines {'changed' if c.result == CHANGED else 'are gone'}"
                            for c in entry.citations if c.result in (CHANGED, GONE)]
                if entry.id in asked:
                    reasons.append(asked[entry.id])
                if reasons:
                    out.append(NeedsPerson(entry, reasons))
        return out

    def _build(self, row: Any, *, head_blobs: Mapping[int, str | None] | None = None,
               every_check: bool = False) -> Entry:
        conn = self.conn
        page = conn.execute("SELECT container, title FROM pages WHERE id = ?", (row["page_id"],)).fetchone()
        cits = json.loads(row["citations"] or "[]")
        states = [CitationState(i, c) for i, c in enumerate(cits, 1)]
        checks = conn.execute("SELECT idx, result, commit_id, blob, anchor, message, checked_at FROM citation_checks "
                              "WHERE entry_id = ? ORDER BY seq, idx", (row["id"],)).fetchall()
        for c in checks:
            if not 1 <= c["idx"] <= len(states):
                continue
            s = states[c["idx"] - 1]
            s.result, s.commit, s.blob, s.message, s.checked_at = (c["result"], c["commit_id"], c["blob"],
                                                                   c["message"], c["checked_at"])
            s.anchor = json.loads(c["anchor"]) if c["anchor"] else None
            if every_check:
                s.checks.append({"result": c["result"], "commit": c["commit_id"], "blob": c["blob"],
                                 "anchor": s.anchor, "message": c["message"], "checked_at": c["checked_at"]})
        by = [r[0] for r in conn.execute("SELECT actor FROM entry_corroborations WHERE entry_id = ? ORDER BY at, op_id",
                                         (row["id"],))]
        return Entry(
            id=row["id"], page_id=row["page_id"], page=f"{page['container']}/{page['title']}" if page else "",
            kind=row["kind"], body=row["body"], scope=row["scope"], status=row["status"], author=row["author"],
            author_kind=row["author_kind"], created_at=row["created_at"], supersedes=row["supersedes"],
            superseded_by=row["superseded_by"], verified_by=row["verified_by"], verified_at=row["verified_at"],
            status_by=row["status_by"], status_at=row["status_at"], status_reason=row["status_reason"],
            corroborations=len(by), corroborated_by=sorted(set(by)), citations=states,
            tier=trust_tier(row["status"], row["verified_by"], states, head_blobs))
