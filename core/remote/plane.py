"""The Plane backend: a live search of a workspace's pages, pages read and written through the API.

The search is the workspace page-search endpoint of the Plane build crewlet works with (a fork of
Plane's API; the shapes assumed are in docs/remote.md):

    GET {url}/api/v1/workspaces/{slug}/pages/search/?search=…[&project_id=…]&limit=N
    -> {"results": [{"id", "name", "project_id", "parent_id", "snippet", "updated_at"}, …]}

It tokenises the query server-side and ANDs the tokens against each page's name and stripped body,
newest edit first (`-updated_at`): the ranking is recency, not relevance, and every answer says so.
Because a strict conjunction over many words easily matches nothing, a search that finds nothing is
relaxed: the query's own tokens first, then its leading 4, then its leading 2 — at most three requests,
stopping at the first that answers anything. Queries are first trimmed to 16 distinct tokens, the
server's own cap (it answers 400 past it).

What a hit may be is decided here, and fails closed: the tool-skills project (integrations.plane.
skills_project) is dropped wholesale; a hit whose project cannot be established — no project_id on the
row, a project this credential's project list does not hold, or a skills project that does not resolve
(so no hit can be checked against it) — is dropped rather than served unchecked, and the answer says
how many. Auto-drafts are hidden by their direct parent's title (one page lookup per distinct parent,
remembered for a few minutes), with the "[Auto-draft]" title prefix as the backstop when that lookup
fails. Plane pages carry no ancestor chain, so hits have none.
"""
from __future__ import annotations

import re
import threading
import time
from typing import Any

from ..config import REMOTE_LABELS, Company, PlaneSettings
from ..pages.model import normalise_title
from ..search.seam import OUT_OF_SCOPE, Hit
from .access import RemoteAccess
from .convert import html_to_markdown
from .credentials import Credential
from .http import RemoteFailure, RemoteHTTP, segment
from .searcher import Answer, NotSearched, RemotePage, RemoteSearcher, clip, strip_tags

MAX_TOKENS = 16                    # the server refuses a query of more distinct tokens (400)
RELAXED_PREFIXES = (4, 2)          # the leading tokens tried, in order, after a query that found nothing
OVERFETCH = 8
PROJECTS_TTL_S = 300.0             # a credential's project list, remembered
PARENTS_TTL_S = 300.0              # a parent page's title, remembered
MAX_PROJECT_PAGES = 20             # project-list pages followed (cursor pagination)
UNVERIFIED = "unverified"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")          # hits dropped because their project could not be established


def distinct_tokens(text: str) -> list[str]:
    """The query's whitespace-split tokens, each once (case-insensitively), in order."""
    seen: set[str] = set()
    out: list[str] = []
    for token in text.split():
        key = token.casefold()
        if key not in seen:
            seen.add(key)
            out.append(token)
    return out


def relaxation(tokens: list[str]) -> list[list[str]]:
    """The token lists a search tries, in order: the whole (capped) query, then its leading 4 and 2
    tokens where those are shorter than what was tried before. At most three."""
    tried = [tokens[:MAX_TOKENS]]
    for n in RELAXED_PREFIXES:
        if len(tried[-1]) > n:
            tried.append(tokens[:n])
    return tried


def _results(answer: Any) -> list[Any]:
    if isinstance(answer, list):
        return answer
    if isinstance(answer, dict) and isinstance(answer.get("results"), list):
        return answer["results"]
    raise RemoteFailure("bad_answer", "Plane answered without a results list")


