"""The Confluence backend: a live CQL search, pages read and written through the REST API (v1).

A search is one request: `GET {url}/rest/api/content/search?cql=…&limit=…&expand=space,ancestors`, so
Confluence's own search does the matching and the relevance ranking, as the actor's own user where it
has a credential (Confluence then leaves out every page that user may not see). The query is plain
text wrapped into one `text ~ "…"` clause (`build_cql`): escaped twice, for the Lucene phrase inside and
for the CQL string around it, so a quote, a backslash or an operator word in the query can neither end
the clause nor add one. The read scope narrows it with `space IN (…)` and the tool-skills space is left
out with `space NOT IN (…)`, both inside the request so no hit is cut for them.

Each result is a Content object: `id`, `type`, `title`, `space.key`, `ancestors[].title` (outermost
first), `_links.webui` (a path under the answer's `_links.base`), and an `excerpt` where the server
gives one. Hits carry the whole ancestor chain, so the auto-draft exclusion matches at any depth; a few
more results than the limit are asked for, so the exclusions cost hits and never places.
"""
from __future__ import annotations

import re
from typing import Any

from ..config import REMOTE_LABELS, Company, ConfluenceSettings
from ..errors import NotFound
from ..pages.model import normalise_title
from ..search.seam import Hit
from .access import RemoteAccess
from .convert import storage_to_markdown
from .credentials import Credential
from .http import RemoteFailure, RemoteHTTP, segment
from .searcher import Answer, RemotePage, RemoteSearcher, clip, strip_tags

API = "/rest/api"
SEARCH_EXPAND = "space,ancestors"
PAGE_EXPAND = "body.storage,space,ancestors,version,metadata.labels"
OVERFETCH = 8                      # results asked beyond the limit, for the hits the exclusions drop
MAX_SEARCH_LIMIT = 100
# Lucene's reserved characters inside a `text ~` phrase; each is escaped to stand for itself
_LUCENE_SPECIAL = set('+-&|!(){}[]^"~*?:\\/')
_OPERATORS = re.compile(r"\b(AND|OR|NOT|TO)\b")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_HIGHLIGHT = re.compile(r"@@@(?:end)?hl@@@")


