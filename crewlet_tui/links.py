"""Which links a rendered page may follow.

A page is often written by an agent acting on content it read somewhere else, so an href in one is
untrusted input. Followed: http(s) and mailto (handed to the system, never opened in a test), and
the app's own routes — `#/knowledge/pages/<id>` and `/pages/<id>` — which open that page in the app.
Everything else (javascript:, file:, data:, relative paths, unknown schemes) is inert.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

_APP_ROUTE = re.compile(r"^(?:#/knowledge/pages/|/pages/)(?P<id>[A-Za-z0-9_-]{4,64})/?(?:[?#].*)?$")
_EXTERNAL = ("http", "https", "mailto")


@dataclass(frozen=True)
class LinkTarget:
    kind: str          # "page" | "external" | "inert"
    value: str         # the page id, the URL, or why it is not followed


def classify(href: str) -> LinkTarget:
    href = (href or "").strip()
    m = _APP_ROUTE.match(href)
    if m:
        return LinkTarget("page", m.group("id"))
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in href):
        return LinkTarget("inert", "the link holds control characters")
    try:
        scheme = urlsplit(href).scheme.lower()
    except ValueError:
        return LinkTarget("inert", "the link is not a well-formed address")
    if scheme in _EXTERNAL:
        if scheme != "mailto" and not urlsplit(href).netloc:
            return LinkTarget("inert", "the link names no host")
        return LinkTarget("external", href)
    if not scheme:
        return LinkTarget("inert", "a relative link is not a page route (link pages by id: #/knowledge/pages/<id>)")
    return LinkTarget("inert", f"links with the {scheme}: scheme are not followed")
