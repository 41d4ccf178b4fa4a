"""Links between pages, by id: `/pages/<id>` or the app's `#/knowledge/pages/<id>`, outside code.

A title is an address a rename moves, so a link is by id. `[[CONTAINER/Title]]` is not a grammar
this engine reads: it counts for nothing in "Linked from".
"""
from __future__ import annotations

import re

_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,}).*?$.*?^(?P=fence)[`~]*\s*$", re.M | re.S)
_INDENTED = re.compile(r"(?:^(?: {4}|\t).*(?:\n|$))+", re.M)
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
_LINK = re.compile(r"(?:#/knowledge/pages/|(?<![\w#/])/pages/)(?P<id>[A-Za-z0-9_-]{4,64})")


def strip_code(body: str) -> str:
    """The body with fenced blocks, indented blocks and inline code removed."""
    body = _FENCE.sub("", body)
    body = _INLINE_CODE.sub("", body)
    return _INDENTED.sub("", body)


def extract_links(body: str) -> set[str]:
    """Every page id the body links to, outside code."""
    return {m.group("id") for m in _LINK.finditer(strip_code(body))}


def link_to(page_id: str, title: str) -> str:
    """The Markdown a writer should use to link a page: by id, rendered by title."""
    return f"[{title}](#/knowledge/pages/{page_id})"
