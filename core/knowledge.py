"""The one place a Searcher is chosen: by knowledge.backend.

`crewlet search`, the app's search screen and every later consumer (MCP tools, `crewlet ask`) search
through what this returns, so "what do we already know" has one answer per company. native (and none,
which the native searcher answers with "this company does not search") searches this node's own copy;
confluence and plane search the company's site live, reading the configuration current at each call.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .config import Company


def company_of(node: Any) -> Callable[[], Company]:
    """The node's configuration as it is now (one stat per call decides whether to read it again)."""

    def current() -> Company:
        node.refresh_config()
        return node.company

    return current


def make_searcher(node: Any, **native_options: Any) -> Any:
    """The searcher knowledge.backend names (native options go to NativeSearcher)."""
    backend = node.company.knowledge.backend
    if backend == "confluence":
        from .remote.confluence import ConfluenceSearcher

        return ConfluenceSearcher(company_of(node))
    if backend == "plane":
        from .remote.plane import PlaneSearcher

        return PlaneSearcher(company_of(node))
    from .search.native import NativeSearcher

    return NativeSearcher(node, **native_options)


def is_remote(searcher: Any) -> bool:
    return getattr(searcher, "local_copy", True) is False
