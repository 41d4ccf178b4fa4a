"""Pages as MCP resources: `crewlet://pages/<id>`, listed space by space.

A client that browses resources lists every live page (ordered by space, then address, in windows of
500 with a cursor) and attaches one to a conversation by reading it. An agent's read of a resource is
a read of the page in full, recorded as get_page records it. On a company whose knowledge lives on a
remote site nothing is listed (this node keeps no copy to list) and a resource reads the site's page
by the id a search gave, as get_page does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from ..errors import NotFound
from ..pages.model import WINDOW_MAX
from .session import Session
from .tools import get_page

SCHEME = "crewlet://pages/"
TEMPLATE = SCHEME + "{id}"
MIME = "text/markdown"


@dataclass
class Listed:
    uri: str
    name: str            # SPACE/Title: unique, and what a person picks from
    title: str
    description: str


def page_uri(page_id: str) -> str:
    return SCHEME + page_id


def listing(session: Session, cursor: str | None) -> tuple[list[Listed], str | None]:
    if session.remote:   # a remote site's pages are not listed from here: a hit's id reads as a resource
        return [], None
    pages, next_cursor = session.kb.catalogue(after=cursor, limit=WINDOW_MAX, actor=session.handle)
    names = {s["key"]: s["name"] for s in session.kb.spaces(actor=session.handle)} if pages else {}
    out = []
    for p in pages:
        space = names.get(p.container, p.container)
        kind = "folder" if p.is_folder else "page"
        out.append(Listed(page_uri(p.id), f"{p.container}/{p.title}", p.title,
                          f"A {kind} in {space} ({p.container}), revision {p.revision}"))
    return out, next_cursor


def page_id_of(uri: str) -> str:
    if not uri.startswith(SCHEME) or len(uri) == len(SCHEME):
        raise NotFound(f"'{uri}' is not a page resource — a page is {TEMPLATE}", code="not_found")
    return unquote(uri[len(SCHEME):])


def read(session: Session, uri: str) -> tuple[str, dict[str, Any]]:
    """The page in full as Markdown (the same text get_page gives — a remote site's page read there), and
    its facts."""
    reply = get_page.read(session, page_id_of(uri))
    return reply.text, reply.data
