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
    """The searcher knowledge.backend names: this node's own copy, or a remote site searched live."""
    from core.knowledge import make_searcher as choose

    return choose(node)


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
        """The Searcher, made on first use (by any thread: one is made), and made again when an edit of
        company.toml moved knowledge.backend (a live change re-points the app at the new home)."""
        with self._searcher_lock:
            if self._searcher is not None and self.searcher_factory is None and self._backend_moved():
                stale, self._searcher = self._searcher, None
                closer = getattr(stale, "close", None)
                if callable(closer):
                    closer()
            if self._searcher is None:
                self._searcher = (self.searcher_factory or make_searcher)(self.node)
            return self._searcher

    def _backend_moved(self) -> bool:
        self.node.refresh_config()
        backend = self.node.company.knowledge.backend
        current = self._searcher.backend()
        return backend != current and not (backend == "none" and current == "native")

    @property
    def remote(self) -> str | None:
        """The remote backend the company's knowledge lives in ("confluence", "plane"), None for this node's own."""
        from core.config import REMOTE_BACKENDS

        backend = self.node.company.knowledge.backend
        return backend if backend in REMOTE_BACKENDS else None

    def where(self) -> str:
        """Where the knowledge lives, in words: "this node's copy", or "Confluence at https://…" (read off the
        configuration, so no searcher is made for it)."""
        backend = self.remote
        if backend is None:
            return "this node's copy"
        settings = getattr(self.node.company.integrations, backend)
        return f"{self.remote_label} at {settings.url}" if settings is not None else self.remote_label

    @property
    def remote_label(self) -> str:
        return {"confluence": "Confluence", "plane": "Plane"}.get(self.remote or "", "")

    def knowledge_home(self) -> str:
        """Where the knowledge lives, for the status line."""
        if self.remote is None:
            return "this node's copy"
        return f"knowledge in {self.where()} — searched live, no local copy"

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