def cql_string(value: str) -> str:
    """A CQL string literal: the value in double quotes, its backslashes and quotes escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def lucene_phrase(text: str) -> str:
    """Plain words as Confluence's text search reads them literally: control characters gone, every
    reserved character escaped, and the operator words (AND OR NOT TO, which Lucene reads only in
    capitals) lower-cased into words."""
    text = _OPERATORS.sub(lambda m: m.group(0).lower(), _CONTROL.sub(" ", text))
    return "".join("\\" + ch if ch in _LUCENE_SPECIAL else ch for ch in " ".join(text.split()))


def build_cql(text: str, spaces: list[str] | None = None, exclude_spaces: list[str] | None = None) -> str:
    """`type = page AND text ~ "…"` [AND space IN (…)] [AND space NOT IN (…)]."""
    clauses = ["type = page", f"text ~ {cql_string(lucene_phrase(text))}"]
    if spaces:
        clauses.append(f"space IN ({', '.join(cql_string(s) for s in spaces)})")
    if exclude_spaces:
        clauses.append(f"space NOT IN ({', '.join(cql_string(s) for s in exclude_spaces)})")
    return " AND ".join(clauses)


class ConfluenceAPI:
    """The REST calls crewlet makes, over one pool, each as a given credential."""

    def __init__(self, settings: ConfluenceSettings, http: RemoteHTTP) -> None:
        self.settings = settings
        self.http = http

    def search(self, credential: Credential, cql: str, limit: int) -> dict[str, Any]:
        answer = self.http.request("GET", f"{API}/content/search", credential.auth,
                                   params={"cql": cql, "limit": limit, "expand": SEARCH_EXPAND})
        if not isinstance(answer, dict) or not isinstance(answer.get("results"), list):
            raise RemoteFailure("bad_answer", f"Confluence at {self.settings.url} answered a search without a "
                                              "results list")
        return answer

    def content(self, credential: Credential, content_id: str) -> dict[str, Any]:
        answer = self.http.request("GET", f"{API}/content/{segment(content_id)}", credential.auth,
                                   params={"expand": PAGE_EXPAND})
        if not isinstance(answer, dict) or not answer.get("id"):
            raise RemoteFailure("bad_answer", f"Confluence at {self.settings.url} answered page {content_id} "
                                              "without an id")
        return answer

    def find_page(self, credential: Credential, space: str, title: str) -> dict[str, Any] | None:
        """The page titled exactly `title` in `space` (Confluence's own match), or None."""
        answer = self.http.request("GET", f"{API}/content", credential.auth,
                                   params={"spaceKey": space, "title": title, "type": "page", "status": "current",
                                           "expand": PAGE_EXPAND, "limit": 1})
        results = answer.get("results") if isinstance(answer, dict) else None
        if not isinstance(results, list):
            raise RemoteFailure("bad_answer", f"Confluence at {self.settings.url} answered a page lookup without "
                                              "a results list")
        return results[0] if results else None

    def space(self, credential: Credential, key: str) -> dict[str, Any] | None:
        return self.http.request("GET", f"{API}/space/{segment(key)}", credential.auth, missing_ok=True)

    def create_space(self, credential: Credential, key: str, name: str) -> dict[str, Any]:
        return self.http.request("POST", f"{API}/space", credential.auth, body={
            "key": key, "name": name,
            "description": {"plain": {"value": "created by crewlet confluence import", "representation": "plain"}}})

    def create_page(self, credential: Credential, space: str, title: str, storage: str,
                    parent_id: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {"type": "page", "title": title, "space": {"key": space},
                                "body": {"storage": {"value": storage, "representation": "storage"}}}
        if parent_id:
            body["ancestors"] = [{"id": parent_id}]
        return self.http.request("POST", f"{API}/content", credential.auth, body=body)

    def update_page(self, credential: Credential, page: dict[str, Any], title: str, storage: str) -> dict[str, Any]:
        version = int((page.get("version") or {}).get("number") or 0) + 1
        return self.http.request("PUT", f"{API}/content/{segment(str(page['id']))}", credential.auth, body={
            "id": page["id"], "type": "page", "title": title, "version": {"number": version},
            "body": {"storage": {"value": storage, "representation": "storage"}}})

    def add_labels(self, credential: Credential, content_id: str, labels: list[str]) -> Any:
        return self.http.request("POST", f"{API}/content/{segment(content_id)}/label", credential.auth,
                                 body=[{"prefix": "global", "name": label} for label in labels])


def _object(value: Any, otherwise: dict[str, Any]) -> dict[str, Any]:
    """`value` when the JSON holds an object there, else `otherwise`."""
    return value if isinstance(value, dict) else otherwise


def _snippet(result: dict[str, Any]) -> str:
    excerpt = result.get("excerpt")
    if not isinstance(excerpt, str):
        return ""
    return clip(strip_tags(_HIGHLIGHT.sub("", excerpt)))


def read_hit(result: Any, base: str) -> tuple[Hit, str] | None:
    """(the hit, its content type) from one search result (a Content object, or the /search shape that
    wraps one in `content`); None when it is not a usable page."""
    if not isinstance(result, dict):
        return None
    content = _object(result.get("content"), result)
    cid, title = content.get("id"), content.get("title")
    if not cid or not isinstance(title, str):
        return None
    space = _object(content.get("space"), {})
    ancestors = [a.get("title", "") for a in content.get("ancestors") or [] if isinstance(a, dict)]
    links = _object(content.get("_links"), {})
    webui = links.get("webui") or ""
    url = f"{base}{webui}" if webui.startswith("/") and base else (webui if webui.startswith("http") else "")
    hit = Hit(title=title, url=url, container=str(space.get("key") or ""), page_id=str(cid),
              snippet=_snippet(result if "excerpt" in result else content),
              ancestors=[a for a in ancestors if isinstance(a, str)])
    return hit, str(content.get("type") or "page")


class ConfluenceSearcher(RemoteSearcher):
    BACKEND = "confluence"
    LABEL = REMOTE_LABELS[BACKEND]
    RANKING = "relevance"

    def _settings(self, company: Company) -> ConfluenceSettings:
        settings = company.integrations.confluence
        if settings is None:
            raise RemoteFailure("unconfigured", f"there is no [integrations.confluence] in {company.file}")
        return settings

    def api(self, company: Company) -> ConfluenceAPI:
        return ConfluenceAPI(self._settings(company), self.http(company))

    def _ask(self, company: Company, access: RemoteAccess, text: str, limit: int) -> Answer:
        api = self.api(company)
        cql = build_cql(text, access.containers, [access.skills])
        answer = api.search(access.credential, cql, min(MAX_SEARCH_LIMIT, limit + OVERFETCH))
        links = _object(answer.get("_links"), {})
        base = str(links.get("base") or api.settings.url).rstrip("/")
        hits: list[Hit] = []
        dropped = {"skills": 0, "excluded": 0, "out_of_scope": 0, "unreadable": 0}
        for result in answer["results"]:
            read = read_hit(result, base)
            if read is None or read[1] != "page":
                dropped["unreadable"] += read is None
                continue
            hit = read[0]
            if hit.container == access.skills:
                dropped["skills"] += 1
            elif not access.admits_container(hit.container):
                dropped["out_of_scope"] += 1
            elif access.excluded_ancestors(hit.ancestors) or access.excluded_title(hit.title):
                dropped["excluded"] += 1
            elif len(hits) < limit:
                hit.score = float(len(answer["results"]) - len(hits))    # Confluence's order, as a score
                hits.append(hit)
        notes = []
        if dropped["excluded"]:
            notes.append(f"{dropped['excluded']} hit(s) under an excluded ancestor (auto-drafts) left out")
        return Answer(hits, requests=1, ranking=self.RANKING, notes=notes,
                      detail={"cql": cql, "dropped": {k: v for k, v in dropped.items() if v}})

    def _container_of(self, ref: str) -> str | None:
        return ref.partition("/")[0].strip() if _is_address(ref) else None

    def titled(self, container: str, title: str, actor: str | None = None) -> RemotePage | None:
        """Confluence looks a title up in a space directly: one request (SPACE/Title through get_page)."""
        try:
            page = self.get_page(f"{container}/{title}", actor, record_read=False)
        except NotFound:
            return None
        return page if normalise_title(page.title) == normalise_title(title) else None

    def _page(self, company: Company, credential: Credential, ref: str) -> RemotePage:
        api = self.api(company)
        if _is_address(ref):
            space, _, title = ref.partition("/")
            content = api.find_page(credential, space.strip(), title.strip())
            if content is None:
                raise RemoteFailure("not_found", f"space {space} has no page titled {title!r}")
        else:
            content = api.content(credential, ref)
        return read_page(content, api.settings.url)


def _is_address(ref: str) -> bool:
    """SPACE/Title, rather than a content id."""
    return "/" in ref and not ref.isdigit()


def read_page(content: dict[str, Any], site: str) -> RemotePage:
    space = _object(content.get("space"), {})
    storage = ((content.get("body") or {}).get("storage") or {}).get("value") or ""
    links = _object(content.get("_links"), {})
    base = str(links.get("base") or site).rstrip("/")
    webui = str(links.get("webui") or "")
    return RemotePage(
        id=str(content["id"]), title=str(content.get("title") or ""), container=str(space.get("key") or ""),
        url=f"{base}{webui}" if webui.startswith("/") else webui,
        body=storage_to_markdown(storage),
        ancestors=[str(a.get("title", "")) for a in content.get("ancestors") or [] if isinstance(a, dict)],
        version=(content.get("version") or {}).get("number"),
        updated_at=str((content.get("version") or {}).get("when") or ""))
