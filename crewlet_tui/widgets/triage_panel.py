"""The triage panel (spec 003, "Audits and agreement"): "Can triage decide alone?" — the mode triage runs in, the
floor and the evidence it needs, and per decision type its kappa against people's verdicts over the window, how
many verdicts that is, its state (acting or escalating: backed off) and since when, and whether it acts alone now
(the mode's meaning is said there: "no (shadow)"). Six lines, so the review queue keeps its room at 80x24.

It shows a `core.bank.review.TriageStatus` as `Review.status()` answers it; it reads nothing itself (the screen
that holds it reads the status in its background call). Ages are on the bank's calendar, as on every surface.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from core.pages.triage_model import ACTING, ESCALATE, ESCALATING, OFF, ON, SHADOW

from ..entry_words import age, now_ms

if TYPE_CHECKING:
    from core.bank.review import TriageStatus, TypeAgreement

QUESTION = "Can triage decide alone?"

# what each mode means for the entries, in spec 003's words
MODE_WORDS = {
    OFF: "no triage: every entry waits for a person",
    SHADOW: "it decides and records, and changes nothing",
    ON: "it acts where people agree with it; escalations wait for a person",
}


def kappa_text(kappa: float | None) -> Text:
    """κ to two places; undefined (no verdicts, or people and triage never differ in one label) as a dash."""
    return Text("—", style="dim") if kappa is None else Text(f"{kappa:.2f}")


def state_text(row: TypeAgreement) -> Text:
    if row.state == ACTING:
        return Text(row.state, style="green")
    return Text(row.state, style="bold yellow")


def acts_text(row: TypeAgreement, mode: str) -> Text:
    """Whether this type acts alone now, and when not, why — in `crewlet triage status`'s words: the mode, or a
    back-off (its entries escalate with LOW_AGREEMENT); escalation never acts alone, and never backs off."""
    if row.decision_type == ESCALATE:
        return Text("never backs off", style="dim")
    if row.acts:
        return Text("yes", style="bold green")
    if row.state == ESCALATING:
        return Text("no (LOW_AGREEMENT)", style="yellow")
    return Text(f"no ({mode})" if mode != ON else "no", style="dim")


class TriagePanel(Static):
    """The answer to "Can triage decide alone?" (see the module): `show(status)` draws it."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(Text(f"{QUESTION}  reading…", style="dim"), **kwargs)  # type: ignore[arg-type]
        self.status: TriageStatus | None = None

    def show(self, status: TriageStatus) -> None:
        self.status = status
        self.tooltip = f"mode {status.mode}: {MODE_WORDS.get(status.mode, status.mode)}"
        self.update(self.render_status(status, now_ms()))

    @staticmethod
    def render_status(status: TriageStatus, now: int) -> Table:
        head = Text()
        head.append(QUESTION, style="bold")
        head.append(f"  mode {status.mode}", style="bold cyan")
        head.append(f" · floor {status.floor:.2f}, ≥ {status.min_samples:,} verdict{'s' if status.min_samples != 1 else ''}"
                    f", {status.window_days} day{'s' if status.window_days != 1 else ''}", style="dim")
        rows = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), show_edge=False, expand=False)
        for name, justify in (("type", "left"), ("kappa", "right"), ("verdicts", "right"), ("state", "left"),
                              ("since", "left"), ("acts alone", "left")):
            rows.add_column(Text(name, style="dim"), justify=justify, no_wrap=True)  # type: ignore[arg-type]
        for row in status.types:
            rows.add_row(Text(row.decision_type, style="bold"), kappa_text(row.kappa), Text(f"{row.verdicts:,}"),
                         state_text(row), Text(age(row.since, now) if row.since else "—", style="dim"),
                         acts_text(row, status.mode))
        out = Table.grid()
        out.add_column()
        out.add_row(head)
        out.add_row(rows)
        return out
