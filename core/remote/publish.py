"""`crewlet confluence import DIR` and `crewlet plane import DIR`: a directory of Markdown published to the
company's remote knowledge base, planned by the same code as the native import (core/importer/docs.py).

The conventions are the native import's: a doc's container is its parent directory's name (frontmatter
`space:` overrides it), its title is frontmatter `title:` or else its first `# ` H1 (stripped from the
body), `parent:` nests a new page under a page of the same container (one this run publishes, or one
that exists), and a file with `trigger:` is a tool skill, published to the skills container
(knowledge.skills_container on Confluence, integrations.plane.skills_project on Plane).

Everything is planned before anything is written, and every problem is listed at once: no title, two
files publishing as one page, a `parent:` cycle, a space or project that does not exist (named, with how
to create it; Confluence's --create-space creates spaces instead), no credential, a site that cannot be
reached. A dry run plans and writes nothing.

Matching: Confluence pages by (space, title); Plane pages by `external_source = "crewlet"` and
`external_id = "doc:<title>"` ("skill:<title>" for a tool skill), so a page renamed in Plane is still
found. A page that exists is left as it is unless --update: then its body (and on Plane its name) is
written when it differs, and on Confluence the labels it lacks are attached — so a second run with
--update over unchanged files writes nothing. An existing page is never moved. Confluence pages carry the
file's `labels:` and the `crewlet-doc` marker (`crewlet-skill` for a tool skill); Plane pages carry no
free-form labels, so `labels:` there is a note.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import KEY_RE, REMOTE_LABELS, Company
from ..errors import CrewletError, Invalid
from ..importer.docs import DocPlanner, _Node
from ..importer.model import ImportFailure, ImportNote, ImportProblem, ImportProblems, ImportReport, PlannedPage
from .confluence import ConfluenceAPI
from .convert import html_to_markdown, markdown_to_html, markdown_to_storage
from .credentials import Credential, credential_for
from .http import RemoteFailure, RemoteHTTP
from .plane import PlaneAPI, Projects

Progress = Callable[[int, int], None]
DOC_MARKER = "crewlet-doc"
SKILL_MARKER = "crewlet-skill"
# a failure that will fail every later write the same way: the run stops there
_SITE_FAILURES = ("unauthorized", "unreachable", "timeout")


def _says_the_same(stored: str, sent: str) -> bool:
    """Whether the page the site holds says what the file says, compared as Markdown: a site keeps what it
    is sent in its own spelling (Confluence gives a saved macro ac:schema-version and ac:macro-id and
    re-lays tables; Plane's editor classes every block), so markup compared as markup would call every
    such page changed and --update would write it again on every run. Both sides are read by the one
    reader a page opens with (html_to_markdown), what was sent as well as what is stored."""
    return html_to_markdown(stored or "") == html_to_markdown(sent or "")


@dataclass
class RemoteImportReport(ImportReport):
    backend: str = ""
    url: str = ""
    credential: dict[str, Any] = field(default_factory=dict)
    update: bool = False
    spaces_to_create: list[str] = field(default_factory=list)
    spaces_created: list[str] = field(default_factory=list)
    left: int = 0                  # existing pages that differ from their files, left as they are (no --update)
    stopped: str = ""              # why writing stopped early, if it did

    def to_json(self) -> dict[str, Any]:
        return super().to_json() | {
            "backend": self.backend, "url": self.url, "credential": self.credential, "update": self.update,
            "spaces_to_create": list(self.spaces_to_create), "spaces_created": list(self.spaces_created),
            "left_differing": self.left, "stopped": self.stopped or None}


class _Planner(DocPlanner):
    TREE_LAYOUT = False            # a remote import has no --into


class Publisher:
    """What both importers share: plan (files, then the site), stop on problems, write in order."""

    BACKEND = ""
    LABEL = ""
    CONTAINER = ""                 # "space" | "project": what a container is called there

    def __init__(self, company: Company, root: Path, actor: str | None = None, *, update: bool = False,
                 dry_run: bool = False, env: Mapping[str, str] | None = None, progress: Progress | None = None) -> None:
        self.company = company
        self.root = Path(root)
        self.handle = actor or company.operator
        self.update = update
        self.dry_run = dry_run
        self.env = env
        self.progress = progress
        self.credential: Credential | None = None
        self.http: RemoteHTTP | None = None
        self.absent: set[str] = set()          # containers the site does not have (a problem each)
        self.ordered: list[_Node] = []

    # -- what a backend implements ------------------------------------------------------------------
    def settings(self) -> Any:
        raise NotImplementedError

    def skills_container(self) -> str:
        raise NotImplementedError

    def check_containers(self, planner: _Planner, nodes: list[_Node]) -> None:
        raise NotImplementedError

    def existing(self, n: _Node) -> dict[str, Any] | None:
        raise NotImplementedError

    def existing_parent(self, n: _Node, address: str) -> tuple[str | None, str]:
        raise NotImplementedError

    def changes(self, n: _Node, row: dict[str, Any]) -> list[str]:
        raise NotImplementedError

    def write(self, page: PlannedPage, node: _Node) -> None:
        raise NotImplementedError

    # -- one run ---------------------------------------------------------------------------------------
    def run(self) -> RemoteImportReport:
        started = time.perf_counter()
        if not self.root.is_dir():
            raise Invalid(f"{self.root} is not a directory — give the directory of Markdown files to publish",
                          code="not_a_directory")
        settings = self.settings()
        if settings is None:
            raise CrewletError(f"there is no [integrations.{self.BACKEND}] in {self.company.file} — add it (see the "
                               f"README's \"Other backends\") before publishing to {self.LABEL}", code="unconfigured")
        who = self.company.actor(self.handle) if self.handle else None
        if who is not None and not who.holds_knowledge:
            raise CrewletError(f"{self.handle} does not hold the knowledge app", code="forbidden")
        planner = _Planner(self.company, self.root, who, skills=self.skills_container(), mode="spaces")  # type: ignore[arg-type]
        report = RemoteImportReport(root=str(self.root), mode="spaces", backend=self.BACKEND, url=settings.url,
                                    update=self.update, dry_run=self.dry_run)
        planner.report = report
        planner.problems, planner.notes = report.problems, report.notes
        self.report = report
        nodes = planner.docs()
        planner.check_duplicates(nodes)
        choice = credential_for(self.BACKEND, self.company, who, self.env)
        if choice.credential is None:
            report.problems.append(ImportProblem("no_credential", f"{self.LABEL} cannot be written: no credential — "
                                                 f"{choice.missing}", "set the variable, then run again"))
        else:
            self.credential = choice.credential
            report.credential = choice.credential.to_json()
            report.notes.extend(ImportNote("credential", n) for n in choice.notes)
            self.http = RemoteHTTP(self.LABEL, settings.url, connect_s=settings.connect_timeout_s,
                                   read_s=settings.read_timeout_s)
            try:
                self._plan_against_site(planner, nodes)
            except RemoteFailure as failure:
                report.problems.append(ImportProblem(
                    failure.kind, f"planning stopped: {failure.words}",
                    f"check [integrations.{self.BACKEND}] (url, the credential) and that the site answers; "
                    "nothing was written"))
        report.timings["plan"] = time.perf_counter() - started
        try:
            if report.problems:
                report.seconds = time.perf_counter() - started
                raise ImportProblems(report)
            if self.dry_run:
                report.created, report.updated = report.count("create"), report.count("update")
                report.unchanged = report.count("unchanged")
            else:
                self._write_all()
            report.seconds = time.perf_counter() - started
            return report
        finally:
            if self.http is not None:
                self.http.close()

    def _plan_against_site(self, planner: _Planner, nodes: list[_Node]) -> None:
        report = self.report
        self.check_containers(planner, nodes)
        missing = set(report.spaces_to_create) | self.absent
        for n in nodes:
            n.row = None if n.container in missing else self.existing(n)
        planner.link_parents(nodes, self._parent_lookup(missing))
        for n in nodes:
            page = PlannedPage(n.kind, n.rel, n.container, n.title, n.body, list(n.labels))
            n.page = page
            row = n.row
            if row is None:
                page.action = "create"
                continue
            page.page_id = str(row["id"])
            found = self.changes(n, row)
            if found and self.update:
                page.action, page.changes = "update", found
            else:
                page.action = "unchanged"
                report.left += bool(found)
        ordered = planner.parents_first(nodes)
        for n in ordered:
            if n.page is not None and n.page.action == "create":
                if n.parent_node is not None:
                    n.page.parent_title = n.parent_node.title
                elif n.parent_id is not None:
                    n.page.parent_id, n.page.parent_title = n.parent_id, n.parent_title
        self.ordered = ordered
        report.pages = [n.page for n in ordered if n.page is not None]
        for n in ordered:
            if n.page is not None and n.page.action != "unchanged":
                report.notes.extend(n.notes)
        if report.left:
            report.notes.append(ImportNote("left_as_they_are", f"{report.left} existing page(s) differ from their "
                                           "files and were left as they are — run again with --update to write them"))

    def _parent_lookup(self, missing: set[str]) -> Callable[[_Node, str], tuple[str | None, str]]:
        def lookup(n: _Node, address: str) -> tuple[str | None, str]:
            if n.container in missing:
                return None, f"cannot exist yet ({self.CONTAINER} {n.container} does not)"
            return self.existing_parent(n, address)
        return lookup

    def _write_all(self) -> None:
        report = self.report
        todo = [n for n in self.ordered if n.page is not None and n.page.action != "unchanged"]
        total = len(todo) + len(report.spaces_to_create)
        done = 0
        if self.progress:
            self.progress(0, total)
        for key in report.spaces_to_create:
            try:
                self.create_container(key)
                report.spaces_created.append(key)
            except RemoteFailure as failure:
                report.stopped = f"{self.CONTAINER} {key} could not be created: {failure.words}"
                return
            done += 1
            if self.progress:
                self.progress(done, total)
        failed: set[int] = set()
        for n in todo:
            page = n.page
            assert page is not None
            if page.action == "create" and n.parent_node is not None and n.parent_node.page is not None:
                if id(n.parent_node) in failed:
                    report.notes.append(ImportNote("parent_missing", f"parent '{n.parent_node.title}' was not "
                                                   f"written: the page lands at the top of {n.container}", [n.rel]))
                else:
                    page.parent_id = n.parent_node.page.page_id
            try:
                self.write(page, n)
                if page.action == "create":
                    report.created += 1
                else:
                    report.updated += 1
            except RemoteFailure as failure:
                failed.add(id(n))
                report.failures.append(ImportFailure(page.source, page.container, page.title, page.action,
                                                     failure.kind, failure.words))
                if failure.kind in _SITE_FAILURES:
                    left = len(todo) - done - 1
                    report.stopped = f"{failure.words} — {left} more page(s) not written"
                    break
            done += 1
            if self.progress:
                self.progress(done, total)
        report.unchanged = report.count("unchanged")

    def create_container(self, key: str) -> None:
        raise NotImplementedError


class ConfluencePublisher(Publisher):
    BACKEND = "confluence"
    LABEL = REMOTE_LABELS[BACKEND]
    CONTAINER = "space"

    def __init__(self, *args: Any, create_space: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.create_space = create_space

    def settings(self) -> Any:
        return self.company.integrations.confluence

    def skills_container(self) -> str:
        return self.company.knowledge.skills_container

    @property
    def api(self) -> ConfluenceAPI:
        assert self.http is not None
        return ConfluenceAPI(self.settings(), self.http)

    def check_containers(self, planner: _Planner, nodes: list[_Node]) -> None:
        assert self.credential is not None
        by_space: dict[str, list[str]] = {}
        for n in nodes:
            by_space.setdefault(n.container, []).append(n.rel)
        self.absent = set()
        for key in sorted(by_space):
            files = by_space[key]
            if not KEY_RE.match(key):
                self.report.problems.append(ImportProblem(
                    "invalid_space", f"'{key}' is not a space key — needed by {len(files)} file(s): {', '.join(files[:5])}",
                    "rename the directory, or set `space:` in those files' frontmatter", files))
                self.absent.add(key)
                continue
            if self.api.space(self.credential, key) is not None:
                continue
            if self.create_space:
                self.report.spaces_to_create.append(key)
            else:
                self.absent.add(key)
                self.report.problems.append(ImportProblem(
                    "no_space", f"space {key} does not exist on Confluence at {self.settings().url} (or "
                    f"{self.credential.describe()} cannot see it) — needed by {len(files)} file(s): "
                    f"{', '.join(files[:5])}",
                    f"create space {key} in Confluence (Spaces → Create space, key {key}) and give the credential's "
                    "user permission to add pages there, or run again with --create-space", files))

    def existing(self, n: _Node) -> dict[str, Any] | None:
        assert self.credential is not None
        return self.api.find_page(self.credential, n.container, n.title)

    def existing_parent(self, n: _Node, address: str) -> tuple[str | None, str]:
        assert self.credential is not None and n.parent_title is not None
        row = self.api.find_page(self.credential, n.container, n.parent_title)
        return (str(row["id"]), "") if row else (None, "is published by no file and is not a page there")

    def labels_for(self, n: _Node) -> list[str]:
        return sorted({*n.labels, SKILL_MARKER if n.kind == "skill" else DOC_MARKER})

    def changes(self, n: _Node, row: dict[str, Any]) -> list[str]:
        found = []
        storage = ((row.get("body") or {}).get("storage") or {}).get("value") or ""
        if not _says_the_same(storage, markdown_to_storage(n.body)):
            found.append("body")
        have = {lab.get("name") for lab in ((row.get("metadata") or {}).get("labels") or {}).get("results") or []}
        if set(self.labels_for(n)) - have:
            found.append("labels")
        n.row = row | {"_labels": have}
        return found

    def create_container(self, key: str) -> None:
        assert self.credential is not None
        declared = self.company.spaces.get(key)
        self.api.create_space(self.credential, key, declared.name if declared else key)

    def write(self, page: PlannedPage, node: _Node) -> None:
        assert self.credential is not None
        storage = markdown_to_storage(page.body)
        if page.action == "create":
            made = self.api.create_page(self.credential, page.container, page.title, storage, page.parent_id)
            page.page_id = str(made["id"])
            have: set[str] = set()
        else:
            if "body" in page.changes:
                self.api.update_page(self.credential, node.row, page.title, storage)
            have = node.row.get("_labels") or set()
        missing = [lab for lab in self.labels_for(node) if lab not in have]
        if missing:
            try:
                self.api.add_labels(self.credential, str(page.page_id), missing)
            except RemoteFailure as failure:
                if failure.kind in _SITE_FAILURES:
                    raise
                self.report.notes.append(ImportNote("label_not_attached", f"labels {', '.join(missing)} did not "
                                                    f"attach: {failure.words}", [page.source] if page.source else []))


class PlanePublisher(Publisher):
    BACKEND = "plane"
    LABEL = REMOTE_LABELS[BACKEND]
    CONTAINER = "project"

    def settings(self) -> Any:
        return self.company.integrations.plane

    def skills_container(self) -> str:
        return self.company.integrations.plane.skills_project if self.company.integrations.plane else "SKILLS"

    @property
    def api(self) -> PlaneAPI:
        assert self.http is not None
        return PlaneAPI(self.settings(), self.http)

    @staticmethod
    def external_id(n: _Node, title: str | None = None) -> str:
        return f"{'skill' if n.kind == 'skill' else 'doc'}:{title if title is not None else n.title}"

    def check_containers(self, planner: _Planner, nodes: list[_Node]) -> None:
        assert self.credential is not None
        self.projects = Projects(self.api.projects(self.credential))
        by_project: dict[str, list[str]] = {}
        labelled: list[str] = []
        for n in nodes:
            by_project.setdefault(n.container, []).append(n.rel)
            if n.labels:
                labelled.append(n.rel)
        if labelled:
            self.report.notes.append(ImportNote(
                "labels_ignored", f"Plane pages carry no free-form labels: `labels:` in {len(labelled)} file(s) is "
                "ignored (the external_id marks crewlet's pages)", labelled[:5]))
        self.absent = set()
        for key in sorted(by_project):
            if key in self.projects.by_identifier:
                continue
            files = by_project[key]
            self.absent.add(key)
            self.report.problems.append(ImportProblem(
                "no_project", f"no project {key} in workspace {self.settings().workspace} that "
                f"{self.credential.describe()} can see — needed by {len(files)} file(s): {', '.join(files[:5])}",
                f"create project {key} in Plane (Projects → Add project, identifier {key}) and add the credential's "
                "user as a member; crewlet never creates projects", files))

    def existing(self, n: _Node) -> dict[str, Any] | None:
        assert self.credential is not None
        return self.api.find_external(self.credential, self.projects.by_identifier[n.container], self.external_id(n))

    def existing_parent(self, n: _Node, address: str) -> tuple[str | None, str]:
        assert self.credential is not None and n.parent_title is not None
        row = self.api.find_external(self.credential, self.projects.by_identifier[n.container],
                                     f"doc:{n.parent_title}")
        return (str(row["id"]), "") if row else (None, "is published by no file (crewlet finds a parent by the "
                                                      "doc:<title> it published it under)")

    def changes(self, n: _Node, row: dict[str, Any]) -> list[str]:
        found = []
        if not _says_the_same(str(row.get("description_html") or ""), markdown_to_html(n.body)):
            found.append("body")
        if str(row.get("name") or "") != n.title:
            found.append("title")
        return found

    def write(self, page: PlannedPage, node: _Node) -> None:
        assert self.credential is not None
        project_id = self.projects.by_identifier[page.container]
        html = markdown_to_html(page.body)
        if page.action == "create":
            made = self.api.create_page(self.credential, project_id, page.title, html,
                                        external_id=self.external_id(node), parent_id=page.parent_id)
            page.page_id = str(made["id"])
        else:
            self.api.update_page(self.credential, project_id, str(page.page_id), page.title, html)


def publish(backend: str, company: Company, root: Path, actor: str | None = None, **options: Any) -> RemoteImportReport:
    """Plan and (unless dry_run) write. Raises ImportProblems (nothing written) when the plan has problems."""
    cls = ConfluencePublisher if backend == "confluence" else PlanePublisher
    if backend != "confluence":
        options.pop("create_space", None)
    return cls(company, root, actor, **options).run()
