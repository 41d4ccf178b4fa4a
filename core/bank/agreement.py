"""Can triage decide alone? (spec 003, "Audits and agreement"): how far triage and people agree, per decision type,
and the back-off that stops a type acting while they do not.

- A **verdict** is a person's outcome on an entry triage decided about (core/pages/triage_handlers.py writes them
  into `triage_verdicts`: from a person's action on the entry, or an audit's answer), with the decision's type and
  the person's outcome read as a type (`triage_model.person_label`). A decision counts once: its latest verdict.
- **Kappa per type, one-vs-rest**: over the verdicts of the last KNOWLEDGE_KAPPA_WINDOW_DAYS days, rater a says
  "triage decided T", rater b "the person's outcome is T"; `core.stats.cohen_kappa(a, b)`, None when undefined
  (no verdicts, or both raters said the same thing of every one).
- **Back-off, with hysteresis**: a type that acts and whose kappa is below KNOWLEDGE_KAPPA_FLOOR over at least
  KNOWLEDGE_KAPPA_MIN_SAMPLES verdicts stops acting (ESCALATING: its entries go to a person with LOW_AGREEMENT);
  it acts again only when its kappa is at the floor or above, over at least the minimum. With fewer verdicts, or
  a kappa that is undefined, the state stays: a type resumes on evidence, not because old verdicts left the
  window. Escalation is measured but never backs off. Each change is a `triage.state` record with the figures it
  was made on (`settle`), so every node holds the same states.

The measuring (`Verdict`, `counted`, `type_kappa`, `next_state`) is pure; `Agreement` reads the rows.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..clock import calendar_now_ms
from ..errors import Refused
from ..pages import records
from ..pages.entry_model import SYSTEM_ACTOR
from ..pages.triage_model import ACTING, BACKS_OFF, DECISIONS, ESCALATE, ESCALATING, ON
from ..stats import cohen_kappa

if TYPE_CHECKING:
    from ..sections.bank import BankSettings
    from .entries import EntryBank

DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class Verdict:
    """One triage_verdicts row as agreement reads it."""

    decision_id: str
    decision: str        # triage's type
    label: str           # the person's outcome as a type
    at: int
    seq: int


def counted(verdicts: Iterable[Verdict], now_ms: int, window_days: int) -> list[Verdict]:
    """The verdicts kappa is taken over: each decision's latest verdict (by log order), kept when it falls in the
    window (at >= now - window_days). A decision an audit and then a person's action both judged counts once."""
    latest: dict[str, Verdict] = {}
    for v in verdicts:
        held = latest.get(v.decision_id)
        if held is None or v.seq > held.seq:
            latest[v.decision_id] = v
    since = now_ms - window_days * DAY_MS
    return sorted((v for v in latest.values() if v.at >= since), key=lambda v: v.seq)


def type_kappa(decision_type: str, verdicts: Sequence[Verdict]) -> float | None:
    """Cohen's kappa of triage against people for one type, one-vs-rest: None when undefined."""
    return cohen_kappa([v.decision == decision_type for v in verdicts],
                       [v.label == decision_type for v in verdicts])


def next_state(state: str, kappa: float | None, verdicts: int, floor: float, min_samples: int) -> str:
    """A backing-off type's state after measuring it: below the floor over at least `min_samples` verdicts stops
    it acting, at or above the floor over at least `min_samples` lets it act again; otherwise it stays."""
    if kappa is None or verdicts < min_samples:
        return state
    return ESCALATING if kappa < floor else ACTING


@dataclass(frozen=True)
class TypeAgreement:
    """One decision type's line of "Can triage decide alone?"."""

    decision_type: str
    kappa: float | None       # None: undefined (no verdicts, or one label throughout)
    verdicts: int             # the verdicts in the window kappa was taken over (every type's: one-vs-rest)
    state: str                # acting | escalating (escalation always acting: it never backs off)
    since: int | None         # when the state last changed (its triage.state record); None: never changed
    acts: bool                # triage acts on this type alone now: mode on, state acting (never an escalation)
    decided: int = 0          # of those verdicts, the ones on decisions of this type

    def to_json(self) -> dict[str, Any]:
        return {"decision_type": self.decision_type, "kappa": self.kappa, "verdicts": self.verdicts,
                "decided": self.decided, "state": self.state, "since": self.since, "acts": self.acts}