class PlaneAPI:
    def __init__(self, settings: PlaneSettings, http: RemoteHTTP) -> None:
        self.settings = settings
        self.http = http
        self.ws = f"/api/v1/workspaces/{segment(settings.workspace)}"

    def search(self, credential: Credential, tokens: list[str], project_ids: list[str] | None, limit: int) -> list[Any]:
        params: list[tuple[str, str | int]] = [("search", " ".join(tokens)), ("limit", limit)]
        params += [("project_id", pid) for pid in project_ids or []]
        return _results(self.http.request("GET", f"{self.ws}/pages/search/", credential.auth, params=params))

    def projects(self, credential: Credential) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        cursor = None
        for _ in range(MAX_PROJECT_PAGES):
            answer = self.http.request("GET", f"{self.ws}/projects/", credential.auth,
                                       params={"per_page": 100, **({"cursor": cursor} if cursor else {})})
            out += [p for p in _results(answer) if isinstance(p, dict)]
            if not (isinstance(answer, dict) and answer.get("next_page_results") and answer.get("next_cursor")):
                break
            cursor = answer["next_cursor"]
        return out

    def page(self, credential: Credential, project_id: str, page_id: str) -> dict[str, Any]:
        answer = self.http.request("GET", f"{self.ws}/projects/{segment(project_id)}/pages/{segment(page_id)}/", credential.auth)
        if not isinstance(answer, dict) or not answer.get("id"):
            raise RemoteFailure("bad_answer", f"Plane answered page {page_id} without an id")
        return answer

    def find_external(self, credential: Credential, project_id: str, external_id: str) -> dict[str, Any] | None:
        answer = self.http.request("GET", f"{self.ws}/projects/{segment(project_id)}/pages/", credential.auth,
                                   params={"external_source": "crewlet", "external_id": external_id})
        found = [p for p in _results(answer) if isinstance(p, dict) and p.get("external_id") == external_id
                 and p.get("external_source") == "crewlet"]
        return found[0] if found else None

    def create_page(self, credential: Credential, project_id: str, name: str, html: str, *, external_id: str,
                    parent_id: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name, "description_html": html, "external_source": "crewlet",
                                "external_id": external_id}
        if parent_id:
            body["parent"] = parent_id
        return self.http.request("POST", f"{self.ws}/projects/{segment(project_id)}/pages/", credential.auth, body=body)

    def update_page(self, credential: Credential, project_id: str, page_id: str, name: str, html: str) -> dict[str, Any]:
        return self.http.request("PATCH", f"{self.ws}/projects/{segment(project_id)}/pages/{segment(page_id)}/", credential.auth,
                                 body={"name": name, "description_html": html})


