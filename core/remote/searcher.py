"""What the Confluence and Plane searchers share: the seam's contract over a live backend.

`search()` never raises. It decides access (core/remote/access.py), asks the backend (the subclass's
`_ask`, one request or, on Plane, at most three), and answers what it served: mode `keyword` (a remote
backend ranks by its own search: Confluence by relevance, Plane by recency) — a hybrid search says
nothing was ranked by meaning, a semantic one serves nothing. Every failure is an answer with no hits,
no mode served and the reason in words (401, 403, 404, 429, 5xx, a timeout and its bound, an
unreachable host, an answer that is not JSON), which is a different answer from "nothing matched".
`Outcome.source` says where the answer came from and whose credential asked.

`get_page(ref)` opens one page through the backend's page API, as the same actor, and reads its body
as Markdown — only a page a search could return (the same access decision: read floor, empty-scope rule,
skills container, auto-drafts). An agent's search and page read are each one knowledge_read, through the
recorder core.knowledge gives (the node's), naming this backend.
"""
from __future__ import annotations

import html
import logging
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..config import SCOPE_KEYS, Company
from ..errors import CrewletError, NotFound
from ..pages.model import normalise_title
from ..search.access import Denial
from ..search.seam import NO_EMBEDDINGS, NO_TERMS, UNAVAILABLE, Coverage, Hit, Outcome, Query, Result
from .access import RemoteAccess, decide
from .credentials import Credential
from .http import RemoteFailure, RemoteHTTP

log = logging.getLogger("crewlet.search")

# (agent, via, pages [{id, container, title}], query, backend): records one knowledge_read
ReadRecorder = Callable[[str, str, list[dict[str, Any]], "str | None", str], None]

MODES = ["keyword"]
SNIPPET_MAX = 200
_TAGS = re.compile(r"<[^>]{0,200}>")


class NotSearched(Exception):
    """A backend decided, before or without asking, that the search does not run (e.g. no project in
    the scope is visible to the credential)."""

    def __init__(self, degraded: str, message: str) -> None:
        super().__init__(message)
        self.degraded, self.message = degraded, message


@dataclass
class Answer:
    """What a backend's search produced, before the seam's outcome is written."""

    hits: list[Hit]
    requests: int
    ranking: str                       # "relevance" | "recency"
    notes: list[str] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)    # the CQL, the queries sent, what was dropped
    degraded: str | None = None        # less was served than matched (e.g. hits withheld, unverifiable)


@dataclass
class RemotePage:
    """One page as its backend holds it, its body read as Markdown."""

    id: str
    title: str
    container: str
    url: str
    body: str                          # Markdown
    ancestors: list[str] = field(default_factory=list)
    version: int | None = None
    updated_at: str = ""
    backend: str = ""
    source: dict[str, Any] = field(default_factory=dict)    # where it was read from, and as whom

    @property
    def ref(self) -> str:
        """The address get_page opens it by: SPACE/Title on Confluence, PROJECT/PAGE-ID on Plane (a Plane
        page is found by id in its project, never by title)."""
        return f"{self.container}/{self.id}" if self.backend == "plane" else f"{self.container}/{self.title}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"ref": self.ref}


def strip_tags(text: str) -> str:
    """A server-built snippet as plain text: tags out, then every character reference read once (so
    "&amp;lt;" is the text "&lt;", as the page says, never "<")."""
    return html.unescape(_TAGS.sub("", text or ""))


def clip(text: str, limit: int = SNIPPET_MAX) -> str:
    line = " ".join((text or "").split())
    return line if len(line) <= limit else line[:limit - 1].rstrip() + "…"


def _unserved(degraded: str, message: str, modes: list[str] | None = None,
              source: dict[str, Any] | None = None) -> Result:
    return Result([], Outcome(None, list(MODES) if modes is None else modes, degraded, message,
                              Coverage(nodes=0, complete=False), source=source))


