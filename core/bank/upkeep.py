"""Conventions from review (spec 003, "Upkeep"; issue 37): what the reviewers keep saying becomes a proposed
convention, and one that proves harmful is archived.

    report = upkeep(node)             # both checks, and the gaps' issues when `gaps` is True

**Proposed.** A review finding (`crewlet run finish … --finding MODULE:TEXT`, kept in `run_findings`) given in
KNOWLEDGE_CONVENTION_MIN_RUNS separate finished runs in one module becomes a PROPOSED CONVENTION entry scoped to
that module, written by crewlet (author `crewlet`, by system) under a page linked to the module (`crewlet page link
PAGE --module M`; the earliest linked). "The same finding" is its fold (upkeep_handlers.fold_text: whitespace and
case folded, trailing punctuation dropped) in the same module as stored (`server:apps/server`): a reworded finding
is another, a finding in another module counts there. It waits in the review queue like any proposed entry: a
person decides. A module no page is linked to gets nothing (the report names it). Each finding is proposed once:
any entry crewlet wrote with the same fold and scope, in whatever status, stops a second proposal.

**Archived.** A convention proposed this way and accepted (in use) whose harmful outcomes (`entry_outcomes`)
exceed its helpful ones by KNOWLEDGE_CONVENTION_HARM_MARGIN or more — counted since a person last accepted it — is
archived by crewlet (the reason carries the figures), and its module's owners are told: it is listed in the
review queue with reason HARMFUL_SIGNAL (core/bank/review.py `harmful`), and an issue is filed with the space of
its page as a gap's is (core/bank/gaps.py `IssueFiler`). A person puts it back by accepting it; its count then
starts again from that accept.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import CrewletError
from ..pages import records
from ..pages.entry_model import ACCEPT, ARCHIVE, CONVENTION, IN_USE, SYSTEM, SYSTEM_ACTOR
from ..pages.upkeep_handlers import CONVENTION as CONVENTION_ISSUE
from ..pages.upkeep_handlers import fold_text
from ..text.claims import check_entry_body
from .gaps import Filing, Gaps, IssueFiler

if TYPE_CHECKING:
    from ..node import Node
    from ..sections.bank import BankSettings

_PAGE_OF_MODULE = ("SELECT a.page_id FROM page_about a JOIN pages p ON p.id = a.page_id WHERE a.item_kind = 'module' "
                   "AND a.item = ? AND p.trashed_at IS NULL AND a.linked AND a.seq IN (SELECT MAX(seq) FROM "
                   "page_about WHERE item = ? GROUP BY page_id, item_kind, item) ORDER BY a.seq LIMIT 1")


@dataclass
class UpkeepReport:
    proposed: list[dict[str, Any]] = field(default_factory=list)      # {entry_id, module, body, runs}
    unplaced: list[dict[str, Any]] = field(default_factory=list)      # due, in a module no page is linked to
    archived: list[dict[str, Any]] = field(default_factory=list)      # {entry_id, helpful, harmful, issue}
    refused: list[str] = field(default_factory=list)                  # one line each
    gaps: Filing | None = None                                        # None: the gaps' job did not run

    def to_json(self) -> dict[str, Any]:
        return {"proposed": self.proposed, "unplaced": self.unplaced, "archived": self.archived,
                "refused": self.refused, "gaps": self.gaps.to_json() if self.gaps is not None else None}

    def summary(self) -> str:
        parts = [f"{len(self.proposed)} convention(s) proposed", f"{len(self.archived)} archived"]
        if self.unplaced:
            parts.append(f"{len(self.unplaced)} due in a module no page is linked to")
        if self.gaps is not None:
            parts.append(f"{len(self.gaps.filed)} gap issue(s) filed")
        return ", ".join(parts)


def due_findings(conn: Any, min_runs: int) -> list[dict[str, Any]]:
    """Each (module, finding fold) given in `min_runs` separate finished runs or more, with its first wording."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for r in conn.execute("SELECT f.module, f.text, f.run_id FROM run_findings f JOIN runs r ON r.id = f.run_id "
                          "WHERE r.finish_op IS NOT NULL ORDER BY r.finished_at, f.op_id, f.idx"):
        key = (r["module"], fold_text(r["text"]))
        g = groups.setdefault(key, {"module": r["module"], "text": " ".join(r["text"].split()), "runs": set()})
        g["runs"].add(r["run_id"])
    return [{**g, "runs": sorted(g["runs"])} for g in groups.values() if len(g["runs"]) >= min_runs]


def outcome_figures(conn: Any, entry_id: str) -> tuple[int, int]:
    """(helpful, harmful) outcomes counted for the entry since a person last accepted it."""
    since = conn.execute("SELECT max(at) FROM entry_history WHERE entry_id = ? AND action = ? AND actor_kind = 'person'",
                         (entry_id, ACCEPT)).fetchone()[0] or 0
    counts = dict(conn.execute("SELECT effect, count(*) FROM entry_outcomes WHERE entry_id = ? AND at >= ? "
                               "GROUP BY effect", (entry_id, since)).fetchall())
    return int(counts.get("helpful", 0)), int(counts.get("harmful", 0))


