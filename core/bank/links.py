"""What a page is about (`crewlet page link REF --module apps/server | --space ENG | --page REF`): the
`page.about` records (core/pages/entry_handlers.py) read back — a page's links, and the pages linked to a work
area's modules, which load_context serves first (spec 003, "Pages linked to items")."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..repos.modules import Scope, scope_matches

MODULE, SPACE, PAGE = "module", "space", "page"


@dataclass(frozen=True)
class PageLink:
    """One item a page is linked to: `kind` module | space | page, `item` a scope, a space key or a page id;
    `label` what a person reads (a linked page's CONTAINER/Title)."""

    kind: str
    item: str
    label: str
    by: str
    at: int

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "item": self.item, "label": self.label, "by": self.by, "at": self.at}


@dataclass(frozen=True)
class LinkedPage:
    """A live page linked to a module that holds, or lies within, the asked work area."""

    page_id: str
    page: str          # CONTAINER/Title
    item: str          # the module's scope it is linked through


_NOW = ("SELECT a.* FROM page_about a WHERE a.linked = 1 AND a.seq = (SELECT MAX(b.seq) FROM page_about b "
        "WHERE b.page_id = a.page_id AND b.item_kind = a.item_kind AND b.item = a.item)")


def stored_scope(text: str) -> Scope:
    """A module's scope as a link stores it (`NAME:folder`, or a bare folder where no repository was named)."""
    name, sep, folder = text.partition(":")
    return Scope(name, folder) if sep else Scope(None, text)


def page_links(conn: Any, page_id: str) -> list[PageLink]:
    rows = conn.execute(_NOW + " AND a.page_id = ? ORDER BY a.item_kind, a.item", (page_id,)).fetchall()
    out = []
    for r in rows:
        label = r["item"]
        if r["item_kind"] == PAGE:
            target = conn.execute("SELECT container, title FROM pages WHERE id = ?", (r["item"],)).fetchone()
            label = f"{target['container']}/{target['title']}" if target is not None else f"{r['item']} (gone)"
        out.append(PageLink(r["item_kind"], r["item"], label, r["set_by"], r["set_at"]))
    return out


def linked_pages(conn: Any, scopes: Iterable[Scope]) -> list[LinkedPage]:
    """Live pages linked to a module whose folder holds, or lies within, one of `scopes` (the nearest-linked
    first: a module deeper in the tree, then the page's address), each page once."""
    wanted: Sequence[Scope] = list(scopes)
    if not wanted:
        return []
    rows = conn.execute(_NOW.replace("SELECT a.*", "SELECT a.page_id, a.item, p.container, p.title")
                        .replace("FROM page_about a", "FROM page_about a JOIN pages p ON p.id = a.page_id")
                        + " AND a.item_kind = ? AND p.trashed_at IS NULL", (MODULE,)).fetchall()
    found: dict[str, tuple[int, LinkedPage]] = {}
    for r in rows:
        scope = stored_scope(r["item"])
        if not any(scope_matches(scope, area) for area in wanted):
            continue
        depth = -len([p for p in scope.folder.split("/") if p])
        page = LinkedPage(r["page_id"], f"{r['container']}/{r['title']}", r["item"])
        if r["page_id"] not in found or depth < found[r["page_id"]][0]:
            found[r["page_id"]] = (depth, page)
    return [p for _d, p in sorted(found.values(), key=lambda dp: (dp[0], dp[1].page))]