class Agreement:
    """Agreement and back-off states as a node's rows hold them. The caller holds the node's lock around a read
    when other threads write the same connection."""

    def __init__(self, conn: Any, settings: BankSettings) -> None:
        self.conn = conn
        self.settings = settings

    # -- rows ----------------------------------------------------------------------------------------------
    def verdicts(self) -> list[Verdict]:
        return [Verdict(r[0], r[1], r[2], r[3], r[4]) for r in self.conn.execute(
            "SELECT decision_id, decision, label, at, seq FROM triage_verdicts ORDER BY seq, op_id")]

    def states(self) -> dict[str, tuple[str, int]]:
        """Each type's state as its latest triage.state record set it, with that record's time; a type never
        changed is absent (it acts)."""
        out: dict[str, tuple[str, int]] = {}
        for decision_type, state, at in self.conn.execute(
                "SELECT decision_type, state, at FROM triage_states ORDER BY seq, op_id"):
            out[decision_type] = (state, at)
        return out

    def backed_off(self) -> set[str]:
        """The types that escalate now instead of acting (LOW_AGREEMENT)."""
        return {t for t, (state, _at) in self.states().items() if state == ESCALATING and t in BACKS_OFF}

    # -- figures -------------------------------------------------------------------------------------------
    def figures(self, now_ms: int | None = None) -> list[TypeAgreement]:
        """Kappa, verdicts and state per decision type (spec order), over the window ending at `now_ms` (default:
        the bank's calendar, which CREWLET_NOW sets)."""
        now = calendar_now_ms() if now_ms is None else now_ms
        window = counted(self.verdicts(), now, self.settings.kappa_window_days)
        states = self.states()
        on = self.settings.auto_triage == ON
        out = []
        for t in DECISIONS:
            state, since = states.get(t, (ACTING, None)) if t in BACKS_OFF else (ACTING, None)
            out.append(TypeAgreement(
                decision_type=t, kappa=type_kappa(t, window), verdicts=len(window), state=state, since=since,
                acts=on and state == ACTING and t != ESCALATE, decided=sum(1 for v in window if v.decision == t)))
        return out

    def due_changes(self, now_ms: int | None = None) -> list[tuple[str, str, dict[str, Any]]]:
        """(type, new state, the figures it is made on) for each backing-off type whose state the figures move."""
        now = calendar_now_ms() if now_ms is None else now_ms
        s = self.settings
        out = []
        for fig in self.figures(now):
            if fig.decision_type not in BACKS_OFF:
                continue
            new = next_state(fig.state, fig.kappa, fig.verdicts, s.kappa_floor, s.kappa_min_samples)
            if new != fig.state:
                out.append((fig.decision_type, new, {
                    "kappa": fig.kappa, "verdicts": fig.verdicts, "decided": fig.decided, "floor": s.kappa_floor,
                    "min_samples": s.kappa_min_samples, "window_days": s.kappa_window_days, "now": now,
                    "from": fig.state}))
        return out


def settle(bank: EntryBank, now_ms: int | None = None) -> list[dict[str, Any]]:
    """Write a triage.state record (as crewlet) for each change the figures make due now; returns each change
    written: {"op_id", "decision_type", "state", "figures"}. Another node that settled the same change first makes
    ours a no-op, left out."""
    with bank.node.lock:
        due = Agreement(bank.conn, bank.kb.company.bank).due_changes(now_ms)
    written = []
    for decision_type, state, figures in due:
        rec = records.triage_state(SYSTEM_ACTOR, decision_type=decision_type, state=state, figures=figures)
        out = bank.node.submit_one(rec)
        if out.status == "refused":       # our own figures: a refusal would be a fault, never an outcome to hide
            raise Refused(f"triage.state {decision_type} -> {state} refused: {out.reason}",
                          code=out.code or "refused")
        if out.status == "applied":
            written.append({"op_id": rec.op_id, "decision_type": decision_type, "state": state,
                            "figures": figures})
    return written
