"""The upkeep duty (spec 003, "Upkeep"; core/bank/upkeep.py, core/bank/gaps.py): each pass proposes the review
findings given in KNOWLEDGE_CONVENTION_MIN_RUNS runs of one module as conventions and archives the proposed-this-way
conventions past KNOWLEDGE_CONVENTION_HARM_MARGIN; on KNOWLEDGE_GAP_ISSUES_CRON (default Mondays 04:00 UTC; `off`
disables it) it also files the issues of the questions asked KNOWLEDGE_GAP_ISSUE_MIN_COUNT times.

The cron is asked of the bank's calendar (`core.clock.calendar_now_ms`, which CREWLET_NOW sets), as decay's is; the
cursor is the calendar instant of the last gaps' pass (ms), and one ahead of the calendar counts as none. A fleet
duty: its records replicate, so one node runs it for the company.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..bank.upkeep import upkeep
from ..clock import calendar_now_ms, from_ms
from ..sections.bank import Cron
from . import UPKEEP
from .runner import Duty, DutyPass, PassContext

if TYPE_CHECKING:
    from ..node import Node


def _when(ms: int) -> str:
    return from_ms(ms).isoformat(timespec="minutes").replace("+00:00", "Z")


def gaps_due(cron: Cron, cursor: str | None) -> bool:
    """Whether the gaps' job is due on KNOWLEDGE_GAP_ISSUES_CRON after the pass at `cursor` (calendar ms)."""
    if cron.off:
        return False
    try:
        last: int | None = int(cursor) if cursor else None
    except ValueError:
        last = None
    if last is not None and last > calendar_now_ms():
        last = None                      # a drill's CREWLET_NOW, since unset: due now
    return cron.due(last)


class UpkeepDuty(Duty):
    name = UPKEEP
    scope = "fleet"

    def __init__(self, node: Node, *, interval_s: float = 60.0) -> None:
        self.node = node
        self.interval_s = interval_s

    def run_pass(self, ctx: PassContext) -> DutyPass:
        self.node.refresh_config()
        cron = self.node.company.bank.gap_issues_cron
        due = gaps_due(cron, ctx.cursor)
        now = calendar_now_ms()
        report = upkeep(self.node, gaps=due)
        worked = bool(report.proposed or report.archived or (report.gaps is not None and report.gaps.filed))
        status = {"gap_issues_cron": str(cron), "last_gaps": _when(now) if due else None}
        return DutyPass(summary=report.summary() + ("" if due else f" (gap issues not due: {cron})"), worked=worked,
                        cursor=str(now) if due else ctx.cursor,
                        counts={"proposed": len(report.proposed), "archived": len(report.archived),
                                "gaps_filed": len(report.gaps.filed) if report.gaps is not None else 0},
                        status=status)
