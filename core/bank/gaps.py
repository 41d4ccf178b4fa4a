"""Knowledge gaps (spec 003, "Upkeep"; issue 37): the questions the bank could not answer, and their issues.

    note_gap(node, "how do we rotate the signing key?", actor="eng-bot", via="recall_knowledge")
    Gaps(node).list()                 # each question: how often asked, its issue, whether it is answered
    Gaps(node).file_due(settings)     # a question asked KNOWLEDGE_GAP_ISSUE_MIN_COUNT times gets its issue

A question is a gap when `crewlet ask` or `recall_knowledge` found nothing above the relevance floor (the search
gave no hit: answer status `no_match`); each such ask is a `knowledge.gap` record. The same question is its fold
(upkeep_handlers.fold_text: whitespace and case folded, trailing punctuation dropped).

Where its issue goes: the module the question names — the folder of a module some page is linked to
(`crewlet page link PAGE --module M`), or that folder's last name, as whole words of the question, the longest
first — is owned by the space of the earliest page linked to it. With `[integrations.plane]` configured the
issue "Knowledge gap: <question>" is created in that space's Plane project (the project whose identifier is the
space's key; `[integrations.plane]` with `enabled = false` — Plane not the knowledge home — still takes the issues); otherwise it is a page of that title under the space's GAPS page (made by crewlet when missing). A
question naming no linked module has no team to file with: `crewlet gaps` says so and nothing is filed.

A gap is answered once an accepted entry (in use) cites its issue: a link citation whose link is the issue's URL
or reference (Plane), or the GAPS page's id or address.
"""
from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..config import Company
from ..errors import CrewletError, Refused
from ..pages import records
from ..pages.entry_model import IN_USE, SYSTEM_ACTOR, citations_of
from ..pages.service import check_title
from ..pages.upkeep_handlers import GAP

if TYPE_CHECKING:
    from ..node import Node
    from ..sections.bank import BankSettings

GAPS_FOLDER = "GAPS"                 # the page each space's gap pages stand under, without Plane
TITLE_PREFIX = "Knowledge gap: "
_LINKED_MODULES = ("SELECT a.item, p.container FROM page_about a JOIN pages p ON p.id = a.page_id "
                   "WHERE a.item_kind = 'module' AND p.trashed_at IS NULL AND a.seq IN (SELECT MAX(seq) FROM "
                   "page_about GROUP BY page_id, item_kind, item) AND a.linked ORDER BY a.seq")


def note_gap(node: Node, question: str, *, actor: str, via: str) -> bool:
    """Record that `question` found nothing above the floor. Never fails the answer it rides on: a log that
    refuses the record (a remote site, a question too long) leaves the gap unrecorded. True when recorded."""
    try:
        out = node.submit_one(records.gap_ask(actor, question=question, via=via))
    except CrewletError:
        return False
    return out.status != "refused"


def subject_of(key: str) -> str:
    return f"{GAP}:{key}"


def linked_modules(conn: Any) -> dict[str, str]:
    """Each module some page is linked to now -> the space owning it (the earliest linked page's space)."""
    owners: dict[str, str] = {}
    for module, space in conn.execute(_LINKED_MODULES):
        owners.setdefault(module, space)
    return owners


def _words(text: str) -> str:
    return " " + " ".join(re.findall(r"[\w/.\-]+", text.casefold())) + " "


def named_module(question: str, owners: Mapping[str, str]) -> str | None:
    """The linked module the question names (its folder, or the folder's last name, as whole words), the longest
    name first; None when it names none."""
    said = _words(question)
    names: list[tuple[str, str]] = []
    for module in owners:
        folder = module.partition(":")[2] or module
        names += [(folder, module), (folder.rsplit("/", 1)[-1], module)]
    for name, module in sorted(names, key=lambda n: (-len(n[0]), n[1])):
        if name and f" {name.casefold()} " in said:
            return module
    return None