def propose_conventions(node: Node, settings: BankSettings, report: UpkeepReport) -> None:
    with node.lock:
        due = due_findings(node.conn, settings.convention_min_runs)
        written = {(r["scope"], fold_text(r["body"])) for r in node.conn.execute(
            "SELECT scope, body FROM entries WHERE author = ? AND kind = ?", (SYSTEM_ACTOR, CONVENTION))}
    for f in due:
        if (f["module"], fold_text(f["text"])) in written:
            continue
        with node.lock:
            page = node.conn.execute(_PAGE_OF_MODULE, (f["module"], f["module"])).fetchone()
        if page is None:
            report.unplaced.append({"module": f["module"], "body": f["text"], "runs": f["runs"]})
            continue
        refusal = check_entry_body(f["text"], CONVENTION)
        if refusal is not None:
            report.refused.append(f"finding '{f['text'][:80]}' in {f['module']}: {refusal.message}")
            continue
        entry_id = records.new_id()
        out = node.submit_one(records.entry_add(SYSTEM_ACTOR, entry_id=entry_id, page_id=page["page_id"],
                                                kind=CONVENTION, body=f["text"], by=SYSTEM, scope=f["module"]))
        if out.status == "refused":
            report.refused.append(f"finding '{f['text'][:80]}' in {f['module']}: {out.reason}")
            continue
        report.proposed.append({"entry_id": out.result.get("entry_id", entry_id), "module": f["module"],
                                "body": f["text"], "runs": f["runs"], "folded": bool(out.result.get("folded"))})


def archive_harmful(node: Node, settings: BankSettings, report: UpkeepReport, filer: IssueFiler) -> None:
    margin = settings.convention_harm_margin
    marks = ",".join("?" * len(IN_USE))
    with node.lock:
        rows = node.conn.execute(
            f"SELECT e.id, e.body, e.scope, p.container FROM entries e JOIN pages p ON p.id = e.page_id "
            f"WHERE e.author = ? AND e.author_kind = ? AND e.kind = ? AND e.status IN ({marks}) ORDER BY e.id",
            (SYSTEM_ACTOR, SYSTEM, CONVENTION, *IN_USE)).fetchall()
        figures = {r["id"]: outcome_figures(node.conn, r["id"]) for r in rows}
    for r in rows:
        helpful, harmful = figures[r["id"]]
        if harmful <= helpful or harmful - helpful < margin:
            continue
        reason = (f"harmful outcomes {harmful} exceed helpful {helpful} by {harmful - helpful} "
                  f"(KNOWLEDGE_CONVENTION_HARM_MARGIN = {margin}): archived by upkeep; a person can put it back")
        out = node.submit_one(records.entry_status(SYSTEM_ACTOR, entry_id=r["id"], action=ARCHIVE, by=SYSTEM,
                                                   reason=reason))
        if out.status == "refused":
            report.refused.append(f"convention {r['id']}: {out.reason}")
            continue
        done: dict[str, Any] = {"entry_id": r["id"], "module": r["scope"], "helpful": helpful, "harmful": harmful,
                                "issue": None}
        body = (f"Upkeep archived the convention \"{' '.join(r['body'].split())}\" (entry {r['id']}, module "
                f"{r['scope']}): {reason}. Accept it in the review queue to put it back.")
        try:
            done["issue"] = filer.file(f"{CONVENTION_ISSUE}:{r['id']}:{out.op_id}", CONVENTION_ISSUE, r["container"],
                                       f"Convention archived: {' '.join(r['body'].split())[:150]}", body)
        except CrewletError as exc:
            report.refused.append(f"convention {r['id']} archived, its issue not filed: {exc}")
        report.archived.append(done)


def upkeep(node: Node, *, gaps: bool = True, env: Any = None) -> UpkeepReport:
    """Both checks now; and, with `gaps`, the issues of the questions asked KNOWLEDGE_GAP_ISSUE_MIN_COUNT times."""
    node.refresh_config()
    settings = node.company.bank
    report = UpkeepReport()
    filer = IssueFiler(node, env=env)
    try:
        propose_conventions(node, settings, report)
        archive_harmful(node, settings, report, filer)
    finally:
        filer.close()
    if gaps:
        report.gaps = Gaps(node, env=env).file_due(settings)
    return report


@dataclass(frozen=True)
class HarmfulEntry:
    """An entry whose runs' harmful outcomes outnumber their helpful ones (since a person last accepted it): in
    use — a person is asked whether to archive it — or a convention upkeep archived, until a person acts on it."""

    entry_id: str
    status: str
    helpful: int
    harmful: int
    archived_by_upkeep: bool

    def to_json(self) -> dict[str, Any]:
        return {"entry_id": self.entry_id, "status": self.status, "helpful": self.helpful, "harmful": self.harmful,
                "archived_by_upkeep": self.archived_by_upkeep, "reasons": ["HARMFUL_SIGNAL"]}


def harmful_entries(conn: Any) -> list[HarmfulEntry]:
    """HARMFUL_SIGNAL: triage decides only proposed entries, which no run is given, so the signal shows here, in
    the review queue (core/bank/review.py), for the entries in use and the conventions upkeep archived."""
    marks = ",".join("?" * len(IN_USE))
    rows = conn.execute(
        f"SELECT id, status, author, kind, status_by FROM entries WHERE id IN (SELECT DISTINCT entry_id FROM "
        f"entry_outcomes WHERE effect = 'harmful') AND (status IN ({marks}) OR (status = 'ARCHIVED' AND "
        f"status_by = ? AND author = ? AND kind = ?)) ORDER BY id", (*IN_USE, SYSTEM_ACTOR, SYSTEM_ACTOR, CONVENTION))
    out = []
    for r in rows.fetchall():
        helpful, harmful = outcome_figures(conn, r["id"])
        if harmful > helpful:
            out.append(HarmfulEntry(r["id"], r["status"], helpful, harmful, r["status"] not in IN_USE))
    return out
