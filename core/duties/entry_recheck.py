"""The recheck duty: each configured repository's default branch watched on its `poll_interval`
([repositories.NAME], default 5m), and the entries' code citations carried to its head (core/bank/recheck.py)
— re-anchored, followed, moved, or changed (judged by the chat model of [providers.llm] when one is configured,
else a person is asked). `crewlet entry recheck` runs it now, every repository at once.

A fleet duty: its records replicate, so one node of the company runs it for all. Its cursor is the head each
repository was checked against (JSON `{"heads": {name: commit}}`): the next pass's jumps start there.
"""
from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from ..bank.judge import Judge
from ..bank.recheck import MAX_JUDGED, Rechecker, RecheckReport
from ..bank.repositories import open_repositories
from ..repos.repositories import Repositories
from ..sections.repos import DEFAULT_POLL_INTERVAL_S, RepositoriesSettings
from . import ENTRY_RECHECK
from .runner import Duty, DutyPass, PassContext

if TYPE_CHECKING:
    from ..chat import LlmSettings
    from ..node import Node


class EntryRecheckDuty(Duty):
    """`force`: every repository at every pass, whatever its poll interval (`crewlet entry recheck`).
    `max_judged`: the model calls one pass makes at most (the rest wait for the next pass, which comes at once)."""

    name = ENTRY_RECHECK
    scope = "fleet"

    def __init__(self, node: Node, *, force: bool = False, max_judged: int = MAX_JUDGED) -> None:
        self.node = node
        self.force = force
        self.max_judged = max_judged
        self._settings: RepositoriesSettings | None = None
        self._repos: Repositories | None = None
        self._llm: LlmSettings | None = None
        self._judge: Judge | None = None
        self._looked: dict[str, float] = {}      # repository -> time.monotonic() of its last whole look
        self.last: RecheckReport | None = None   # the last pass's report (the CLI prints it)
        self.interval_s = self._interval(node.company.repositories)

    @staticmethod
    def _interval(settings: RepositoriesSettings) -> float:
        """The runner asks as often as the most eager repository wants: a pass looks only at those due."""
        return float(min((r.poll_interval_s for r in settings), default=DEFAULT_POLL_INTERVAL_S))

    def _repositories(self, settings: RepositoriesSettings) -> Repositories:
        """The configured repositories, opened again when company.toml changed them."""
        if self._repos is None or settings != self._settings:
            if self._repos is not None:
                self._repos.close()
            self._repos, self._settings = open_repositories(settings), settings
            self.interval_s = self._interval(settings)
        return self._repos

    def _judge_for(self, llm: LlmSettings | None) -> Judge | None:
        if llm != self._llm or (llm is not None and self._judge is None):
            if self._judge is not None:
                self._judge.close()
            self._judge, self._llm = (Judge(llm) if llm is not None else None), llm
        return self._judge

    def run_pass(self, ctx: PassContext) -> DutyPass:
        self.node.refresh_config()
        company = self.node.company
        settings = company.repositories
        if not len(settings):
            return DutyPass(summary="no repositories configured ([repositories.NAME] in company.toml)",
                            status={"repositories": []})
        repos = self._repositories(settings)
        now = time.monotonic()
        due = [r.name for r in settings
               if self.force or now - self._looked.get(r.name, float("-inf")) >= r.poll_interval_s]
        if not due:
            return DutyPass(summary="no repository due yet")
        heads: dict[str, str] = {}
        if ctx.cursor:
            try:
                heads = dict(json.loads(ctx.cursor).get("heads") or {})
            except (ValueError, AttributeError):
                heads = {}       # a cursor this version cannot read: every jump starts at its citation's commit
        report = Rechecker(self.node, repos, judge=self._judge_for(company.llm), max_judged=self.max_judged).run(
            names=None if self.force else due, since=heads, progress=ctx.progress, stop=ctx.stop)
        self.last = report
        if not report.more:
            for name in due:
                self._looked[name] = now
        heads |= report.heads
        status: dict[str, Any] = {"heads": heads, "said": report.said, "disputed": report.disputed,
                                  "model": self._llm.model if self._llm is not None else None}
        return DutyPass(summary=report.summary(), more=report.more, worked=report.counts["records"] > 0,
                        cursor=json.dumps({"heads": heads}, sort_keys=True),
                        counts={k: v for k, v in report.counts.items() if v}, status=status)

    def close(self) -> None:
        if self._judge is not None:
            self._judge.close()
            self._judge = None
        if self._repos is not None:
            self._repos.close()
            self._repos = None