class Projects:
    """A credential's projects: identifier -> id and back."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.by_id = {str(p["id"]): str(p["identifier"]) for p in rows if p.get("id") and p.get("identifier")}
        self.by_identifier = {ident: pid for pid, ident in self.by_id.items()}


class PlaneSearcher(RemoteSearcher):
    BACKEND = "plane"
    LABEL = REMOTE_LABELS[BACKEND]
    RANKING = "recency"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._projects: dict[tuple[str, str], tuple[float, Projects]] = {}
        self._parents: dict[tuple[str, str], tuple[float, str | None]] = {}
        self._page_projects: dict[str, str] = {}      # page id -> project id, from this searcher's hits
        self._cache_lock = threading.Lock()

    def _settings(self, company: Company) -> PlaneSettings:
        settings = company.integrations.plane
        if settings is None:
            raise RemoteFailure("unconfigured", f"there is no [integrations.plane] in {company.file}")
        return settings

    def api(self, company: Company) -> PlaneAPI:
        return PlaneAPI(self._settings(company), self.http(company))

    def projects(self, api: PlaneAPI, credential: Credential) -> tuple[Projects, int]:
        """(the credential's projects, requests made): remembered for PROJECTS_TTL_S."""
        key = (api.settings.url, credential.env)
        now = time.monotonic()
        with self._cache_lock:
            hit = self._projects.get(key)
        if hit is not None and now - hit[0] < PROJECTS_TTL_S:
            return hit[1], 0
        found = Projects(api.projects(credential))
        with self._cache_lock:
            self._projects[key] = (now, found)
        return found, 1

    def _parent_title(self, api: PlaneAPI, credential: Credential, project_id: str, parent_id: str) -> tuple[str | None, int]:
        key = (credential.env, parent_id)
        now = time.monotonic()
        with self._cache_lock:
            hit = self._parents.get(key)
        if hit is not None and now - hit[0] < PARENTS_TTL_S:
            return hit[1], 0
        try:
            name = str(api.page(credential, project_id, parent_id).get("name") or "")
        except RemoteFailure:
            return None, 1                          # not remembered: the next search asks again
        with self._cache_lock:
            if len(self._parents) > 4096:
                self._parents.clear()
            self._parents[key] = (now, name)
        return name, 1

    def _ask(self, company: Company, access: RemoteAccess, text: str, limit: int) -> Answer:
        api = self.api(company)
        projects, lookups = self.projects(api, access.credential)
        notes: list[str] = []
        project_ids: list[str] | None = None
        if access.containers is not None:
            project_ids = [projects.by_identifier[c] for c in access.containers if c in projects.by_identifier]
            unseen = [c for c in access.containers if c not in projects.by_identifier]
            if unseen:
                notes.append(f"{', '.join(unseen)}: no such project visible to {access.credential.describe()} (is its "
                             "user a member?)")
            if not project_ids:
                raise NotSearched(OUT_OF_SCOPE, "nothing searched: " + "; ".join(notes))
        tokens = distinct_tokens(text)
        if len(tokens) > MAX_TOKENS:
            notes.append(f"the query has {len(tokens)} distinct words and Plane's search takes {MAX_TOKENS}: the last "
                         f"{len(tokens) - MAX_TOKENS} were left out")
        sent: list[str] = []
        rows: list[Any] = []
        for attempt in relaxation(tokens):
            sent.append(" ".join(attempt))
            rows = api.search(access.credential, attempt, project_ids, limit + OVERFETCH)
            if rows:
                break
        if len(sent) > 1 and rows:
            notes.append(f"no page held all {len(sent[0].split())} words; matched the leading "
                         f"{len(sent[-1].split())} ({sent[-1]})")
        skills_id = projects.by_identifier.get(access.skills)
        hits: list[Hit] = []
        dropped = {"skills": 0, "no_project": 0, "excluded": 0, "out_of_scope": 0}
        for row in rows:
            if len(hits) >= limit:
                break                                      # the rest were asked for in case these were dropped
            if not isinstance(row, dict) or not row.get("id"):
                dropped["no_project"] += 1
                continue
            project_id = str(row.get("project_id") or row.get("project") or "")
            identifier = projects.by_id.get(project_id)
            if not project_id or identifier is None or skills_id is None:
                dropped["no_project"] += 1                 # fail closed: unchecked is not served
                continue
            if project_id == skills_id:
                dropped["skills"] += 1
                continue
            if not access.admits_container(identifier):
                dropped["out_of_scope"] += 1
                continue
            title = str(row.get("name") or "")
            if access.excluded_title(title):
                dropped["excluded"] += 1
                continue
            parent_id = str(row.get("parent_id") or row.get("parent") or "")
            if parent_id and access.exclusions:
                parent, n = self._parent_title(api, access.credential, project_id, parent_id)
                lookups += n
                if parent is not None and normalise_title(parent) in access.exclusions:
                    dropped["excluded"] += 1
                    continue
            with self._cache_lock:
                self._page_projects[str(row["id"])] = project_id
            hits.append(Hit(title=title, url=self._page_url(api, project_id, str(row["id"])), container=identifier,
                            page_id=str(row["id"]), snippet=clip(strip_tags(str(row.get("snippet") or ""))),
                            ancestors=[], score=float(len(rows) - len(hits))))
        if dropped["no_project"]:
            why = (f"the tool-skills project {access.skills} (integrations.plane.skills_project) does not resolve for "
                   f"{access.credential.describe()}, so no hit could be checked against it — create it, or name the "
                   "project that holds tool skills" if skills_id is None else
                   "their project could not be established (no project_id, or a project this credential's list "
                   "does not hold)")
            notes.append(f"{dropped['no_project']} hit(s) withheld: {why}")
        if dropped["excluded"]:
            notes.append(f"{dropped['excluded']} hit(s) under an excluded parent (auto-drafts) left out")
        notes.insert(0, "ranked by recency (the most recently edited match first), not by relevance")
        return Answer(hits, requests=len(sent), ranking=self.RANKING, notes=notes,
                      detail={"queries": sent, "lookups": lookups, "dropped": {k: v for k, v in dropped.items() if v}},
                      degraded=UNVERIFIED if dropped["no_project"] else None)

    @staticmethod
    def _page_url(api: PlaneAPI, project_id: str, page_id: str) -> str:
        return f"{api.settings.url}/{api.settings.workspace}/projects/{project_id}/pages/{page_id}/"

    def _container_of(self, ref: str) -> str | None:
        """PROJECT/PAGE-ID names its project by identifier (checked before any request); a project's id
        in its place is checked once the page is read."""
        container = ref.rpartition("/")[0].strip()
        return container if container and not _UUID.fullmatch(container.lower()) else None

    def _page(self, company: Company, credential: Credential, ref: str) -> RemotePage:
        api = self.api(company)
        projects, _ = self.projects(api, credential)
        container, _, page_id = ref.rpartition("/")
        if not container:
            with self._cache_lock:
                container = self._page_projects.get(page_id, "")
            if not container:
                raise RemoteFailure("not_found", f"page {page_id} is not among this session's search hits — give "
                                                 "its project too, as PROJECT/PAGE-ID")
        project_id = projects.by_identifier.get(container, container if container in projects.by_id else "")
        if not project_id:
            raise RemoteFailure("not_found", f"no project {container} visible to {credential.describe()}")
        if project_id == projects.by_identifier.get(self._settings(company).skills_project):
            raise RemoteFailure("forbidden", "the tool-skills project is not read as knowledge")
        page = api.page(credential, project_id, page_id)
        parent = str(page.get("parent") or page.get("parent_id") or "")
        ancestors = []
        if parent:
            title, _ = self._parent_title(api, credential, project_id, parent)
            ancestors = [title] if title else []
        return RemotePage(id=str(page["id"]), title=str(page.get("name") or ""), container=projects.by_id[project_id],
                          url=self._page_url(api, project_id, str(page["id"])),
                          body=html_to_markdown(str(page.get("description_html") or "")), ancestors=ancestors,
                          updated_at=str(page.get("updated_at") or ""))
