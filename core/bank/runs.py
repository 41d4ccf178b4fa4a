"""Agent runs (spec 003, "What agents get", "The holdout"; issue 37): `RunBank(bank)`.

A run is an agent's piece of work with an id the runtime gives it (`crewlet run start` draws one when it is not
given; `crewlet mcp --run ID` starts it when it was not started). Its arm is drawn once, at its start, from a hash
of its id (core/pages/run_model.py): a holdout run gets no knowledge — its context is empty and says so, and
nothing is recorded as served to it; a treatment run gets, for its modules, what `load_context` serves for an
area (core/bank/context.py: the conventions first, then the KNOWLEDGE_CONTEXT_TOP_K most relevant grounded or
verified entries within KNOWLEDGE_CONTEXT_TOKEN_BUDGET), recorded as served to the run.

Its outcomes come from the script or CI that knows them (`finish`): the applier counts each as helpful or harmful
for the entries the run was given where the outcome falls under their scope (core/pages/run_handlers.py), and a
harmful one has those entries' code citations read again at once, by the recheck's own machinery
(core/bank/recheck.py, for those entries alone).

Every write is a record on the pages log (`run.start`, `run.finish`); this class refuses bad input in one line
before anything is appended, and raises the applier's refusal (a run finished twice) the same way.
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import Invalid, NotFound, Refused
from ..pages import records
from ..pages.run_model import (CHECKS_VALUES, HOLDOUT, HOLDOUT_SALT, HOLDOUT_WORDS, MAX_FINDING_CHARS, MAX_FINDINGS,
                               PR_VALUES, REVIEW_VALUES, TREATMENT)
from ..repos import parse_scope
from ..stats import drawn
from .context import Context, load_context
from .entries import EntryBank
from .recheck import RecheckReport, Rechecker

MAX_RUN_ID = 200          # characters: a runtime's id, not a document
MAX_ISSUE = 500


@dataclass
class Run:
    """One agent run as it stands."""

    id: str
    agent: str
    issue: str | None
    modules: list[str]
    arm: str
    holdout_rate: float
    started_by: str
    started_at: int
    finished_by: str | None = None
    finished_at: int | None = None
    checks: str | None = None
    review: str | None = None
    pr: str | None = None
    cost: float | None = None
    findings: list[dict[str, str]] = field(default_factory=list)
    served: int = 0                     # entries recorded as served to it (distinct)

    @property
    def holdout(self) -> bool:
        return self.arm == HOLDOUT

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__) | {"finished": self.finished}


@dataclass
class RunContext:
    """What a run is given: nothing for a holdout run (`text` says so), else load_context over its modules."""

    run: Run
    context: Context | None

    @property
    def text(self) -> str:
        return HOLDOUT_WORDS if self.context is None else self.context.text

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"run_id": self.run.id, "arm": self.run.arm, "holdout": self.run.holdout}
        if self.context is None:
            return out | {"text": HOLDOUT_WORDS, "conventions": [], "entries": [], "pages": []}
        return out | {"text": self.context.text} | self.context.to_json()


@dataclass
class Finished:
    """A finish as applied: what the outcomes counted, and the recheck a harmful one started."""

    run: Run
    given: int
    helpful: int
    harmful: int
    harmful_entries: list[str]
    recheck: RecheckReport | None = None
    recheck_said: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"run": self.run.to_json(), "entries_given": self.given, "helpful": self.helpful,
                               "harmful": self.harmful, "harmful_entries": self.harmful_entries,
                               "recheck": self.recheck.to_json() if self.recheck is not None else None,
                               "recheck_said": self.recheck_said}
        return out


def new_run_id() -> str:
    """A fresh run id, as a runtime that has none of its own gets one: 'run-' and 16 hex digits."""
    return "run-" + os.urandom(8).hex()


def _choice(name: str, value: str, allowed: Sequence[str]) -> str:
    v = (value or "").strip().lower()
    if v not in allowed:
        raise Invalid(f"--{name} '{value}' is not one: use {'|'.join(allowed)}", code="invalid_outcome",
                      option=name)
    return v


def parse_finding(text: str) -> dict[str, str]:
    """'MODULE:TEXT'. Where MODULE names its repository ('NAME:folder'), write 'NAME:folder: TEXT': the text starts
    after the first ': ' when there is one, else after the first ':'."""
    raw = text.strip()
    at = raw.find(": ")
    module, sep, said = (raw[:at], ":", raw[at + 2:]) if at > 0 else raw.partition(":")
    if not sep or not module.strip() or not said.strip():
        raise Invalid(f"--finding '{text}' is not MODULE:TEXT (e.g. 'apps/server: retries need a backoff')",
                      code="invalid_finding")
    if len(said) > MAX_FINDING_CHARS:
        raise Invalid(f"a finding is at most {MAX_FINDING_CHARS:,} characters; this one has {len(said):,}",
                      code="invalid_finding")
    return {"module": module.strip(), "text": said.strip()}


class RunBank:
    """The agent runs of a node, over an EntryBank (its repositories read for module scopes and rechecks)."""

    def __init__(self, bank: EntryBank) -> None:
        self.bank = bank
        self.node = bank.node
        self.kb = bank.kb

    # -- reads ---------------------------------------------------------------------------------------------
    def get(self, run_id: str, *, actor: str | None = None) -> Run:
        """One run, or NotFound naming it."""
        self.kb.reader(actor)
        with self.node.lock:
            row = self.node.conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise NotFound(f"no run '{run_id}' — `crewlet run start` begins one and prints its id",
                               code="no_run", run_id=run_id)
            run = _run_of(row)
            run.findings = [{"module": r[0], "text": r[1]} for r in self.node.conn.execute(
                "SELECT module, text FROM run_findings WHERE run_id = ? ORDER BY op_id, idx", (run_id,))]
            run.served = self.node.conn.execute("SELECT count(DISTINCT entry_id) FROM entry_serves WHERE run = ?",
                                                (run_id,)).fetchone()[0]
        return run

    def exists(self, run_id: str) -> bool:
        with self.node.lock:
            return self.node.conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is not None

    # -- writes --------------------------------------------------------------------------------------------
    def _writer(self, actor: str | None) -> Any:
        return self.bank._writer(actor)

    def start(self, agent: str, *, issue: str | None = None, modules: Sequence[str] = (), run_id: str | None = None,
              actor: str | None = None) -> Run:
        """Begin a run of `agent` (a configured agent) on `modules` (folders, NAME:folder where several
        repositories are configured), its arm drawn from its id at KNOWLEDGE_HOLDOUT_RATE."""
        who = self._writer(actor)
        run_id = (run_id or "").strip() or new_run_id()
        if len(run_id) > MAX_RUN_ID or any(c.isspace() for c in run_id):
            raise Invalid(f"run id '{run_id[:60]}' is not one: at most {MAX_RUN_ID} characters, no spaces",
                          code="invalid_run_id")
        agent = (agent or "").strip()
        company = self.kb.company
        if agent not in company.actors or not company.actors[agent].is_agent:
            agents = ", ".join(sorted(h for h, a in company.actors.items() if a.is_agent)) or "none configured"
            raise Invalid(f"--agent '{agent}' is not a configured agent (agents: {agents})", code="invalid_agent")
        if issue is not None and len(issue) > MAX_ISSUE:
            raise Invalid(f"--issue is at most {MAX_ISSUE} characters", code="invalid_issue")
        scopes: list[str] = []
        for m in modules:
            if not m.strip():
                continue
            parsed = parse_scope(m, list(self.bank.repositories))
            if parsed is not None and str(parsed) not in scopes:
                scopes.append(str(parsed))
        if self.exists(run_id):
            raise Refused(f"run {run_id} was started already: a run id is used once", code="run_exists")
        rate = company.bank.holdout_rate
        arm = HOLDOUT if drawn(run_id, rate, HOLDOUT_SALT) else TREATMENT
        self.bank._submit(records.run_start(who.handle, run_id=run_id, agent=agent, modules=scopes, arm=arm,
                                            holdout_rate=rate, issue=(issue or "").strip() or None))
        return self.get(run_id, actor=who.handle)

    def context(self, run_id: str, *, actor: str | None = None, token_budget: int | None = None,
                top_k: int | None = None, record: bool = True) -> RunContext:
        """What run `run_id` is given (see the module), read by `actor` (the runtime fetching it) and recorded as
        served to the run's agent, against the run — while it is under way: a finished run's outcomes are in, and
        reading its context afterwards serves no work."""
        run = self.get(run_id, actor=actor)
        if run.holdout:
            return RunContext(run, None)
        areas = run.modules or self.whole()
        ctx = load_context(self.bank, areas, token_budget=token_budget, top_k=top_k, actor=run.agent,
                           record=record and not run.finished, run=run.id)
        return RunContext(run, ctx)

    def whole(self) -> list[str]:
        """A run that names no module works anywhere: the whole of every configured repository."""
        names = sorted(self.bank.repositories)
        return [f"{n}:." for n in names] if names else ["."]

    def finish(self, run_id: str, *, checks: str, review: str, pr: str, cost: float | None = None,
               findings: Sequence[str] = (), actor: str | None = None, recheck: bool = True) -> Finished:
        """Report run `run_id`'s outcomes. A harmful outcome for entries it was given re-checks their code citations
        at once (`recheck`)."""
        checks = _choice("checks", checks, CHECKS_VALUES)
        review = _choice("review", review, REVIEW_VALUES)
        pr = _choice("pr", pr, PR_VALUES)
        if cost is not None and not cost >= 0:
            raise Invalid(f"--cost {cost} is not a cost: give USD from 0, e.g. --cost 0.42", code="invalid_cost")
        if len(findings) > MAX_FINDINGS:
            raise Invalid(f"at most {MAX_FINDINGS} findings a run; {len(findings)} were given", code="invalid_finding")
        parsed = [parse_finding(f) for f in findings]
        for f in parsed:         # a module as scopes are stored (NAME:folder): the same module, whoever wrote it
            try:
                scope = parse_scope(f["module"], list(self.bank.repositories))
            except Invalid as exc:
                raise Invalid(f"--finding '{f['module']}: …': {exc}", code="invalid_finding") from None
            f["module"] = str(scope)
        who = self._writer(actor)
        run = self.get(run_id, actor=who.handle)
        if who.is_agent and who.handle == run.agent:
            raise Refused(f"{who.handle} cannot report its own run's outcomes: the script or CI that knows them does",
                          code="forbidden")
        if run.finished:
            raise Refused(f"run {run_id} finished already ({run.checks} checks, {run.review} review, pr {run.pr}): "
                          "a run's outcomes are reported once", code="run_finished")
        out = self.bank._submit(records.run_finish(who.handle, run_id=run_id, checks=checks, review=review, pr=pr,
                                                   cost=cost, findings=parsed))
        result = out.result
        done = Finished(self.get(run_id, actor=who.handle), int(result.get("given", 0)),
                        int(result.get("helpful", 0)), int(result.get("harmful", 0)),
                        list(result.get("harmful_entries", [])))
        if recheck and done.harmful_entries:
            done.recheck, done.recheck_said = self.recheck(done.harmful_entries)
        return done

    def recheck(self, entry_ids: Sequence[str]) -> tuple[RecheckReport, list[str]]:
        """The code citations of `entry_ids` read again now (the recheck duty's machinery, for these entries alone;
        a chat model of [providers.llm] judges rewritten lines where one is configured). What could not be read is
        said: a repository unreadable just now leaves those citations' last checks standing."""
        from .judge import Judge

        llm = self.kb.company.llm
        judge = Judge(llm) if llm is not None else None
        try:
            report = Rechecker(self.node, self.bank.repositories, judge=judge).run(entries=entry_ids)
        finally:
            if judge is not None:
                judge.close()
        said = list(report.said)
        if not report.counts or sum(report.counts.values()) == 0:
            said.append("no code citation among them to read again (links are not rechecked)")
        return report, said

    def runs(self, *, agent: str | None = None, limit: int = 50, actor: str | None = None) -> list[Run]:
        """The newest runs first (of `agent` alone when named), at most `limit`."""
        self.kb.reader(actor)
        where, args = ("WHERE agent = ?", [agent]) if agent else ("", [])
        with self.node.lock:
            rows = self.node.conn.execute(f"SELECT * FROM runs {where} ORDER BY started_at DESC, id DESC LIMIT ?",
                                          [*args, max(0, limit)]).fetchall()
            return [_run_of(r) for r in rows]

    # -- the report ----------------------------------------------------------------------------------------
    def finished_runs(self) -> list[Run]:
        with self.node.lock:
            rows = self.node.conn.execute("SELECT * FROM runs WHERE finished_at IS NOT NULL ORDER BY finished_at, id")
            return [_run_of(r) for r in rows]

    def started_count(self) -> dict[str, int]:
        """Runs begun and not yet finished, per arm."""
        with self.node.lock:
            return {r[0]: r[1] for r in self.node.conn.execute(
                "SELECT arm, count(*) FROM runs WHERE finished_at IS NULL GROUP BY arm")}


def _run_of(row: Any) -> Run:
    return Run(id=row["id"], agent=row["agent"], issue=row["issue"], modules=json.loads(row["modules"]),
               arm=row["arm"], holdout_rate=float(row["holdout_rate"]), started_by=row["started_by"],
               started_at=row["started_at"], finished_by=row["finished_by"], finished_at=row["finished_at"],
               checks=row["checks"], review=row["review"], pr=row["pr"], cost=row["cost"])
