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
from typing import Any

from core.config import Actor
from core.node import Node
from core.pages import rules
from core.pages.service import KnowledgeBase
from core.paths import Home
from core.search.seam import MODES, NOT_SEARCHABLE_YET, UNAVAILABLE, Outcome, Query, Result

__all__ = ["Session", "make_searcher", "safe_search", "is_not_searchable_yet"]


def make_searcher(node: Node) -> Any:
    """The native searcher over this node's own copy."""
    from core.search.native import NativeSearcher

    return NativeSearcher(node)


def safe_search(searcher: Any, query: Query) -> Result:
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
    _searcher: Any = field(init=False, default=None)
    _searcher_lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.kb = KnowledgeBase(self.node)

    @property
    def searcher(self) -> Any:
        """The Searcher, made on first use (by any thread: one is made)."""
        with self._searcher_lock:
            if self._searcher is None:
                self._searcher = (self.searcher_factory or make_searcher)(self.node)
            return self._searcher

    @classmethod
    def open(cls, home: Home, actor: str | None = None,
             searcher_factory: Callable[[Node], Any] | None = None) -> "Session":
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
        with self._searcher_lock:
            searcher = self._searcher   # never made: nothing to close (and nothing to make now)
        closer = getattr(searcher, "close", None)
        if callable(closer):
            try:
                closer()
            except Exception:  # pragma: no cover
                pass
        self.node.close()
