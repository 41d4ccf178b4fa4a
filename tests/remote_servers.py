"""Real HTTP servers on 127.0.0.1 that answer as Confluence's REST API (v1) and Plane's API do, for the
calls crewlet makes. The tests start them; nothing is mocked in the client.

    with ConfluenceServer() as cf:
        cf.user("company-token", "svc")                 # a credential (Data Center: bearer)
        cf.user("eng-token", "eng", username="eng@x")   # Cloud: basic auth, username + token
        cf.space("ENG"); pid = cf.page("ENG", "Deploy Runbook", "<p>roll back a deploy</p>")
        cf.page("ENG", "Secret", "…", restricted_to={"eng"})   # only user "eng" sees it
        cf.mode = "status:503" | "not_json" | "hang" | "trickle" | "ok"   # what every request answers
        cf.requests                                      # (method, path, query) of each request
        cf.searches                                      # each search's parsed CQL clauses

What Confluence is sent it keeps in its own spelling, as the real one does (`confluence_storage`: a saved
macro gains ac:schema-version and ac:macro-id, a table a layout and one tbody); Plane's editor classes
each block (`plane_html`). An --update that compared markup would see every such page as changed.

Confluence's search parses CQL for real (strings with their escapes, AND, =, !=, ~, IN, NOT IN) and
answers 400 for anything it cannot parse, so a query that broke out of its `text ~ "…"` clause shows
as a clause the test can see. `text ~` matches every word of its (Lucene-unescaped) phrase against a
page's title and plain body, ranked by how often they occur. Every answer has the documented shape:
Content objects with `space`, `ancestors` (outermost first) and `_links.webui`, and `_links.base`.

Plane's page search (the fork's workspace endpoint) ANDs the query's whitespace tokens over name and
stripped body, newest edit first, refuses more than 16 distinct tokens with 400, and shows a page only
to a key whose user is a member of its project. `rows_without_project` names page ids answered with
no project_id (to test fail-closed drops).
"""
from __future__ import annotations

import base64
import itertools
import json
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from local_http import LocalHttpServer

_WORD = re.compile(r"\w+")
_TAGS = re.compile(r"<[^>]*>")


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


