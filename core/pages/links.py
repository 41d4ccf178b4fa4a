"""Links between pages, by id: `/pages/<id>` or the app's `#/knowledge/pages/<id>`, outside code.

A title is an address a rename moves, so a link is by id. `[[CONTAINER/Title]]` is not a grammar
this engine reads: it counts for nothing in "Linked from".

The backlinks (`page_links`, this node's own: derived from the bodies by the keyword-index duty, never
replicated) are written here and nowhere else: a changed page's links derived again, a first build's
chunk of rows at once, the links of pages purged or gone dropped.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,}).*?$.*?^(?P=fence)[`~]*\s*$", re.M | re.S)
_LIST_ITEM = re.compile(r"^ {0,3}(?:[-+*]|\d{1,9}[.)])(?:[ \t]|$)")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
_LINK = re.compile(r"(?:#/knowledge/pages/|(?<![\w#/])/pages/)(?P<id>[A-Za-z0-9_-]{4,64})")


def _strip_indented(body: str) -> str:
    """Indented code blocks as CommonMark reads them: lines indented four spaces (or a tab) that
    follow a blank line — an indented line cannot interrupt a paragraph — and are not inside a list,
    where indentation nests an item rather than starting code."""
    out: list[str] = []
    after_blank, in_list, in_code = True, False, False
    for line in body.split("\n"):
        blank = not line.strip()
        indented = line.startswith(("    ", "\t"))
        if in_code and (blank or indented):
            out.append("")
            continue
        in_code = False
        if indented and not blank and after_blank and not in_list:
            in_code = True
            out.append("")
            continue
        if not blank and not indented:
            if _LIST_ITEM.match(line):
                in_list = True
            elif after_blank:
                in_list = False  # a paragraph after a blank line ends the list
        after_blank = blank
        out.append(line)
    return "\n".join(out)


def strip_code(body: str) -> str:
    """The body with fenced blocks, indented blocks and inline code removed."""
    body = _FENCE.sub("", body)
    body = _INLINE_CODE.sub("", body)
    return _strip_indented(body)


def extract_links(body: str) -> set[str]:
    """Every page id the body links to, outside code."""
    if "/pages/" not in body:  # both link forms hold it; most bodies link no page, and code is costly to strip
        return set()
    return {m.group("id") for m in _LINK.finditer(strip_code(body))}


def links_from(page_id: str, body: str) -> list[str]:
    """The pages `page_id`'s body links to, sorted, the page itself left out."""
    dsts = extract_links(body)
    dsts.discard(page_id)
    return sorted(dsts)


_INSERT = "INSERT OR IGNORE INTO page_links (src, dst) VALUES (?, ?)"


def store_links(conn: Any, rows: Iterable[Any], purged: Iterable[str] = ()) -> int:
    """Derive again the links of each changed row (id, body) — a trashed page's are kept: the backlinks
    listing hides trashed sources, and a restore needs them back — and drop every link from or to a
    purged page; inside the caller's transaction. Returns the rows derived."""
    n = 0
    for r in rows:
        n += 1
        conn.execute("DELETE FROM page_links WHERE src = ?", (r["id"],))
        dsts = links_from(r["id"], r["body"])
        if dsts:
            conn.executemany(_INSERT, [(r["id"], d) for d in dsts])
    for page_id in purged:
        conn.execute("DELETE FROM page_links WHERE src = ? OR dst = ?", (page_id, page_id))
    return n


def store_range_links(conn: Any, lo: str, hi: str | None, links: list[tuple[str, list[str]]]) -> int:
    """A first build's chunk: the links of every row with lo < id <= hi (hi None: to the end) replaced by
    `links` ((src, sorted dsts) for the rows that link anywhere); inside the caller's transaction."""
    if hi is None:
        conn.execute("DELETE FROM page_links WHERE src > ?", (lo,))
    else:
        conn.execute("DELETE FROM page_links WHERE src > ? AND src <= ?", (lo, hi))
    conn.executemany(_INSERT, [(src, dst) for src, dsts in links for dst in dsts])
    return len(links)


def drop_orphan_links(conn: Any) -> None:
    """Links whose source page is gone (purged before or during a build)."""
    conn.execute("DELETE FROM page_links WHERE src NOT IN (SELECT id FROM pages)")


def link_to(page_id: str, title: str) -> str:
    """The Markdown a writer should use to link a page: by id, rendered by title."""
    return f"[{title}](#/knowledge/pages/{page_id})"
