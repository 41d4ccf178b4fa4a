"""Decay (spec 003, "Decay"): knowledge nobody uses is not load-bearing, so a pass on PAGE_DECAY_CRON archives

- a PROPOSED entry that waited longer than PAGE_PROPOSED_ENTRY_EXPIRY_DAYS (since it was written), and
- a STANDING entry not served in PAGE_STANDING_ENTRY_DECAY_DAYS (since its last serve, or since it came into use
  when it was never served),

except an entry

- one of whose citations was checked and held within that window (its last check held, and is that recent),
- that a page links to (`#/knowledge/entries/<id>` in a page's body outside code, as core/pages/links.py reads
  page links; a trashed page links nothing): the page is read in its place,
- that a person verified: never archived; a person is asked instead (`EntryBank.needs_person` lists it).

CONSOLIDATED entries never decay (their page's body says them). Each archive is an `entry.status` record by
crewlet (SYSTEM_ACTOR) with the reason in words. Ages are on the bank's calendar (`core.clock.calendar_now_ms`,
which CREWLET_NOW sets for drills and tests); the records' stamps are the writers' clocks.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..clock import from_ms, older_than_days
from ..pages import records
from ..pages.entry_model import ARCHIVE, HOLDING, PROPOSED, STANDING, SYSTEM, SYSTEM_ACTOR
from ..pages.links import strip_code
from ..sections.bank import BankSettings

if TYPE_CHECKING:
    from ..log import Record
    from ..node import Node

DAY_MS = 86_400_000
BATCH = 1_000
ENTRY_LINK = re.compile(r"#/knowledge/entries/(?P<id>[A-Za-z0-9_-]{4,64})")
_LINK_MARK = "#/knowledge/entries/"

ARCHIVED, KEPT_HELD, KEPT_LINKED, ASK_PERSON = "archived", "kept_held", "kept_linked", "ask_person"
OUTCOMES = (ARCHIVED, KEPT_HELD, KEPT_LINKED, ASK_PERSON)


@dataclass(frozen=True)
class Decision:
    """What decay decided about one entry past its window, and why (one line)."""

    entry_id: str
    status: str
    outcome: str                   # ARCHIVED, KEPT_HELD, KEPT_LINKED, ASK_PERSON
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"entry_id": self.entry_id, "status": self.status, "outcome": self.outcome, "reason": self.reason}


@dataclass
class DecayReport:
    decisions: list[Decision] = field(default_factory=list)
    refused: int = 0               # archives the applier refused (the entry changed since it was read)

    def of(self, outcome: str) -> list[Decision]:
        return [d for d in self.decisions if d.outcome == outcome]

    def summary(self) -> str:
        words = {ARCHIVED: "archived", KEPT_HELD: "kept (a citation held within the window)",
                 KEPT_LINKED: "kept (a page links to it)", ASK_PERSON: "left for a person (verified)"}
        out = ", ".join(f"{len(self.of(o)):,} {words[o]}" for o in OUTCOMES if self.of(o))
        out += f", {self.refused:,} refused" if self.refused else ""
        return out or "nothing past its window"

    def to_json(self) -> dict[str, Any]:
        return {"counts": {o: len(self.of(o)) for o in OUTCOMES}, "refused": self.refused,
                "decisions": [d.to_json() for d in self.decisions]}


def linked_entries(conn: Any) -> set[str]:
    """Every entry id a live page's body links to (`#/knowledge/entries/<id>`), outside code."""
    out: set[str] = set()
    for (body,) in conn.execute("SELECT body FROM pages WHERE trashed_at IS NULL AND instr(body, ?) > 0",
                                (_LINK_MARK,)):
        out.update(m.group("id") for m in ENTRY_LINK.finditer(strip_code(body)))
    return out


def _held_at(conn: Any, ids: list[str]) -> dict[str, int]:
    """For each entry, when the most recent of its citations whose last check held was checked."""
    last: dict[tuple[str, int], tuple[str, int]] = {}
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        marks = ",".join("?" * len(chunk))
        for entry_id, idx, result, at in conn.execute(
                f"SELECT entry_id, idx, result, checked_at FROM citation_checks WHERE entry_id IN ({marks}) "
                "ORDER BY entry_id, idx, seq", chunk):
            last[(entry_id, idx)] = (result, at)
    out: dict[str, int] = {}
    for (entry_id, _idx), (result, at) in last.items():
        if result in HOLDING:
            out[entry_id] = max(out.get(entry_id, 0), at)
    return out


