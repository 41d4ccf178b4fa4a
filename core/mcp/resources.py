"""Pages as MCP resources: `crewlet://pages/<id>`, listed space by space.

A client that browses resources lists every live page (ordered by space, then address, in windows of
500 with a cursor) and attaches one to a conversation by reading it. An agent's read of a resource is
a read of the page in full, recorded as get_page records it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from ..errors import NotFound
from ..pages.model import WINDOW_MAX
from .session import Session
from .tools.get_page import page_reply

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
    """The page in full as Markdown (the same text get_page gives), and its facts."""
    session.index_catch_up()
    page = session.kb.get_page(page_id_of(uri), actor=session.handle)
    reply = page_reply(session, page)
    return reply.text, reply.data