class _Server(LocalHttpServer):
    """What both fakes share beyond the HTTP plumbing: a request log, failure modes, a gate."""

    name = "server"
    protocol = "HTTP/1.1"
    methods = ("GET", "POST", "PUT", "PATCH", "DELETE")

    def __init__(self) -> None:
        super().__init__()
        self.mode = "ok"
        self.script: list[str] = []        # modes for the next requests, one each, before `mode`
        self.requests: list[tuple[str, str, dict[str, list[str]]]] = []
        self.lock = threading.RLock()
        self.gate = threading.Event()      # a "hang" request waits for this (or for stop)

    def stop(self) -> None:
        self.gate.set()                    # a "hang" request ends with the server
        super().stop()

    def writes(self) -> list[tuple[str, str]]:
        return [(m, p) for m, p, _ in self.requests if m in ("POST", "PUT", "PATCH", "DELETE")]

    def count(self, method: str, path_part: str) -> int:
        return sum(1 for m, p, _ in self.requests if m == method and path_part in p)

    # -- one request -----------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(h.path)
        query = parse_qs(parts.query, keep_blank_values=True)
        raw = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        with self.lock:
            self.requests.append((h.command, parts.path, query))
            mode = self.script.pop(0) if self.script else self.mode
        if mode == "hang":
            self.gate.wait()
            return
        if mode.startswith("status:"):
            status = int(mode.split(":", 1)[1])
            return self.send(h, status, {"statusCode": status, "message": f"the server answered {status}"})
        if mode == "not_json":
            return self.send_raw(h, 200, b"<html><body>Please log in</body></html>", "text/html")
        if mode == "trickle":
            return self._trickle(h)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            return self.send(h, 400, {"message": "the body is not JSON"})
        status, answer = self.route(h, h.command, parts.path, query, body)
        self.send(h, status, answer)

    def route(self, h: BaseHTTPRequestHandler, method: str, path: str, query: dict[str, list[str]],
              body: Any) -> tuple[int, Any]:
        raise NotImplementedError

    def send(self, h: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
        self.send_raw(h, status, json.dumps(payload).encode("utf-8"), "application/json")

    def send_raw(self, h: BaseHTTPRequestHandler, status: int, data: bytes, ctype: str) -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _trickle(self, h: BaseHTTPRequestHandler) -> None:
        """A body that keeps arriving a byte at a time until the gate opens (or the server stops)."""
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", "100000")
        h.end_headers()
        while not self.gate.wait(0.05):
            h.wfile.write(b" ")
            h.wfile.flush()


# -- Confluence -------------------------------------------------------------------------------------

@dataclass
class CfPage:
    id: str
    space: str
    title: str
    storage: str
    parent_id: str | None = None
    version: int = 1
    labels: set[str] = field(default_factory=set)
    restricted_to: set[str] | None = None        # users who may see it (None: everyone)


_MACRO = re.compile(r'<ac:structured-macro(?![^>]*ac:macro-id)([^>]*)>')
_CELL = re.compile(r"<(th|td)>(.*?)</\1>", re.S)


def confluence_storage(storage: str, ids: Any) -> str:
    """Storage as Confluence keeps what it is sent (its own spelling, the same page): a macro gains
    ac:schema-version and an ac:macro-id, a table a layout and one tbody (no thead) with each cell's
    text in a paragraph. `ids` yields the macro ids."""
    storage = _MACRO.sub(lambda m: f'<ac:structured-macro{m.group(1)} ac:schema-version="1" '
                                   f'ac:macro-id="6f1c0b9e-{next(ids):04d}">', storage)

    def table(m: re.Match[str]) -> str:
        rows = re.sub(r"</?(thead|tbody)>\s*", "", m.group(1))
        rows = _CELL.sub(lambda c: f"<{c.group(1)}><p>{c.group(2).strip()}</p></{c.group(1)}>"
                         if not c.group(2).strip().startswith("<p>") else c.group(0), rows)
        return f'<table data-layout="default"><tbody>{rows}</tbody></table>'

    return re.sub(r"<table>(.*?)</table>", table, storage, flags=re.S)


class CqlError(ValueError):
    pass


_CQL_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<op>!=|!~|=|~|\(|\)|,)|(?P<word>[A-Za-z_.]+))')


