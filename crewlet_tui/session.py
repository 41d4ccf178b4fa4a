"""What the app holds while it runs: the home, the open node, the knowledge base and the searcher.

The app is thin over core: every read and write is a KnowledgeBase call (which takes the node's lock,
so the app's thread workers can share the one connection), and every search goes through the Searcher
seam. Nothing here speaks SQL.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.config import Actor
from core.node import Node
from core.pages import rules
from core.pages.service import KnowledgeBase
from core.paths import Home
from core.search.native import NativeSearcher
from core.search.seam import MODES, NOT_SEARCHABLE_YET, UNAVAILABLE, Outcome, Query, Result

__all__ = ["Session", "make_searcher", "safe_search", "is_not_searchable_yet"]


def make_searcher(node: Node) -> Any:
    """The native searcher over this node's own copy."""
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
    searcher: Any = None
    kb: KnowledgeBase = field(init=False)

    def __post_init__(self) -> None:
        self.kb = KnowledgeBase(self.node)
        if self.searcher is None:
            self.searcher = make_searcher(self.node)

    @classmethod
    def open(cls, home: Home, actor: str | None = None,
             searcher_factory: Callable[[Node], Any] | None = None) -> "Session":
        node = Node.open(home)
        try:
            handle = actor or node.company.operator
            if handle:  # an unknown actor, or one without the knowledge app, is told so before any page shows
                rules.require_knowledge(node.company, node.company.actor(handle))
            searcher = (searcher_factory or make_searcher)(node)
            return cls(home, node, actor, searcher)
        except Exception:
            node.close()
            raise

    # -- who is acting ---------------------------------------------------------------------
    @property
    def handle(self) -> str | None:
        return self.actor_handle or self.node.company.operator

    def who(self) -> Actor | None:
        handle = self.handle
        if not handle:
            return None
        try:
            return self.node.company.actor(handle)
        except Exception:  # an unknown --as: the engine refuses each write with the reason
            return None

    @property
    def is_admin(self) -> bool:
        who = self.who()
        return bool(who and who.admin and not who.is_agent)

    def close(self) -> None:
        closer = getattr(self.searcher, "close", None)
        if callable(closer):
            try:
                closer()
            except Exception:  # pragma: no cover
                pass
        self.node.close()