class RemoteSearcher:
    """A Searcher over a live backend. Thread-safe; one connection pool for its life."""

    BACKEND = ""
    LABEL = ""
    RANKING = "relevance"
    local_copy = False          # what the app says: there is no local copy, no index, no revisions here

    def __init__(self, company: Callable[[], Company], *, env: Mapping[str, str] | None = None,
                 recorder: ReadRecorder | None = None) -> None:
        self._company = company            # read at each call: a live config edit flows through
        self.env = env                     # None: the process environment (tests pass their own)
        self._recorder = recorder          # where an agent's reads are recorded (None: nowhere)
        self._http: RemoteHTTP | None = None
        self._http_key: tuple[Any, ...] | None = None
        self._lock = threading.Lock()

    # -- the seam -------------------------------------------------------------------------------
    def backend(self) -> str:
        return self.BACKEND

    def modes(self) -> list[str]:
        return list(MODES)

    def url(self) -> str:
        try:
            return self._settings(self._company()).url
        except Exception:  # noqa: BLE001 - no integration: nowhere to name
            return ""

    def where(self) -> str:
        """Where the knowledge lives, in words for a screen."""
        return f"{self.LABEL} at {self.url()}" if self.url() else self.LABEL

    def can_search(self, actor: str | None = None) -> bool:
        """No I/O: could a search possibly hit anything (an actor that may search, a credential that is
        set, and a scope the credential may read)?"""
        try:
            company = self._company()
            access = decide(company, Query("x", actor=actor), self.BACKEND, self.LABEL, self.env)
            return isinstance(access, RemoteAccess)
        except Exception:  # noqa: BLE001 - a pre-gate answers, it does not fail
            return False

    def search(self, query: Query) -> Result:
        try:
            return self._search(query)
        except Exception as exc:  # never raises: every failure is an answer that says so
            log.warning("%s search failed: %s", self.LABEL, exc)
            log.debug("search failed", exc_info=True)
            return _unserved(UNAVAILABLE, f"{self.LABEL} could not be searched: {exc or type(exc).__name__}")

    def close(self) -> None:
        with self._lock:
            if self._http is not None:
                self._http.close()
                self._http = None

    # -- one search -----------------------------------------------------------------------------------
    def _search(self, query: Query) -> Result:
        company = self._company()
        access = decide(company, query, self.BACKEND, self.LABEL, self.env)
        if isinstance(access, Denial):
            return _unserved(access.degraded, access.message, self.modes() if access.modes_known else [])
        source = self._source(company, access.credential)
        text = " ".join((query.text or "").split())
        if not text:
            return _unserved(NO_TERMS, "nothing was searched: the query is empty", source=source)
        if access.mode == "semantic":
            return _unserved(NO_EMBEDDINGS, f"nothing served: {self.LABEL} ranks by its own keyword search and cannot "
                             "rank by meaning — search in keyword or hybrid mode", source=source)
        try:
            answer = self._ask(company, access, text, query.effective_limit())
        except NotSearched as exc:
            return _unserved(exc.degraded, exc.message, source=source)
        except RemoteFailure as failure:
            source |= {"failure": failure.kind, "status": failure.status}
            log.warning("%s search failed: %s", self.LABEL, failure.words)
            return _unserved(UNAVAILABLE, f"the knowledge base could not be searched: {failure.words}", source=source)
        source |= {"ranking": answer.ranking, "requests": answer.requests, **answer.detail}
        notes = [f"searched {self.where()} as {access.credential.describe()}", *access.notes, *answer.notes]
        degraded = answer.degraded
        if access.mode == "hybrid":
            degraded = degraded or NO_EMBEDDINGS
            notes.insert(0, f"keyword ranking only: {self.LABEL} ranks by its own search ({answer.ranking}); nothing "
                            "was ranked by meaning")
        outcome = Outcome("keyword", self.modes(), degraded, "; ".join(n for n in notes if n),
                          Coverage(nodes=0, complete=True), source=source)
        if access.actor is not None and access.actor.is_agent:
            self._record(access.actor.handle, "search", answer.hits, text)
        return Result(answer.hits, outcome)

    def _source(self, company: Company, credential: Credential) -> dict[str, Any]:
        return {"backend": self.BACKEND, "url": self._settings(company).url, **credential.to_json()}

    # -- one page ---------------------------------------------------------------------------------------
    def get_page(self, ref: str, actor: str | None = None, *, record_read: bool = True) -> RemotePage:
        """One page through the backend's page API, as `actor` (its own credential, else the company's),
        its body as Markdown — only a page a search could return: inside the read floor (and the
        empty-scope rule), not in the tool-skills container, not under an excluded ancestor (an
        auto-draft). Anything else is not found, as a hit there is dropped. An agent's read is one
        knowledge_read (via get_page), as on the native backend. Raises NotFound, or CrewletError with
        the backend's failure in words."""
        company = self._company()
        handle = actor or company.operator
        who = company.actors.get(handle) if handle else None
        if handle and who is None:
            raise CrewletError(f"no actor '{handle}' is configured in {company.file}", code="unknown_actor")
        if who is not None and not who.holds_knowledge:
            raise CrewletError(f"{handle} does not hold the knowledge app", code="forbidden")
        access = decide(company, Query(ref, actor=actor, mode="keyword"), self.BACKEND, self.LABEL, self.env,
                        reading=True)
        if isinstance(access, Denial):
            raise CrewletError(access.message, code=access.degraded)
        ref = ref.strip()
        credential = access.credential
        cannot = f"no page {ref} that {credential.describe()} may read on {self.where()}"
        container = self._container_of(ref)
        if container is not None and (why := self._withheld(access, container)):
            raise NotFound(f"{cannot}: {why}", ref=ref)          # an address outside the floor: not even asked
        try:
            page = self._page(company, credential, ref)
        except RemoteFailure as failure:
            if failure.kind in ("not_found", "forbidden"):
                raise NotFound(f"{cannot} ({failure.words})", ref=ref) from None
            raise CrewletError(failure.words, code=failure.kind) from None
        why = self._withheld(access, page.container, page.title, page.ancestors)
        if why:
            raise NotFound(f"{cannot}: {why}", ref=ref)
        page.backend = self.BACKEND
        page.source = self._source(company, credential)
        if record_read and access.actor is not None and access.actor.is_agent:
            self._record(access.actor.handle, "get_page", [page], None)
        return page

    def titled(self, container: str, title: str, actor: str | None = None) -> RemotePage | None:
        """The page titled exactly `title` in `container` that `actor` may read (as get_page would give
        it), or None when there is none such — outside the read floor counts as none. Not an agent's
        read: it is how onboarding finds its pages, not what the agent read. Raises CrewletError when
        the site cannot say (no credential, an empty floor, the site failing), which is not "none".
        This finds it by the backend's search (one request, at most three on Plane) and one page read;
        a backend that looks a title up directly overrides it."""
        company = self._company()
        access = decide(company, Query(title, actor=actor, mode="keyword"), self.BACKEND, self.LABEL, self.env,
                        reading=True)
        if isinstance(access, Denial):
            raise CrewletError(access.message, code=access.degraded)
        if not access.admits_container(container):
            return None
        try:
            answer = self._ask(company, replace(access, containers=[container]), title, 25)
        except NotSearched as exc:
            raise CrewletError(exc.message, code=exc.degraded) from None
        except RemoteFailure as failure:
            raise CrewletError(failure.words, code=failure.kind) from None
        wanted = normalise_title(title)
        for hit in answer.hits:
            if hit.container == container and normalise_title(hit.title) == wanted:
                try:
                    return self.get_page(f"{container}/{hit.page_id}", actor, record_read=False)
                except NotFound:
                    continue
        if answer.degraded:     # hits were withheld (unverifiable): the page may be among them
            why = "; ".join(n for n in answer.notes if "withheld" in n) or answer.degraded
            raise CrewletError(f"{self.LABEL} could not say whether {container} has a page titled {title!r}: {why}",
                               code=answer.degraded)
        return None

    def _withheld(self, access: RemoteAccess, container: str, title: str = "",
                  ancestors: list[str] | None = None) -> str:
        """Why a search would drop this page ("" when it would not)."""
        if container == access.skills:
            return f"{container} holds tool skills, which are not read as knowledge"
        if not access.admits_container(container):
            scope_key = f"knowledge.{SCOPE_KEYS[self.BACKEND]}"
            return f"{container} is outside {scope_key} ({', '.join(access.containers or [])})"
        if access.excluded_title(title) or access.excluded_ancestors(ancestors or []):
            return "it is an auto-draft, which search leaves out"
        return ""

    def _container_of(self, ref: str) -> str | None:
        """The container an address names before any request (None: an id alone, whose container only the
        page says)."""
        return None

    # -- what an agent read -------------------------------------------------------------------------------
    def _record(self, handle: str, via: str, pages: list[Any], query: str | None) -> None:
        """One knowledge_read event listing the pages (the ids are this backend's), when a recorder was
        given (core.knowledge gives the node's); the answer stands if it cannot be written."""
        if self._recorder is None or not pages:
            return
        listed = [{"id": p.id if isinstance(p, RemotePage) else p.page_id, "container": p.container,
                   "title": p.title} for p in pages]
        try:
            self._recorder(handle, via, listed, query, self.BACKEND)
        except Exception:  # noqa: BLE001 - the audit trail says what it could
            log.exception("could not record %s's %s as a knowledge_read", handle, via)

    # -- what a backend implements ------------------------------------------------------------------------
    def _settings(self, company: Company) -> Any:
        raise NotImplementedError

    def _ask(self, company: Company, access: RemoteAccess, text: str, limit: int) -> Answer:
        raise NotImplementedError

    def _page(self, company: Company, credential: Credential, ref: str) -> RemotePage:
        raise NotImplementedError

    def http(self, company: Company) -> RemoteHTTP:
        """The one pool, made again only when the integration's url or timeouts change."""
        settings = self._settings(company)
        key = (settings.url, settings.connect_timeout_s, settings.read_timeout_s)
        with self._lock:
            if self._http is None or self._http_key != key:
                if self._http is not None:
                    self._http.close()
                self._http = RemoteHTTP(self.LABEL, settings.url, connect_s=settings.connect_timeout_s,
                                        read_s=settings.read_timeout_s)
                self._http_key = key
            return self._http