def parse_cql(cql: str) -> list[tuple[str, str, Any]]:
    """CQL as the clauses it says: [(field, op, value)], op in = != ~ !~ IN NOT_IN. Strings are read
    with CQL's escapes (\\\\ and \\"); anything else is a CqlError (the server's 400)."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(cql):
        if cql[pos:].strip() == "":
            break
        m = _CQL_TOKEN.match(cql, pos)
        if not m or m.end() == pos:
            raise CqlError(f"unexpected input at {pos}: {cql[pos:pos + 20]!r}")
        kind = m.lastgroup or ""
        value = m.group(kind)
        if kind == "str":
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        tokens.append((kind, value))
        pos = m.end()
    clauses: list[tuple[str, str, Any]] = []
    i = 0

    def take(kind: str | None = None, value: str | None = None) -> tuple[str, str]:
        nonlocal i
        if i >= len(tokens):
            raise CqlError("the query ends too soon")
        tok = tokens[i]
        if (kind and tok[0] != kind) or (value and tok[1].upper() != value):
            raise CqlError(f"expected {value or kind}, found {tok[1]!r}")
        i += 1
        return tok

    while True:
        fld = take("word")[1]
        nxt = tokens[i] if i < len(tokens) else ("", "")
        if nxt[0] == "word" and nxt[1].upper() in ("IN", "NOT"):
            negated = take("word")[1].upper() == "NOT"
            if negated:
                take("word", "IN")
            take("op", "(")
            values = [take("str")[1]]
            while tokens[i][1] == ",":
                take("op", ",")
                values.append(take("str")[1])
            take("op", ")")
            clauses.append((fld, "NOT_IN" if negated else "IN", values))
        else:
            op = take("op")[1]
            if op not in ("=", "!=", "~", "!~"):
                raise CqlError(f"unexpected {op!r}")
            value = tokens[i][1] if tokens[i][0] in ("str", "word") else None
            if value is None:
                raise CqlError("a value is missing")
            i += 1
            clauses.append((fld, op, value))
        if i == len(tokens):
            return clauses
        take("word", "AND")


def lucene_unescape(phrase: str) -> str:
    return re.sub(r"\\(.)", r"\1", phrase)


class ConfluenceServer(_Server):
    name = "confluence"

    def __init__(self, *, context: str = "/wiki") -> None:
        super().__init__()
        self.context = context                  # Cloud serves under /wiki
        self.users: dict[str, tuple[str, str | None]] = {}   # token -> (user, username for basic)
        self.spaces: dict[str, dict[str, Any]] = {}
        self.pages: dict[str, CfPage] = {}
        self.searches: list[list[tuple[str, str, Any]]] = []
        self.excerpts = True                    # answer an excerpt per result
        self._ids = itertools.count(1001)
        self._macro_ids = itertools.count(1)

    @property
    def url(self) -> str:
        return super().url + self.context

    def user(self, token: str, name: str, *, username: str | None = None) -> None:
        self.users[token] = (name, username)

    def space(self, key: str, name: str | None = None) -> None:
        self.spaces[key] = {"id": next(self._ids), "key": key, "name": name or key, "type": "global"}

    def page(self, space: str, title: str, storage: str = "", *, parent: str | None = None,
             restricted_to: Iterable[str] | None = None, labels: Iterable[str] = ()) -> str:
        pid = str(next(self._ids))
        self.pages[pid] = CfPage(pid, space, title, storage, parent, labels=set(labels),
                                 restricted_to=set(restricted_to) if restricted_to is not None else None)
        return pid

    # -- who is asking --------------------------------------------------------------------------
    def _who(self, h: BaseHTTPRequestHandler) -> str | None:
        auth = h.headers.get("Authorization") or ""
        if auth.startswith("Bearer "):
            found = self.users.get(auth[7:])
            return found[0] if found and found[1] is None else None
        if auth.startswith("Basic "):
            try:
                username, _, token = base64.b64decode(auth[6:]).decode().partition(":")
            except ValueError:
                return None
            found = self.users.get(token)
            return found[0] if found and found[1] == username else None
        return None

    def visible(self, page: CfPage, user: str) -> bool:
        return page.restricted_to is None or user in page.restricted_to

    def ancestors(self, page: CfPage) -> list[CfPage]:
        chain: list[CfPage] = []
        cur = self.pages.get(page.parent_id or "")
        while cur is not None and len(chain) < 50:
            chain.insert(0, cur)
            cur = self.pages.get(cur.parent_id or "")
        return chain

    def content(self, page: CfPage, expand: set[str]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": page.id, "type": "page", "status": "current", "title": page.title,
            "_links": {"webui": f"/spaces/{page.space}/pages/{page.id}/{page.title.replace(' ', '+')}",
                       "tinyui": f"/x/{page.id}", "self": f"{self.url}/rest/api/content/{page.id}"},
            "_expandable": {k: "" for k in ("container", "metadata", "operations", "children", "history")},
        }
        if "space" in expand:
            s = self.spaces[page.space]
            out["space"] = {**s, "_links": {"webui": f"/spaces/{page.space}"}}
        if "ancestors" in expand:
            out["ancestors"] = [{"id": a.id, "type": "page", "status": "current", "title": a.title}
                                for a in self.ancestors(page)]
        if "version" in expand:
            out["version"] = {"number": page.version, "when": "2025-01-01T00:00:00.000Z"}
        if "body.storage" in expand:
            out["body"] = {"storage": {"value": page.storage, "representation": "storage"}}
        if "metadata.labels" in expand:
            out["metadata"] = {"labels": {"results": [{"prefix": "global", "name": n} for n in sorted(page.labels)]}}
        return out

    # -- the API --------------------------------------------------------------------------------
    def route(self, h: BaseHTTPRequestHandler, method: str, path: str, query: dict[str, list[str]],
              body: Any) -> tuple[int, Any]:
        if not path.startswith(self.context + "/rest/api/"):
            return 404, {"statusCode": 404, "message": f"no route {path}"}
        user = self._who(h)
        if user is None:
            return 401, {"statusCode": 401, "message": "Basic authentication with passwords is deprecated"}
        rest = path[len(self.context) + len("/rest/api/"):].rstrip("/")
        one = lambda k, d="": (query.get(k) or [d])[0]  # noqa: E731
        expand = set(one("expand").split(",")) if one("expand") else set()
        with self.lock:
            if method == "GET" and rest == "content/search":
                return self._search(user, one("cql"), int(one("limit", "25")), expand)
            if method == "GET" and rest == "content":
                found = [p for p in self.pages.values() if p.space == one("spaceKey") and p.title == one("title")
                         and self.visible(p, user)]
                return 200, {"results": [self.content(p, expand) for p in found[:1]], "start": 0, "limit": 25,
                             "size": len(found[:1]), "_links": {"base": self.url, "context": self.context}}
            m = re.fullmatch(r"content/(\d+)", rest)
            if m and method == "GET":
                page = self.pages.get(m.group(1))
                if page is None or not self.visible(page, user):
                    return 404, {"statusCode": 404, "message": f"No content found with id: {m.group(1)}"}
                return 200, self.content(page, expand) | {"_links": {**self.content(page, set())["_links"],
                                                                      "base": self.url}}
            if m and method == "PUT":
                return self._update(user, m.group(1), body)
            if method == "POST" and rest == "content":
                return self._create(user, body)
            m = re.fullmatch(r"content/(\d+)/label", rest)
            if m and method == "POST":
                page = self.pages.get(m.group(1))
                if page is None or not self.visible(page, user):
                    return 404, {"statusCode": 404, "message": "No content found"}
                for label in body or []:
                    page.labels.add(label["name"])
                return 200, {"results": [{"prefix": "global", "name": n} for n in sorted(page.labels)]}
            m = re.fullmatch(r"space/([^/]+)", rest)
            if m and method == "GET":
                s = self.spaces.get(m.group(1))
                return (200, s) if s else (404, {"statusCode": 404, "message": f"No space with key : {m.group(1)}"})
            if method == "POST" and rest == "space":
                if body["key"] in self.spaces:
                    return 400, {"statusCode": 400, "message": "A space with this key already exists"}
                self.space(body["key"], body.get("name"))
                return 200, self.spaces[body["key"]]
        return 404, {"statusCode": 404, "message": f"no route {method} {path}"}

    def _search(self, user: str, cql: str, limit: int, expand: set[str]) -> tuple[int, Any]:
        try:
            clauses = parse_cql(cql)
        except CqlError as exc:
            return 400, {"statusCode": 400, "message": f"Could not parse cql : {cql} ({exc})"}
        self.searches.append(clauses)
        scored: list[tuple[int, CfPage]] = []
        for page in self.pages.values():
            if not self.visible(page, user):
                continue
            score, keep = 0, True
            for fld, op, value in clauses:
                if fld == "type":
                    keep &= (op == "=" and value == "page")
                elif fld == "space" and op in ("IN", "NOT_IN"):
                    keep &= (page.space in value) == (op == "IN")
                elif fld == "space" and op in ("=", "!="):
                    keep &= (page.space == value) == (op == "=")
                elif fld == "text" and op == "~":
                    words = _words(page.title + " " + _TAGS.sub(" ", page.storage))
                    wanted = _words(lucene_unescape(value))
                    keep &= bool(wanted) and all(w in words for w in wanted)
                    score = sum(words.count(w) for w in wanted)
                elif fld == "title" and op == "~":
                    keep &= all(w in _words(page.title) for w in _words(lucene_unescape(value)))
                else:
                    return 400, {"statusCode": 400, "message": f"Could not parse cql : unsupported field {fld}"}
            if keep:
                scored.append((score, page))
        scored.sort(key=lambda sp: (-sp[0], sp[1].id))
        results = []
        for _, page in scored[:limit]:
            item = self.content(page, expand)
            if self.excerpts:
                item["excerpt"] = "@@@hl@@@" + " ".join(_TAGS.sub(" ", page.storage).split())[:120] + "@@@endhl@@@"
            results.append(item)
        return 200, {"results": results, "start": 0, "limit": limit, "size": len(results), "cqlQuery": cql,
                     "_links": {"base": self.url, "context": self.context, "self": f"{self.url}/rest/api/content/search"}}

    def _create(self, user: str, body: Any) -> tuple[int, Any]:
        space = (body.get("space") or {}).get("key")
        if space not in self.spaces:
            return 404, {"statusCode": 404, "message": f"No space with key : {space}"}
        if any(p.space == space and p.title == body["title"] for p in self.pages.values()):
            return 400, {"statusCode": 400, "message": "A page with this title already exists"}
        parent = (body.get("ancestors") or [{}])[-1].get("id")
        pid = self.page(space, body["title"], confluence_storage(body["body"]["storage"]["value"], self._macro_ids),
                        parent=parent)
        return 200, self.content(self.pages[pid], {"space", "version", "ancestors"})

    def _update(self, user: str, pid: str, body: Any) -> tuple[int, Any]:
        page = self.pages.get(pid)
        if page is None or not self.visible(page, user):
            return 404, {"statusCode": 404, "message": f"No content found with id: {pid}"}
        if body["version"]["number"] != page.version + 1:
            return 409, {"statusCode": 409, "message": "Version must be incremented on update"}
        page.version += 1
        page.title = body["title"]
        page.storage = confluence_storage(body["body"]["storage"]["value"], self._macro_ids)
        return 200, self.content(page, {"space", "version"})


# -- Plane ------------------------------------------------------------------------------------------

@dataclass
class PlPage:
    id: str
    project_id: str
    name: str
    html: str
    parent: str | None = None
    external_source: str | None = None
    external_id: str | None = None
    updated: int = 0


def plane_html(html: str) -> str:
    """description_html as Plane's editor keeps it: each paragraph and heading classed as its block."""
    html = re.sub(r"<p>", '<p class="editor-paragraph-block">', html)
    return re.sub(r"<h([1-6])>", r'<h\1 class="editor-heading-block">', html)


