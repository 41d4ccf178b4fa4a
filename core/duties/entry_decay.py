"""The decay duty: on PAGE_DECAY_CRON (default nightly at 03:00 UTC; `off` disables it) archives what nobody uses
(core/bank/decay.py): a proposed entry past PAGE_PROPOSED_ENTRY_EXPIRY_DAYS, a standing one not served in
PAGE_STANDING_ENTRY_DECAY_DAYS — except one whose citation held within the window, one a page links to, and one
a person verified (a person is asked instead).

Whether the cron is due is asked of the bank's calendar (`core.clock.calendar_now_ms`), which CREWLET_NOW sets:
`CREWLET_NOW=2027-06-01T04:00Z crewlet worker --once` decays as of that instant. The cursor is the calendar
instant of the last pass (ms); one ahead of the calendar (a drill's, since ended) counts as none, so the pass
runs at once. A fleet duty: its records replicate, so one node runs it for the company.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..bank.decay import ARCHIVED, decay
from ..clock import calendar_now_ms, from_ms
from . import ENTRY_DECAY
from .runner import Duty, DutyPass, PassContext

if TYPE_CHECKING:
    from ..node import Node


def _when(ms: int) -> str:
    return from_ms(ms).isoformat(timespec="minutes").replace("+00:00", "Z")


class EntryDecayDuty(Duty):
    name = ENTRY_DECAY
    scope = "fleet"

    def __init__(self, node: Node, *, interval_s: float = 60.0) -> None:
        self.node = node
        self.interval_s = interval_s     # how often the cron is asked whether it is due (a look at the clock)

    def run_pass(self, ctx: PassContext) -> DutyPass:
        self.node.refresh_config()
        settings = self.node.company.bank
        cron = settings.page_decay_cron
        if cron.off:
            return DutyPass(summary="off (PAGE_DECAY_CRON = off)", status={"cron": "off"})
        try:
            last = int(ctx.cursor) if ctx.cursor else None
        except ValueError:
            last = None                  # a cursor this version cannot read: due now, as a first run
        if last is not None and last > calendar_now_ms():
            # the last run stands ahead of the calendar: a drill's CREWLET_NOW, since unset. Waiting for the real
            # clock to pass it would stop decay for months; a pass now archives only what is stale now
            last = None
        if not cron.due(last):
            assert last is not None
            upcoming = cron.next_after(from_ms(last))
            return DutyPass(summary=f"not due: next at {upcoming:%Y-%m-%d %H:%M}Z ({cron})" if upcoming else "not due",
                            status={"cron": str(cron), "last_run": _when(last)})
        now = calendar_now_ms()
        report = decay(self.node, settings, now, progress=ctx.progress)
        counts = {d: len(report.of(d)) for d in ("archived", "kept_held", "kept_linked", "ask_person")}
        return DutyPass(summary=f"as of {_when(now)}: {report.summary()}", worked=bool(report.of(ARCHIVED)),
                        cursor=str(now), counts=counts | {"refused": report.refused},
                        status={"cron": str(cron), "last_run": _when(now), "counts": counts})