def _days(ms: int) -> int:
    return max(0, ms) // DAY_MS


def decide(conn: Any, settings: BankSettings, now_ms: int) -> list[Decision]:
    """What decay would do now, to every entry past its window (the caller holds the node's lock)."""
    now = from_ms(now_ms)
    expiry, decay_days = settings.page_proposed_entry_expiry_days, settings.page_standing_entry_decay_days
    past: list[tuple[Any, int, int, str]] = []      # (row, since, window days, what the window is)
    for row in conn.execute("SELECT id, status, created_at, status_at, verified_by FROM entries "
                            "WHERE status = ? AND created_at < ?", (PROPOSED, now_ms - expiry * DAY_MS)):
        if older_than_days(row["created_at"], expiry, now):
            past.append((row, row["created_at"], expiry, f"proposed {_days(now_ms - row['created_at'])} days ago and "
                         f"not accepted within PAGE_PROPOSED_ENTRY_EXPIRY_DAYS ({expiry})"))
    served = dict(conn.execute("SELECT s.entry_id, max(s.at) FROM entry_serves s JOIN entries e ON e.id = s.entry_id "
                               "WHERE e.status = ? GROUP BY s.entry_id", (STANDING,)).fetchall())
    for row in conn.execute("SELECT id, status, created_at, status_at, verified_by FROM entries WHERE status = ?",
                            (STANDING,)):
        in_use = max(row["status_at"] or 0, row["created_at"])
        last = served.get(row["id"])
        since = max(in_use, last or 0)
        if older_than_days(since, decay_days, now):
            what = (f"last served {_days(now_ms - last)} days ago" if last else
                    f"never served in {_days(now_ms - in_use)} days in use")
            past.append((row, since, decay_days, f"{what}: not served within PAGE_STANDING_ENTRY_DECAY_DAYS "
                         f"({decay_days})"))
    if not past:
        return []
    held = _held_at(conn, [row["id"] for row, *_ in past])
    linked = linked_entries(conn)
    out = []
    for row, _since, window, what in past:
        entry_id = row["id"]
        if row["verified_by"]:
            out.append(Decision(entry_id, row["status"], ASK_PERSON,
                                f"decay: {what}; verified by {row['verified_by']}, so a person decides whether to "
                                "archive it"))
        elif entry_id in held and not older_than_days(held[entry_id], window, now):
            out.append(Decision(entry_id, row["status"], KEPT_HELD,
                                f"{what}, but a citation was checked and held {_days(now_ms - held[entry_id])} days "
                                "ago"))
        elif entry_id in linked:
            out.append(Decision(entry_id, row["status"], KEPT_LINKED, f"{what}, but a page links to it"))
        else:
            out.append(Decision(entry_id, row["status"], ARCHIVED, f"decay: {what}"))
    return out


def archive_record(d: Decision) -> Record:
    """Decay's archive of one entry, as of the status it decided on: on a shared log a person's accept or serve
    can be appended between decay's look and its write, and then the entry is no longer what decay judged."""
    return records.entry_status(SYSTEM_ACTOR, entry_id=d.entry_id, action=ARCHIVE, by=SYSTEM, reason=d.reason,
                                expect=d.status)


def decay(node: Node, settings: BankSettings, now_ms: int,
          progress: Callable[[int, int, str], None] | None = None) -> DecayReport:
    """One decay pass as of `now_ms` on the calendar: each entry past its window archived by crewlet with the
    reason, or kept (and said why), or left for a person."""
    # decided and archived under the node's lock, on the log as it stands: a person's accept or serve written
    # meanwhile (by this process, or appended by another before the look) is read before anything is archived
    with node.lock:
        node.catch_up()
        decisions = decide(node.conn, settings, now_ms)
        report = DecayReport(decisions)
        archive = [d for d in decisions if d.outcome == ARCHIVED]
        for i in range(0, len(archive), BATCH):
            chunk = archive[i:i + BATCH]
            decided = node.submit([archive_record(d) for d in chunk])
            report.refused += sum(1 for d in decided if d.status == "refused")
            if progress is not None:
                progress(i + len(chunk), len(archive), "archiving what nobody uses")
    return report


def asked_of_a_person(conn: Any, settings: BankSettings, now_ms: int) -> dict[str, str]:
    """The verified entries decay would have archived: entry id -> why a person is asked (for needs_person)."""
    return {d.entry_id: d.reason for d in decide(conn, settings, now_ms) if d.outcome == ASK_PERSON}
