"""What the app holds while it runs: the home, the open node, the knowledge base and the searcher.

The app is thin over core: every read and write is a KnowledgeBase call (which takes the node's lock,
so the app's thread workers can share the one connection), and every search goes through the Searcher
seam. Nothing here speaks SQL.

The searcher (and the search engine's imports: numpy, Whoosh, the semantic engine) is made on first
use, not when the home opens: the app's first screen needs the knowledge base alone, and the app warms
the searcher up in the background once that screen is shown.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.config import Actor
from core.node import Node
from core.pages import rules
from core.pages.service import KnowledgeBase
from core.paths import Home
from core.search.seam import MODES, NOT_SEARCHABLE_YET, UNAVAILABLE, Outcome, Query, Result

if TYPE_CHECKING:
    from core.bank.entries import EntryBank
    from core.search.seam import Searcher

__all__ = ["Session", "make_searcher", "safe_search", "is_not_searchable_yet"]


def make_searcher(node: Node) -> Any:
    """The searcher knowledge.backend names: this node's own copy, or a remote site searched live."""
    from core.knowledge import make_searcher as choose

    return choose(node)


def safe_search(searcher: Searcher, query: Query) -> Result:
    """The seam promises search() never raises; the app keeps that promise even if a backend breaks it."""
    try:
        return searcher.search(query)
    except Exception as exc:  # noqa: BLE001 - turned into an answer, as the seam says
        return Result([], Outcome(served_mode=None, modes=list(MODES), degraded=UNAVAILABLE,
                                  message=f"the search failed: {exc}"))


def is_not_searchable_yet(outcome: Outcome) -> bool:
    return outcome.degraded == NOT_SEARCHABLE_YET


@dataclass
class Session:
    home: Home
    node: Node
    actor_handle: str | None = None
    searcher_factory: Callable[[Node], Any] | None = None
    kb: KnowledgeBase = field(init=False)
    _follow: Any = field(init=False, default=None)
    _bank: Any = field(init=False, default=None)
    _bank_lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        from core.knowledge import FollowingSearcher

        self.kb = KnowledgeBase(self.node)
        # made on first use, and again when an edit of company.toml moves the knowledge (core.knowledge's
        # one rule, which crewlet mcp follows too); a factory (tests) makes the one searcher
        self._follow = FollowingSearcher(self.node, self.searcher_factory)

    @property
    def searcher(self) -> Any:
        """The Searcher knowledge.backend names, as core.knowledge keeps it (a live change re-points it)."""
        return self._follow.get()

    @property
    def bank(self) -> EntryBank:
        """The node's entries (core.bank), made on first use: a screen's thread workers share it, and the git
        processes it opens for the configured repositories (read when an entry's cited files are looked at) end
        when the session closes."""
        with self._bank_lock:
            if self._bank is None:
                from core.bank.entries import EntryBank

                self._bank = EntryBank(self.node)
                # its repositories made now, under this lock: two workers reading cited files at once would each
                # open a set, and one set's git processes would outlive the session (they start at a first read)
                self._bank.repositories  # noqa: B018
            return self._bank

    @property
    def remote(self) -> str | None:
        """The remote backend the company's knowledge lives in ("confluence", "plane"), None for this node's own."""
        from core.knowledge import remote_site

        site = remote_site(self.node.company)
        return site.backend if site is not None else None

    def where(self) -> str:
        """Where the knowledge lives, in words: "this node's copy", or "Confluence at https://…" (read off the
        configuration, so no searcher is made for it)."""
        from core.knowledge import where

        return where(self.node.company)

    @property
    def remote_label(self) -> str:
        from core.knowledge import label

        return label(self.node.company)

    def knowledge_home(self) -> str:
        """Where the knowledge lives, for the status line."""
        if self.remote is None:
            return "this node's copy"
        return f"knowledge in {self.where()} — searched live, no local copy"

    @classmethod
    def open(cls, home: Home, actor: str | None = None,
             searcher_factory: Callable[[Node], Any] | None = None) -> Session:
        node = Node.open(home)
        try:
            if actor or node.company.operator:  # an unknown actor, or one without the knowledge app, is told
                rules.acting(node.company, actor, knowledge=True)   # so before any page shows
            return cls(home, node, actor, searcher_factory)
        except Exception:
            node.close()
            raise

    # -- who is acting ---------------------------------------------------------------------
    @property
    def handle(self) -> str | None:
        return self.actor_handle or self.node.company.operator

    def who(self) -> Actor | None:
        if not self.handle:
            return None
        try:
            return rules.acting(self.node.company, self.handle)
        except Exception:  # an unknown --as: the engine refuses each write with the reason
            return None

    @property
    def is_admin(self) -> bool:
        who = self.who()
        return bool(who and who.admin and not who.is_agent)

    def close(self) -> None:
        try:
            self._follow.close()    # never made: nothing to close (and nothing is made now)
        except Exception:  # pragma: no cover
            pass
        with self._bank_lock:
            if self._bank is not None:
                self._bank.close()
                self._bank = None
        self.node.close()
