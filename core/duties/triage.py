"""The triage duty: each pass triages the proposed entries that wait for a decision at their version
(core/bank/triage.py `Triage.run`), at most PASS_BUDGET of them — each may cost two calls of the chat model of
[providers.llm] — and says its progress as it goes. KNOWLEDGE_AUTO_TRIAGE off: it decides and records nothing, and
says so. `crewlet triage run` runs the same pass now.

A fleet duty: its triage.decide records replicate, so one node of the company triages for all. It keeps no cursor:
what waits is read from the rows (a proposed entry with no decision at its version), so an entry changed since its
decision is triaged again, and a decision that lost the race with a change (a no-op) leaves it waiting.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..bank.entries import EntryBank
from ..bank.triage import PASS_BUDGET, Triage
from ..bank.triage_judge import TriageJudge
from ..pages.triage_model import OFF
from . import TRIAGE
from .runner import Duty, DutyPass, PassContext

if TYPE_CHECKING:
    from ..chat import LlmSettings
    from ..node import Node
    from ..sections.repos import RepositoriesSettings


class TriageDuty(Duty):
    """`budget`: the entries one pass triages at most (the rest wait for the next pass, which comes at once)."""

    name = TRIAGE
    scope = "fleet"
    interval_s = 30.0

    def __init__(self, node: Node, *, budget: int = PASS_BUDGET) -> None:
        self.node = node
        self.budget = budget
        self._bank: EntryBank | None = None
        self._repos: RepositoriesSettings | None = None
        self._llm: LlmSettings | None = None
        self._judge: TriageJudge | None = None

    def _bank_for(self, repos: RepositoriesSettings) -> EntryBank:
        """One bank while the configured repositories stay the same (their processes and the finder's index)."""
        if self._bank is None or repos != self._repos:
            if self._bank is not None:
                self._bank.close()
            self._bank, self._repos = EntryBank(self.node), repos
        return self._bank

    def _judge_for(self, llm: LlmSettings | None) -> TriageJudge | None:
        if llm != self._llm or (llm is not None and self._judge is None):
            if self._judge is not None:
                self._judge.close()
            self._judge, self._llm = (TriageJudge(llm) if llm is not None else None), llm
        return self._judge

    def run_pass(self, ctx: PassContext) -> DutyPass:
        self.node.refresh_config()
        company = self.node.company
        mode = company.bank.auto_triage
        if mode == OFF:
            return DutyPass(summary="off (KNOWLEDGE_AUTO_TRIAGE = off): every entry waits for a person",
                            status={"mode": OFF})
        triage = Triage(self._bank_for(company.repositories), judge=self._judge_for(company.llm))
        report = triage.run(limit=self.budget, progress=ctx.progress, stop=ctx.stop)
        counts = dict(report.counts) | ({"calls": report.calls} if report.calls else {})
        return DutyPass(summary=report.said, more=report.more, worked=bool(report.decided), counts=counts,
                        status={"mode": mode, "said": report.said, "errors": report.errors[:5],
                                "model": self._llm.model if self._llm is not None else None})

    def close(self) -> None:
        if self._judge is not None:
            self._judge.close()
            self._judge = None
        if self._bank is not None:
            self._bank.close()
            self._bank = None
