"""Where this company's knowledge lives, and the one place a Searcher is chosen: by knowledge.backend.

`crewlet search`, the app, `crewlet mcp` and every later consumer (`crewlet ask`) search through what
this returns, so "what do we already know" has one answer per company. native (and none, which the
native searcher answers with "this company does not search") searches this node's own copy; confluence
and plane search the company's site live, reading the configuration current at each call.

Every surface asks here, and nowhere else, whether the knowledge is remote, its name and where it
lives (`remote_site`, `label`, `where`, `is_remote`), and keeps its searcher following the backend
(`FollowingSearcher`: one rule for the app and MCP). The site itself (`config.RemoteSite`) stands
beside the configuration that names it, so the knowledge base, below this floor, refuses a local write
on such a company in the same words.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .config import REMOTE_LABELS, Company, RemoteSite, remote_site
from .errors import KnowledgeElsewhere

if TYPE_CHECKING:
    from .node import Node
    from .search.seam import Searcher

__all__ = ["make_searcher", "FollowingSearcher", "remote_site", "RemoteSite", "is_remote", "label", "where",
           "elsewhere", "company_of", "onboarding_pages"]

LOCAL = "this node's copy"


def company_of(node: Node) -> Callable[[], Company]:
    """The node's configuration as it is now (one stat per call decides whether to read it again)."""

    def current() -> Company:
        node.refresh_config()
        return node.company

    return current


def searcher_backend(backend: str) -> str:
    """The backend a searcher for `backend` answers as: none is answered by the native searcher."""
    return backend if backend in REMOTE_LABELS else "native"


def make_searcher(node: Node, **native_options: Any) -> Any:
    """The searcher knowledge.backend names (native options go to NativeSearcher). A remote searcher
    records an agent's reads (knowledge_read, naming the backend) on this node, as the native one does."""
    backend = node.company.knowledge.backend
    if backend in REMOTE_LABELS:
        from .pages.service import KnowledgeBase
        from .remote.confluence import ConfluenceSearcher
        from .remote.plane import PlaneSearcher

        kb = KnowledgeBase(node)

        def record(handle: str, via: str, pages: list[dict[str, Any]], query: str | None, site: str) -> None:
            kb.record_read(handle, via, pages, query, backend=site)

        cls = ConfluenceSearcher if backend == "confluence" else PlaneSearcher
        return cls(company_of(node), recorder=record)
    from .search.native import NativeSearcher

    return NativeSearcher(node, **native_options)


def is_remote(searcher_or_company: Any) -> bool:
    """A searcher over a remote site (no local copy), or a company whose knowledge lives on one."""
    if isinstance(searcher_or_company, Company):
        return remote_site(searcher_or_company) is not None
    return getattr(searcher_or_company, "local_copy", True) is False


def label(company: Company) -> str:
    """"Confluence", "Plane", or "" for this node's own copy."""
    site = remote_site(company)
    return site.label if site is not None else ""


def where(company: Company) -> str:
    """Where the knowledge lives, in words: "this node's copy", or "Confluence at https://…"."""
    site = remote_site(company)
    return site.where if site is not None else LOCAL


def elsewhere(company: Company, what: str = "", *, write: bool = False) -> KnowledgeElsewhere | None:
    """The refusal of a command or tool that would list (or, write=True, write) this node's own copy of
    knowledge that lives on a remote site; None when the knowledge is here. The surface adds its advice."""
    site = remote_site(company)
    return site.refusal(what, write=write) if site is not None else None


class FollowingSearcher:
    """The searcher knowledge.backend names, made on first use (by any thread: one is made) and made again
    when an edit of company.toml moves the knowledge — to or from a remote site, or between sites. native
    and none are both answered by the native searcher, so nothing is made again between them (its model
    stays loaded). A `factory` (tests) makes the one searcher, which then follows nothing."""

    def __init__(self, node: Node, factory: Callable[[Any], Any] | None = None) -> None:
        self.node = node
        self._factory = factory
        self._searcher: Any = None
        self._lock = threading.Lock()

    def get(self) -> Any:
        with self._lock:
            if self._searcher is not None and self._factory is None and self._moved():
                stale, self._searcher = self._searcher, None
                _close(stale)
            if self._searcher is None:
                self._searcher = (self._factory or make_searcher)(self.node)
            return self._searcher

    @property
    def made(self) -> Any:
        """The searcher if one was made (None: none was, and none is made by asking this)."""
        with self._lock:
            return self._searcher

    def _moved(self) -> bool:
        self.node.refresh_config()
        return searcher_backend(self.node.company.knowledge.backend) != self._searcher.backend()

    def close(self) -> None:
        with self._lock:
            searcher, self._searcher = self._searcher, None
        _close(searcher)


def _close(searcher: Searcher) -> None:
    closer = getattr(searcher, "close", None)
    if callable(closer):
        closer()


def onboarding_pages(node: Node, searcher: Callable[[], Any]) -> Callable[[str, str], Any]:
    """Where an agent's Onboarding pages are found (core.agents.onboarding's page_of): in this node's
    copy, or, when the company's knowledge lives on a Confluence or Plane site, on that site as the agent
    may read it (`searcher()`: the searcher that follows the backend) — the page get_page then opens. A
    site that cannot say raises, so a chain is never taken to be empty because the site was down."""
    from .agents.onboarding import ONBOARDING_TITLE, ChainPage, local_onboarding_page

    def page_of(space: str, agent: str) -> ChainPage | None:
        node.refresh_config()
        current = searcher() if remote_site(node.company) is not None else None
        if current is None or not is_remote(current):
            return local_onboarding_page(node, space)
        page = current.titled(space, ONBOARDING_TITLE, agent)
        return None if page is None else ChainPage(space, page.id, page.title, int(page.version or 0))

    return page_of
