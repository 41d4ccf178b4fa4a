"""Triage of a proposed entry before a person sees it (spec 003, "Triage and escalation"; issue 36): `Triage(bank)`.

`decide(entry_id)` reads the entry and the bank and says what triage decides (a `TriageOutcome`), writing nothing;
`triage(entry_id)` decides, draws the audit and records it (`triage.decide`, applied by
core/pages/triage_handlers.py); `run()` triages every pending entry (the triage duty's pass, `crewlet triage run`).

**The five steps**, each writing what it read and found into the decision's `inputs`, so a person can see why:

1. Policy. A credential (core/text/credentials.py) or several claims (core/text/claims.py) in the body refuses it
   (refusal `credential` / `several_claims`): the write checks passed the body, so these fire on entries written
   before a rule was added, or by another node's older version. Both judgments saying `one_claim: false` refuses
   it too. A link citation with `external: true` (text from outside the company) escalates it: EXTERNAL_INPUT.
2. Exact repeats. A body equal, folded (entry_model.fold_body), to an entry in use in a scope that meets its own
   folds into it (CORROBORATE, `fold_into` the oldest such entry): an agent's repeat on an OPEN page, or one the bank
   had only as proposed. Unlike the fold at write, the scopes must meet: "Staging deploys need the VPN" of one module
   is another fact than the same words of another (the rules' own condition, docs/triage.md).
3. Neighbours. The entries in use nearer than KNOWLEDGE_SIMILARITY_THRESHOLD — the same check and the same setting
   as at write (core/bank/neighbours.py: the finder returns the five nearest entries in the bank; the entry itself
   and entries not in use are dropped from them, so fewer than five may be related). Each pair goes to the rules
   first (core/text/relate.py `relate_by_rules`, with each code citation's commit time read from git where the two
   cite one file); the pairs they cannot tell go to the two judgments (triage_judge.py), which must give the same
   relation. A duplicate folds the entry into that neighbour; a contradiction of a verified entry is
   CONTRADICTS_VERIFIED, of an entry on a LOCKED page CONTRADICTS_LOCKED; a replacement — or the entry's own
   `supersedes` — is SUPERSEDE_REQUEST; judgments that differ on a pair are JUDGES_DISAGREE. A refinement or a
   different fact asks nothing of a person; a contradiction of an entry no person verified on a page not locked is
   not in the spec's acceptance conditions, and is left to the judgments' `accept`: they are shown every neighbour,
   those the rules related with what the rules found, and told to decline an entry that contradicts one.
4. Grounding. No citation: UNGROUNDED. A citation whose latest check is not holding (held, shifted or moved) —
   changed, gone, or not read yet: CITATION_FAILED. Beside it, the rest of the acceptance: a CONVENTION is a
   PIN_REQUEST; a scope reaching more than MAX_SCOPE_MODULES modules is BROAD_SCOPE. What a scope reaches is
   counted at the branch heads of the configured repositories (core/repos `Repositories.reached`): a folder
   reaches the modules under it, else the module it lies in; **an unscoped entry reaches every module of every
   configured repository** (it is served to every area). With no repository configured there are no modules to
   reach (0, said in the inputs). A repository that cannot be read just now leaves the count unknown: the
   condition is not shown to hold, so it escalates as BROAD_SCOPE with `"counted": false` in the inputs.
5. Decision: refuse > corroborate > escalate (any reason) > accept. Accept also needs both judgments to say
   `one_claim: true` and `accept: true`. Judgments that differ on either escalate as JUDGES_DISAGREE; both
   declining to accept escalates as JUDGES_DISAGREE too (the two did not agree to accept: a person decides); a
   judgment that failed (the endpoint, a refusal, an answer that is no judgment) escalates as JUDGES_DISAGREE with
   the failure said in the inputs — never guessed. A model needed and none configured ([providers.llm] absent):
   NO_LLM.

**When the model is asked.** Only when its answer can change the decision: never after a refusal or a fold by
code; after an escalation by code only when some neighbour's relation is undecided (a judged duplicate would fold
the entry, which outranks an escalation) — then the judgments' `one_claim` and `accept` are applied as always.
(An escalation by code with every neighbour decided is not sent to the model to look for several claims: the
write check passed the body, and a person reads it anyway.) When asked: two calls, one a judgment, each covering
the entry and all its undecided neighbours; a failed first judgment settles the decision and the second is not
asked. `TriageOutcome.calls` counts the calls made.

**Holds.** They keep a decision made on the merits from acting; the decision keeps its type (kappa compares it):
UNKNOWN_SOURCE on an acceptance of an agent's entry (spec: "it accepts nothing from an agent on its own"; triage
still folds an agent's repeats and refuses its policy breaks), and LOW_AGREEMENT on a type the agreement reports
backed off (agreement.py `Agreement.backed_off`: the type's latest triage.state; acting when there is none). HARMFUL_SIGNAL is the review
queue's (core/bank/upkeep.py `harmful_entries`): triage decides only proposed entries, which no run is given.

**Modes** (KNOWLEDGE_AUTO_TRIAGE): off — nothing decided, nothing recorded; shadow — recorded, acted false; on —
acted when nothing holds it and it is not an escalation. A decision's id is its record's op id; it is audited
when acted, of a kind audits sample (triage_model.audited_kind), and drawn: core.stats.drawn(id,
KNOWLEDGE_AUDIT_RATE, "audit"); an audited decision lists AUDIT among its reasons.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import CrewletError, Invalid
from ..log.record import new_op_id
from ..pages import records
from ..pages.entry_model import (AGENT, CONVENTION, HOLDING, IN_USE, LOCKED, PERSON, PROPOSED, SYSTEM_ACTOR,
                                 citations_of, fold_body, page_policy)
from ..pages.triage_model import (ACCEPT, AUDIT, BROAD_SCOPE, CITATION_FAILED, CONTRADICTION, CONTRADICTS_LOCKED,
                                  CONTRADICTS_VERIFIED, CORROBORATE, CREDENTIAL, DUPLICATE, ESCALATE,
                                  EXTERNAL_INPUT, JUDGES_DISAGREE, LOW_AGREEMENT, MAX_SCOPE_MODULES, NO_LLM, OFF, ON,
                                  PIN_REQUEST, REFUSE, REPLACEMENT, SEVERAL_CLAIMS, SUPERSEDE_REQUEST, UNGROUNDED,
                                  UNKNOWN_SOURCE, audited_kind, ordered_reasons)
from ..repos import Repositories, Repository, Scope
from ..repos.modules import find_modules, modules_reached, written_scopes_meet
from ..stats import drawn
from ..text.claims import several_claims
from ..text.credentials import credential_in
from ..text.relate import Citation, EntryText, relate_by_rules
from .agreement import Agreement
from .entries import EntryBank
from .review import DecisionView, decision_by_id
from .triage_judge import JudgmentFailed, Neighbour, Subject, TriageJudge

if TYPE_CHECKING:
    from ..sections.bank import BankSettings

AUDIT_SALT = "audit"
PASS_BUDGET = 25             # entries one pass of the duty triages at most (each may cost two model calls)
Progress = Callable[[int, int, str], None]
_CONFIGURED: Any = object()  # Triage(judge=…) not given: the configured model's


@dataclass(frozen=True)
class TriageOutcome:
    """What triage decided about one entry; nothing written."""

    entry_id: str
    entry_version: int
    decision: str
    reasons: list[str]
    held: list[str]
    fold_into: str | None
    refusal: str | None
    inputs: dict[str, Any]   # {"neighbours", "citations", "judgments", "rules", …}: what it read and what each said
    calls: int               # model calls it made

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TriageReport:
    """What one run over the pending entries did. `mode` off: nothing decided or recorded (`said` says so)."""

    mode: str
    pending: int = 0                       # pending when the run began (at most the limit, and one more)
    decided: list[DecisionView] = field(default_factory=list)    # one a decision recorded
    counts: dict[str, int] = field(default_factory=dict)  # by decision type; "stale", "failed"
    calls: int = 0
    more: bool = False                     # stopped at its limit, or asked to stop, with entries left
    errors: list[str] = field(default_factory=list)

    @property
    def said(self) -> str:
        if self.mode == OFF:
            return "triage is off (KNOWLEDGE_AUTO_TRIAGE = off): every entry waits for a person"
        if not self.pending:
            return "no proposed entry waits for triage"
        parts = [f"{self.counts[k]} {k}" for k in (ACCEPT, CORROBORATE, REFUSE, ESCALATE, "stale", "failed")
                 if self.counts.get(k)]
        more = "; more wait" if self.more else ""
        return (f"triaged {len(self.decided)} in {self.mode} mode ({', '.join(parts) or 'nothing decided'}), "
                f"{self.calls} model call{'s' if self.calls != 1 else ''}{more}")

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "pending": self.pending, "counts": dict(self.counts), "calls": self.calls,
                "more": self.more, "errors": list(self.errors), "said": self.said,
                "decided": [d.to_json() for d in self.decided]}


class _Found:
    """What the steps found, as they go."""

    def __init__(self) -> None:
        self.reasons: set[str] = set()
        self.refusal: str | None = None
        self.fold_into: str | None = None
        self.settled_by = ""


def _written_by(author_kind: str) -> str:
    return {AGENT: "an agent", PERSON: "a person"}.get(author_kind, SYSTEM_ACTOR)


def _cited(cit: dict[str, Any]) -> str:
    if "link" in cit:
        return f"{cit['link']} ({cit.get('kind', 'link')}{', from outside the company' if cit.get('external') else ''})"
    lines = cit.get("lines") or []
    span = f" lines {lines[0]}-{lines[1]}" if len(lines) == 2 else ""
    at = f" at {str(cit['commit'])[:7]}" if cit.get("commit") else ""
    return f"{cit.get('repository')}:{cit.get('path')}{span}{at}"


class Triage:
    """Triage over a bank. `judge`: the two judgments' model — by default the configured one ([providers.llm], opened
    here and closed by `close()`), None: no model (a step that needs one escalates with NO_LLM). `settings`: the bank's
    settings to decide by; by default the company's, read at each call."""

    def __init__(self, bank: EntryBank, *, judge: TriageJudge | None = _CONFIGURED,
                 settings: BankSettings | None = None) -> None:
        self.bank = bank
        self._settings = settings
        self._owned: TriageJudge | None = None
        if judge is _CONFIGURED:
            llm = bank.kb.company.llm
            judge = self._owned = TriageJudge(llm) if llm is not None else None
        self.judge = judge
        self._commit_times: dict[tuple[str, str], int | None] = {}

    @property
    def settings(self) -> BankSettings:
        return self._settings if self._settings is not None else self.bank.kb.company.bank

    def close(self) -> None:
        if self._owned is not None:
            self._owned.close()
            self._owned = None

    def __enter__(self) -> Triage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- deciding ------------------------------------------------------------------------------------------------
    def decide(self, entry_id: str) -> TriageOutcome:
        """What triage decides about proposed entry `entry_id`, with what it read; writes nothing."""
        bank, conn = self.bank, self.bank.conn
        row = bank._entry_row(entry_id)
        if row["status"] != PROPOSED:
            raise Invalid(f"entry {entry_id} is {row['status']}: triage decides only proposed entries",
                          code="not_proposed")
        with bank.node.lock:
            entry = bank._build(row)
        settings = self.settings
        body, kind, cits = entry.body, entry.kind, citations_of(row)
        found = _Found()
        inputs: dict[str, Any] = {
            "entry": {"id": entry.id, "version": row["version"], "kind": kind, "scope": entry.scope,
                      "author": entry.author, "author_kind": entry.author_kind, "supersedes": entry.supersedes},
            "policy": {}, "repeat": None, "neighbours": [], "rules": [], "citations": [], "scope": {},
            "judgments": [], "model": None}
        calls = 0

        # 1. policy
        credential = credential_in(body)
        several = several_claims(body, kind) if credential is None else None
        inputs["policy"] = {"credential": credential, "several_claims": several,
                            "external": [i for i, c in enumerate(cits, 1) if "link" in c and c.get("external")]}
        if credential is not None:
            found.refusal, found.settled_by = CREDENTIAL, f"refused by rule: it holds {credential}"
        elif several is not None:
            found.refusal, found.settled_by = SEVERAL_CLAIMS, f"refused by rule: {several}"
        if inputs["policy"]["external"]:
            found.reasons.add(EXTERNAL_INPUT)

        # 2. exact repeats
        if found.refusal is None:
            with bank.node.lock:
                same = [r for r in conn.execute(
                    f"SELECT id, scope FROM entries WHERE folded = ? AND id != ? AND status IN "
                    f"({','.join('?' * len(IN_USE))}) ORDER BY created_at, id", (fold_body(body), entry.id, *IN_USE))
                    if written_scopes_meet(entry.scope, r["scope"])]
            if same:
                found.fold_into, found.settled_by = same[0]["id"], f"an exact repeat of entry {same[0]['id']}"
                inputs["repeat"] = same[0]["id"]

        shown: list[Neighbour] = []
        if found.refusal is None and found.fold_into is None:
            # 3. neighbours, by rules
            shown = self._neighbours(entry, row, cits, settings.similarity_threshold, found, inputs)
            if entry.supersedes:
                found.reasons.add(SUPERSEDE_REQUEST)
            # 4. grounding, and the rest of the acceptance
            self._grounding(entry, found, inputs)
            if kind == CONVENTION:
                found.reasons.add(PIN_REQUEST)
            self._scope(entry.scope, found, inputs)

        # 5. the judgments, when their answer can change the decision
        undecided = any(nb.relation is None for nb in shown)
        if found.refusal is None and found.fold_into is None and (not found.reasons or undecided):
            if self.judge is None:
                found.reasons.add(NO_LLM)
                inputs["model"] = "none configured ([providers.llm])"
            else:
                inputs["model"] = self.judge.model
                calls = self._judgments(entry, cits, shown, found, inputs)
        elif not found.settled_by:
            found.settled_by = "escalated by code: " + ", ".join(ordered_reasons(found.reasons))
        if found.settled_by:
            inputs["settled"] = found.settled_by

        if found.refusal is not None:
            decision = REFUSE
        elif found.fold_into is not None:
            decision = CORROBORATE
        elif found.reasons:
            decision = ESCALATE
        else:
            decision = ACCEPT
        if decision != ESCALATE and found.reasons:
            inputs["outranked"] = ordered_reasons(found.reasons)    # found, but the decision outranks them
        held = []
        if decision == ACCEPT and entry.author_kind == AGENT:
            held.append(UNKNOWN_SOURCE)
        if decision != ESCALATE:
            with bank.node.lock:
                off = Agreement(conn, settings).backed_off()
            inputs["backed_off"] = sorted(off)
            if decision in off:
                held.append(LOW_AGREEMENT)
        reasons = ordered_reasons(found.reasons) if decision == ESCALATE else []
        return TriageOutcome(entry_id=entry.id, entry_version=row["version"], decision=decision,
                             reasons=ordered_reasons([*reasons, *held]), held=ordered_reasons(held),
                             fold_into=found.fold_into if decision == CORROBORATE else None,
                             refusal=found.refusal if decision == REFUSE else None, inputs=inputs, calls=calls)

    def _neighbours(self, entry: Any, row: Any, cits: list[dict[str, Any]], threshold: float, found: _Found,
                    inputs: dict[str, Any]) -> list[Neighbour]:
        """Step 3 by rules: each in-use neighbour's relation, the reasons and the fold it gives; returns the
        neighbours as the judgments are shown them (`relation` None: the rules could not relate it)."""
        bank = self.bank
        near = bank.neighbours.find(entry.body, scope=entry.scope, threshold=threshold)
        inputs["compared"] = near.note
        shown: list[Neighbour] = []
        for nid, similarity, how in near.similar:
            if nid == entry.id:
                continue
            with bank.node.lock:
                other_row = bank.conn.execute("SELECT * FROM entries WHERE id = ?", (nid,)).fetchone()
                if other_row is None or other_row["status"] not in IN_USE:
                    continue
                other = bank._build(other_row)
                locked = page_policy(bank.conn, other.page_id) == LOCKED
            verified = other.verified_by is not None
            said: dict[str, Any] = {"id": nid, "similarity": similarity, "compared": how, "status": other.status,
                                    "page": other.page, "verified": verified, "locked": locked, "body": other.body}
            inputs["neighbours"].append(said)
            if nid == entry.supersedes:
                said |= {"relation": REPLACEMENT, "by": "supersedes"}
                shown.append(Neighbour(nid, other.body, other.kind, other.scope, verified, locked, REPLACEMENT))
                continue
            theirs = citations_of(other_row)
            verdict = relate_by_rules(self._text(entry, cits, theirs), self._text(other, theirs, cits))
            inputs["rules"].append({"neighbour": nid, "relation": verdict.relation, "rule": verdict.rule,
                                    "confidence": verdict.confidence})
            if verdict.relation is None:
                said |= {"relation": None, "by": "undecided by rules"}
                shown.append(Neighbour(nid, other.body, other.kind, other.scope, verified, locked))
                continue
            said |= {"relation": verdict.relation, "by": f"rule {verdict.rule}"}
            shown.append(Neighbour(nid, other.body, other.kind, other.scope, verified, locked, verdict.relation))
            self._relate(nid, verdict.relation, verified, locked, found)
        if found.fold_into is not None:
            found.settled_by = f"a duplicate of entry {found.fold_into} (rules)"
        return shown

    @staticmethod
    def _relate(nid: str, relation: str, verified: bool, locked: bool, found: _Found) -> None:
        if relation == DUPLICATE and found.fold_into is None:
            found.fold_into = nid                   # the nearest duplicate
        elif relation == CONTRADICTION:
            if verified:
                found.reasons.add(CONTRADICTS_VERIFIED)
            if locked:
                found.reasons.add(CONTRADICTS_LOCKED)
        elif relation == REPLACEMENT:
            found.reasons.add(SUPERSEDE_REQUEST)

    def _text(self, entry: Any, cits: list[dict[str, Any]], other: list[dict[str, Any]] | None = None) -> EntryText:
        """An entry as the rules read it. Each code citation's commit time is read from git only where the two
        entries cite one file (`other`: the new entry's citations; the rules' "a later commit of a file" test)."""
        shared = {(c.get("repository"), c.get("path")) for c in (other or []) if "path" in c}
        mine = {(c.get("repository"), c.get("path")) for c in cits if "path" in c}
        both = shared & mine if other is not None else None
        out = []
        for c in cits:
            if "path" not in c:
                continue
            lines = c.get("lines") or [None, None]
            when = None
            if both is not None and (c.get("repository"), c.get("path")) in both:
                when = self._commit_time(str(c.get("repository")), str(c.get("commit") or ""))
            out.append(Citation(str(c["path"]), lines[0], lines[-1], c.get("commit"), when))
        return EntryText(entry.body, entry.kind, (entry.scope,) if entry.scope else (), tuple(out))

    def _commit_time(self, repository: str, commit: str) -> int | None:
        key = (repository, commit)
        if key not in self._commit_times:
            when = None
            repo = self.bank.repositories.get(repository) if commit else None
            if repo is not None:
                try:
                    when = int(repo.git("show", "-s", "--format=%ct", commit).strip() or 0) or None
                except (CrewletError, ValueError):
                    when = None
            self._commit_times[key] = when
        return self._commit_times[key]

    def _grounding(self, entry: Any, found: _Found, inputs: dict[str, Any]) -> None:
        """Step 4: every citation's latest check must hold."""
        for c in entry.citations:
            inputs["citations"].append({"index": c.index, "cites": _cited(c.citation), "result": c.result,
                                        "holds": c.result in HOLDING, "external": bool(c.citation.get("external"))})
        if not entry.citations:
            found.reasons.add(UNGROUNDED)
        elif any(c.result not in HOLDING for c in entry.citations):
            found.reasons.add(CITATION_FAILED)

    def _scope(self, scope: str | None, found: _Found, inputs: dict[str, Any]) -> None:
        """The modules the scope reaches at the branch heads (BROAD_SCOPE past MAX_SCOPE_MODULES)."""
        said: dict[str, Any] = {"scope": scope, "max": MAX_SCOPE_MODULES}
        inputs["scope"] = said
        repos = self.bank.repositories
        if not len(repos):
            said |= {"counted": True, "modules": [], "note": "no repository configured: no module to reach"}
            return
        from .context import stored_scope

        parsed = stored_scope(scope) if scope is not None else None
        try:
            if isinstance(repos, Repositories):
                reached = repos.reached(parsed)
            else:        # repositories given as a plain mapping (a test's): their manifests, no listed folders
                names = [parsed.repository] if parsed is not None and parsed.repository else list(repos)
                reached = modules_reached(parsed, {n: find_modules(_files(repos[n])) for n in names if n in repos})
        except CrewletError as exc:
            said |= {"counted": False, "note": f"the modules could not be read: {exc}"}
            found.reasons.add(BROAD_SCOPE)
            return
        said |= {"counted": True, "modules": [str(Scope(r or None, m)) for r, m in reached]}
        if scope is None:
            said["note"] = "unscoped: it serves every area, so it reaches every module of every repository"
        if len(reached) > MAX_SCOPE_MODULES:
            found.reasons.add(BROAD_SCOPE)

    def _judgments(self, entry: Any, cits: list[dict[str, Any]], shown: list[Neighbour], found: _Found,
                   inputs: dict[str, Any]) -> int:
        """Step 3's undecided pairs and step 5's acceptance, by the two judgments: two calls (one when the first
        fails). Returns the calls made."""
        assert self.judge is not None
        subject = Subject(entry.body, entry.kind, entry.scope, _written_by(entry.author_kind),
                          tuple(_cited(c) for c in cits))
        got = []
        calls = 0
        for n in (1, 2):
            calls += 1
            try:
                got.append(self.judge.judge(n, subject, shown))
                inputs["judgments"].append(got[-1].to_json())
            except JudgmentFailed as exc:
                inputs["judgments"].append({"n": n, "failed": str(exc)})
                found.reasons.add(JUDGES_DISAGREE)
                if n == 1:
                    inputs["judgments"].append({"n": 2, "asked": False,
                                                "why": "judgment 1 failed: no acceptance can follow"})
                return calls
        one, two = got
        by_id = {d["id"]: d for d in inputs["neighbours"]}
        for nb in shown:
            if nb.relation is not None:
                continue
            a, b = one.relations[nb.id], two.relations[nb.id]
            said = by_id[nb.id]
            if a != b:
                said |= {"relation": None, "by": f"the judgments differ: {a} / {b}"}
                found.reasons.add(JUDGES_DISAGREE)
                continue
            said |= {"relation": a, "by": "both judgments"}
            self._relate(nb.id, a, nb.verified, nb.locked, found)
        if not one.one_claim and not two.one_claim:
            found.refusal = SEVERAL_CLAIMS
        elif one.one_claim != two.one_claim or one.accept != two.accept:
            found.reasons.add(JUDGES_DISAGREE)
        elif not one.accept:
            found.reasons.add(JUDGES_DISAGREE)       # both declined: the two did not agree to accept it
        return calls

    # -- recording -----------------------------------------------------------------------------------------------
    def triage(self, entry_id: str) -> DecisionView | None:
        """Decide, draw the audit, and write the triage.decide record. None when triage is off (nothing written),
        or when the entry changed since it was read (the record is a no-op: it is pending again)."""
        outcome = self.decide_and_record(entry_id)
        return outcome[1] if outcome is not None else None

    def decide_and_record(self, entry_id: str) -> tuple[TriageOutcome, DecisionView | None] | None:
        """`triage`, also giving the outcome (its call count): None when triage is off."""
        settings = self.settings
        mode = settings.auto_triage
        if mode == OFF:
            return None
        outcome = self.decide(entry_id)
        decision_id = new_op_id()
        acted = mode == ON and not outcome.held and outcome.decision != ESCALATE
        audited = (acted and audited_kind(outcome.decision, outcome.refusal)
                   and drawn(decision_id, settings.audit_rate, AUDIT_SALT))
        reasons = ordered_reasons([*outcome.reasons, AUDIT]) if audited else outcome.reasons
        out = self.bank._submit(records.triage_decide(
            SYSTEM_ACTOR, entry_id=outcome.entry_id, entry_version=outcome.entry_version, mode=mode,
            decision=outcome.decision, acted=acted, reasons=reasons, held=outcome.held, fold_into=outcome.fold_into,
            refusal=outcome.refusal, inputs=outcome.inputs, audited=audited, op_id=decision_id))
        if out.status == "noop":
            return outcome, None
        with self.bank.node.lock:
            return outcome, decision_by_id(self.bank.conn, decision_id)

    def pending(self, limit: int | None = None) -> list[str]:
        """Proposed entries with no decision recorded at their version, under a page not in the trash (the store
        refuses a decision about an entry of a trashed page), oldest change first."""
        sql = ("SELECT e.id FROM entries e JOIN pages p ON p.id = e.page_id AND p.trashed_at IS NULL "
               "WHERE e.status = ? AND NOT EXISTS (SELECT 1 FROM triage_decisions d "
               "WHERE d.entry_id = e.id AND d.entry_version = e.version) ORDER BY e.version, e.id")
        args: list[Any] = [PROPOSED]
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        with self.bank.node.lock:
            return [r[0] for r in self.bank.conn.execute(sql, args)]

    def run(self, *, limit: int | None = None, progress: Progress | None = None,
            stop: threading.Event | None = None) -> TriageReport:
        """Triage every pending entry (at most `limit`), saying progress as (done, total, label)."""
        mode = self.settings.auto_triage
        report = TriageReport(mode=mode)
        if mode == OFF:
            return report
        ids = self.pending(None if limit is None else limit + 1)
        report.pending = len(ids)
        if limit is not None and len(ids) > limit:
            ids, report.more = ids[:limit], True
        for done, entry_id in enumerate(ids):
            if stop is not None and stop.is_set():
                report.more = True
                break
            if progress is not None:
                progress(done, len(ids), f"triage {entry_id}")
            try:
                got = self.decide_and_record(entry_id)
            except CrewletError as exc:
                report.errors.append(f"{entry_id}: {exc}")
                report.counts["failed"] = report.counts.get("failed", 0) + 1
                continue
            if got is None:
                continue
            outcome, view = got
            report.calls += outcome.calls
            if view is None:
                report.counts["stale"] = report.counts.get("stale", 0) + 1
                continue
            report.decided.append(view)
            report.counts[outcome.decision] = report.counts.get(outcome.decision, 0) + 1
        if progress is not None:
            progress(len(ids), len(ids), "triaged")
        return report


def _files(repo: Repository) -> list[str]:
    return repo.files(repo.head())