@dataclass
class Gap:
    key: str
    question: str                     # its first wording
    count: int
    first_at: int
    last_at: int
    module: str | None = None         # the linked module it names
    space: str | None = None          # the space owning that module
    issue: dict[str, Any] | None = None     # {ref, url, page, space, at} once filed
    answered_by: list[str] = field(default_factory=list)   # entries in use citing its issue

    @property
    def answered(self) -> bool:
        return bool(self.answered_by)

    def to_json(self) -> dict[str, Any]:
        return {"question": self.question, "key": self.key, "count": self.count, "first_at": self.first_at,
                "last_at": self.last_at, "module": self.module, "space": self.space, "issue": self.issue,
                "answered": self.answered, "answered_by": list(self.answered_by)}


@dataclass
class Filing:
    """What one filing pass did."""

    filed: list[dict[str, Any]] = field(default_factory=list)       # {question, ref, where}
    unowned: list[str] = field(default_factory=list)                # due, naming no linked module
    failed: list[str] = field(default_factory=list)                 # one line each: tried again next pass

    def to_json(self) -> dict[str, Any]:
        return {"filed": self.filed, "unowned": self.unowned, "failed": self.failed}


def cited_links(conn: Any) -> dict[str, list[str]]:
    """Each link an entry in use cites -> those entries' ids."""
    out: dict[str, list[str]] = {}
    marks = ",".join("?" * len(IN_USE))
    for row in conn.execute(f"SELECT id, citations FROM entries WHERE status IN ({marks}) ORDER BY id", IN_USE):
        for c in citations_of(row):
            if isinstance(c, dict) and isinstance(c.get("link"), str):
                out.setdefault(c["link"].strip(), []).append(row["id"])
    return out


def issue_links(issue: Mapping[str, Any]) -> list[str]:
    """What a citation of an issue may name: its URL and reference; a GAPS page's id and address."""
    return [str(issue[k]) for k in ("url", "ref", "page") if issue.get(k)]


def issues_filed(conn: Any) -> dict[str, dict[str, Any]]:
    return {r["subject"]: {"ref": r["ref"], "url": r["url"], "page": r["page"], "space": r["space"],
                           "title": r["title"], "at": r["at"]}
            for r in conn.execute("SELECT * FROM upkeep_issues ORDER BY at")}


class Gaps:
    def __init__(self, node: Node, *, env: Mapping[str, str] | None = None) -> None:
        self.node = node
        self.env = env

    @property
    def conn(self) -> Any:
        return self.node.conn

    def list(self) -> list[Gap]:
        """Every question the bank could not answer, the most asked first."""
        with self.node.lock:
            rows = self.conn.execute(
                "SELECT gap_key, count(*) AS n, min(at) AS first, max(at) AS last, "
                "(SELECT question FROM gap_asks q WHERE q.gap_key = g.gap_key ORDER BY at, op_id LIMIT 1) AS question "
                "FROM gap_asks g GROUP BY gap_key ORDER BY n DESC, first, gap_key").fetchall()
            owners = linked_modules(self.conn)
            filed = issues_filed(self.conn)
            cited = cited_links(self.conn)
        out = []
        for r in rows:
            module = named_module(r["question"], owners)
            issue = filed.get(subject_of(r["gap_key"]))
            answered = sorted({e for link in issue_links(issue) for e in cited.get(link, [])}) if issue else []
            out.append(Gap(r["gap_key"], r["question"], r["n"], r["first"], r["last"], module,
                           owners.get(module) if module else None, issue, answered))
        return out

    def file_due(self, settings: BankSettings) -> Filing:
        """File an issue for every question asked KNOWLEDGE_GAP_ISSUE_MIN_COUNT times that has none yet."""
        report = Filing()
        filer = IssueFiler(self.node, env=self.env)
        try:
            for gap in self.list():
                if gap.count < settings.gap_issue_min_count or gap.issue is not None:
                    continue
                if gap.space is None:
                    report.unowned.append(gap.question)
                    continue
                title = TITLE_PREFIX + gap.question
                body = (f"Asked {gap.count} times and the knowledge bank had nothing above the relevance floor: "
                        f"\"{gap.question}\" (module {gap.module}). Answer it with an entry that cites this issue.")
                try:
                    filed = filer.file(subject_of(gap.key), GAP, gap.space, title, body)
                except CrewletError as exc:
                    report.failed.append(f"{gap.question}: {exc}")
                    continue
                report.filed.append({"question": gap.question, **filed})
        finally:
            filer.close()
        return report