class PlaneServer(_Server):
    name = "plane"
    MAX_TOKENS = 16

    def __init__(self, workspace: str = "acme") -> None:
        super().__init__()
        self.workspace = workspace
        self.keys: dict[str, str] = {}                       # api key -> user
        self.projects: dict[str, dict[str, Any]] = {}        # id -> {id, identifier, name, members}
        self.pages: dict[str, PlPage] = {}
        self.rows_without_project: set[str] = set()
        self.page_size = 100                                 # projects per list page
        self.searches: list[str] = []                        # each search's `search` parameter
        self._clock = itertools.count(1)
        self._ids = itertools.count(1)

    def key(self, key: str, user: str) -> None:
        self.keys[key] = user

    def _uuid(self) -> str:
        n = next(self._ids)
        return f"00000000-0000-4000-8000-{n:012d}"

    def project(self, identifier: str, members: Iterable[str]) -> str:
        pid = self._uuid()
        self.projects[pid] = {"id": pid, "identifier": identifier, "name": identifier, "members": set(members)}
        return pid

    def page(self, project_id: str, name: str, html: str = "", *, parent: str | None = None) -> str:
        pid = self._uuid()
        self.pages[pid] = PlPage(pid, project_id, name, html, parent, updated=next(self._clock))
        return pid

    def touch(self, page_id: str) -> None:
        self.pages[page_id].updated = next(self._clock)

    def _member(self, user: str, project_id: str) -> bool:
        p = self.projects.get(project_id)
        return p is not None and user in p["members"]

    def _page_json(self, p: PlPage) -> dict[str, Any]:
        return {"id": p.id, "name": p.name, "description_html": p.html, "parent": p.parent, "project": p.project_id,
                "workspace": self.workspace, "external_source": p.external_source, "external_id": p.external_id,
                "updated_at": f"2025-01-01T00:00:{p.updated % 60:02d}Z", "access": 0, "archived_at": None}

    def route(self, h: BaseHTTPRequestHandler, method: str, path: str, query: dict[str, list[str]],
              body: Any) -> tuple[int, Any]:
        base = f"/api/v1/workspaces/{self.workspace}/"
        if not path.startswith(base):
            return 404, {"error": f"no route {path}"}
        user = self.keys.get(h.headers.get("X-API-Key") or "")
        if user is None:
            return 401, {"detail": "Given API token is not valid"}
        rest = path[len(base):].rstrip("/")
        one = lambda k, d="": (query.get(k) or [d])[0]  # noqa: E731
        with self.lock:
            if method == "GET" and rest == "projects":
                mine = [{k: v for k, v in p.items() if k != "members"} for p in self.projects.values()
                        if user in p["members"]]
                start = int(one("cursor", "0:0:0").split(":")[1]) * self.page_size
                window = mine[start:start + self.page_size]
                more = start + self.page_size < len(mine)
                n = start // self.page_size
                return 200, {"grouped_by": None, "sub_grouped_by": None, "total_count": len(mine),
                             "next_cursor": f"{self.page_size}:{n + 1}:0", "prev_cursor": f"{self.page_size}:{n - 1}:1",
                             "next_page_results": more, "prev_page_results": n > 0, "count": len(window),
                             "total_pages": -(-len(mine) // self.page_size), "total_results": len(mine),
                             "extra_stats": None, "results": window}
            if method == "GET" and rest == "pages/search":
                return self._search(user, one("search"), query.get("project_id") or [], int(one("limit", "20")))
            m = re.fullmatch(r"projects/([^/]+)/pages", rest)
            if m:
                project_id = m.group(1)
                if not self._member(user, project_id):
                    return 403, {"error": "You are not a member of this project"}
                if method == "GET":
                    found = [self._page_json(p) for p in self.pages.values() if p.project_id == project_id
                             and p.external_source == one("external_source") and p.external_id == one("external_id")]
                    return 200, {"results": found}
                if method == "POST":
                    pid = self.page(project_id, body["name"], plane_html(body.get("description_html", "")),
                                    parent=body.get("parent"))
                    page = self.pages[pid]
                    page.external_source, page.external_id = body.get("external_source"), body.get("external_id")
                    return 201, self._page_json(page)
            m = re.fullmatch(r"projects/([^/]+)/pages/([^/]+)", rest)
            if m:
                project_id, page_id = m.groups()
                page = self.pages.get(page_id)
                if not self._member(user, project_id) or page is None or page.project_id != project_id:
                    return 404, {"error": "Page not found"}
                if method == "GET":
                    return 200, self._page_json(page)
                if method == "PATCH":
                    page.name = body.get("name", page.name)
                    page.html = plane_html(body["description_html"]) if "description_html" in body else page.html
                    page.updated = next(self._clock)
                    return 200, self._page_json(page)
        return 404, {"error": f"no route {method} {path}"}

    def _search(self, user: str, text: str, project_ids: list[str], limit: int) -> tuple[int, Any]:
        self.searches.append(text)
        tokens = list(dict.fromkeys(t.lower() for t in text.split()))
        if len(tokens) > self.MAX_TOKENS:
            return 400, {"error": f"search accepts at most {self.MAX_TOKENS} distinct tokens"}
        rows = []
        for p in sorted(self.pages.values(), key=lambda p: -p.updated):
            if not self._member(user, p.project_id) or (project_ids and p.project_id not in project_ids):
                continue
            hay = (p.name + " " + _TAGS.sub(" ", p.html)).lower()
            if tokens and all(t in hay for t in tokens):
                row = {"id": p.id, "name": p.name, "parent_id": p.parent, "updated_at": str(p.updated),
                       "snippet": " ".join(_TAGS.sub(" ", p.html).split())[:80]}
                if p.id not in self.rows_without_project:
                    row["project_id"] = p.project_id
                rows.append(row)
        return 200, {"results": rows[:limit]}