class IssueFiler:
    """Files an upkeep issue with a space's team: a Plane issue in the project whose identifier is the space's key
    when [integrations.plane] is configured, else a page under the space's GAPS page. Records it (`upkeep.issue`)."""

    def __init__(self, node: Node, *, env: Mapping[str, str] | None = None) -> None:
        self.node = node
        self.env = env
        self._http: Any = None

    def close(self) -> None:
        if self._http is not None:
            self._http.close()

    @property
    def company(self) -> Company:
        return self.node.company

    def file(self, subject: str, kind: str, space: str, title: str, body: str) -> dict[str, Any]:
        """Returns {ref, url?, page?, where}; a site that refuses or cannot be reached raises (nothing recorded)."""
        title = check_title(title if len(title) <= 200 else title[:199] + "…")
        plane = self.company.integrations.plane
        # declared, enabled or not: enabled = false only keeps Plane from being the knowledge home
        filed = self._plane(space, title, body) if plane is not None else self._page(space, title, body)
        out = self.node.submit_one(records.upkeep_issue(SYSTEM_ACTOR, subject=subject, kind=kind, space=space,
                                                        title=title, **{k: v for k, v in filed.items()
                                                                         if k in ("ref", "url", "page")}))
        if out.status == "refused":
            raise Refused(out.reason or "refused", code=out.code or "refused")
        return filed

    def _plane(self, space: str, title: str, body: str) -> dict[str, Any]:
        from ..remote.credentials import plane_credential
        from ..remote.http import RemoteHTTP, segment
        from ..remote.plane import PlaneAPI, Projects

        settings = self.company.integrations.plane
        assert settings is not None
        choice = plane_credential(self.company, None, self.env)
        if choice.credential is None:
            raise Refused(f"no issue filed in Plane: {choice.missing}", code="no_credential")
        if self._http is None:
            self._http = RemoteHTTP("Plane", settings.url, connect_s=settings.connect_timeout_s,
                                    read_s=settings.read_timeout_s)
        api = PlaneAPI(settings, self._http)
        projects = Projects(api.projects(choice.credential))
        project_id = projects.by_identifier.get(space)
        if project_id is None:
            raise Refused(f"no Plane project {space} visible to {choice.credential.describe()}: create it, or give "
                          "the credential access", code="no_project")
        made = self._http.request("POST", f"{api.ws}/projects/{segment(project_id)}/issues/", choice.credential.auth,
                                  body={"name": title, "description_html": f"<p>{html.escape(body)}</p>"})
        issue_id = str(made.get("id") or "")
        if not issue_id:
            raise Refused(f"Plane answered the new issue without an id: {json.dumps(made)[:120]}", code="garbage")
        seq = made.get("sequence_id")
        ref = f"{space}-{seq}" if seq is not None else issue_id
        url = f"{settings.url.rstrip('/')}/{settings.workspace}/projects/{project_id}/issues/{issue_id}/"
        return {"ref": ref, "url": url, "where": "plane"}

    def _page(self, space: str, title: str, body: str) -> dict[str, Any]:
        folder = self._gaps_folder(space)
        page_id = records.new_id()
        out = self.node.submit_one(records.page_create(SYSTEM_ACTOR, page_id=page_id, container=space, title=title,
                                                       body=body, parent_id=folder,
                                                       message="a knowledge gap's issue (crewlet upkeep)"))
        if out.status == "refused":
            raise Refused(out.reason or "refused", code=out.code or "refused")
        return {"ref": f"{space}/{title}", "page": page_id, "where": "page"}

    def _gaps_folder(self, space: str) -> str:
        with self.node.lock:
            row = self.node.conn.execute("SELECT id FROM pages WHERE container = ? AND title = ? AND trashed_at IS "
                                         "NULL ORDER BY created_at LIMIT 1", (space, GAPS_FOLDER)).fetchone()
        if row is not None:
            return str(row["id"])
        page_id = records.new_id()
        out = self.node.submit_one(records.page_create(
            SYSTEM_ACTOR, page_id=page_id, container=space, title=GAPS_FOLDER, parent_id=None,
            body="Questions the knowledge bank could not answer, and issues upkeep filed (crewlet gaps).",
            message="the space's GAPS folder (crewlet upkeep)"))
        if out.status == "refused":
            raise Refused(out.reason or "refused", code=out.code or "refused")
        return page_id
