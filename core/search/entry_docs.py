"""Entries as documents of the search: one more kind of document behind the one Searcher seam, beside pages.

An entry (spec 003) is indexed and embedded as a document of its own whose id is `entry:<entry id>` — in the
keyword index (the indexer), in the vector log (the embedding duty, `vector.put` of kind `entry`) and so in
every ranking and fusion, which merge documents by id. The prefix is what tells the hit assembly that a ranked
id is an entry and not a page, without a second lookup, and keeps the two id spaces apart.

What an entry's document holds: its body alone (no title: its page's title on every one of a page's entries
would rank them all for the page's topic word, crowding the pages out) in its page's container, so the access
policy's masks apply to it as to its page. An entry is a document while it is in the bank — not ARCHIVED or
SUPERSEDED — and its page is not in the trash; a hit shows it to a person in any of those statuses, and to an
agent only in use (STANDING, CONSOLIDATED: spec 003's "served to agents").
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from ..pages.entry_model import CONSOLIDATED, IN_USE, OUT_OF_USE


class Ranked(Protocol):
    """What `below_their_pages` reads of a hit (a search's Hit has it)."""

    page_id: str
    entry_id: str | None
    entry_status: str | None


H = TypeVar("H", bound=Ranked)

PREFIX = "entry:"
ENTRY_URL = "#/knowledge/entries/{id}"
KIND = "entry"              # the vector log's `kind` of an entry's vector (a page's is "page")
# SQL: an entry still in the bank (what is indexed and embedded)
IN_BANK_SQL = f"status NOT IN ({', '.join(repr(s) for s in OUT_OF_USE)})"


def doc_id(entry_id: str) -> str:
    """The document id of an entry, in every index and ranking."""
    return PREFIX + entry_id


def entry_of(doc: str) -> str | None:
    """The entry id a document id names, or None for a page."""
    return doc[len(PREFIX):] if doc.startswith(PREFIX) else None


def entry_url(entry_id: str) -> str:
    return ENTRY_URL.format(id=entry_id)


def in_bank(status: str) -> bool:
    return status not in OUT_OF_USE


def serves(status: str, *, agent: bool) -> bool:
    """May a hit show an entry of `status` to this searcher? An agent: in use only; a person: in the bank."""
    return status in IN_USE if agent else in_bank(status)


_ROW = ("SELECT e.id AS entry_id, e.page_id, e.kind AS entry_kind, e.body AS entry_body, e.status AS entry_status, "
        "e.version AS entry_version, p.container, p.title, p.trashed_at, p.parent_id FROM entries e "
        "JOIN pages p ON p.id = e.page_id")


def rows_by_id(conn: Any, entry_ids: Sequence[str]) -> dict[str, Any]:
    """Each entry that exists with its page's place (container, title, trashed_at, parent_id), by entry id."""
    out: dict[str, Any] = {}
    ids = list(entry_ids)
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        marks = ",".join("?" * len(chunk))
        out.update((r["entry_id"], r) for r in conn.execute(f"{_ROW} WHERE e.id IN ({marks})", chunk))
    return out


def changed_since(conn: Any, seq: int, upto: int | None = None) -> list[Any]:
    """Entries whose row changed after log position `seq` (through `upto`), with their page's place."""
    if upto is None:
        return conn.execute(f"{_ROW} WHERE e.version > ? ORDER BY e.version, e.id", (seq,)).fetchall()
    return conn.execute(f"{_ROW} WHERE e.version > ? AND e.version <= ? ORDER BY e.version, e.id",
                        (seq, upto)).fetchall()


def of_pages(conn: Any, page_ids: Sequence[str]) -> list[Any]:
    """The entries under these pages, with their page's place (a page moved, trashed or restored moves them)."""
    out: list[Any] = []
    ids = list(page_ids)
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        marks = ",".join("?" * len(chunk))
        out += conn.execute(f"{_ROW} WHERE e.page_id IN ({marks})", chunk).fetchall()
    return out


def every(conn: Any) -> list[Any]:
    """Every entry in the bank under a live page (a first build's, after the pages)."""
    return conn.execute(f"{_ROW} WHERE e.{IN_BANK_SQL} AND p.trashed_at IS NULL ORDER BY e.id").fetchall()


def indexable(row: Any) -> bool:
    """Is this entry row (with its page's place) a document now?"""
    return in_bank(row["entry_status"]) and row["trashed_at"] is None


def change_since(conn: Any, seq: int) -> bool:
    """Has an entry row changed after `seq` (what the keyword index derives moved)?"""
    return conn.execute("SELECT EXISTS(SELECT 1 FROM entries WHERE version > ?)", (seq,)).fetchone()[0] == 1


def below_their_pages(hits: Sequence[H]) -> list[H]:
    """A CONSOLIDATED entry ranks below its page (spec 003, "Consolidation": evidence for the page, whose body says
    it): one ranked above its page's hit moves to just after it, the page's evidence in the order it came; one
    whose page is not among the hits keeps its place."""
    later = {h.page_id for h in hits if not h.entry_id}
    out: list[H] = []
    waiting: dict[str, list[H]] = {}
    for h in hits:
        page_id = h.page_id
        if h.entry_id:
            if h.entry_status == CONSOLIDATED and page_id in later:
                waiting.setdefault(page_id, []).append(h)
                continue
            out.append(h)
            continue
        out.append(h)
        later.discard(page_id)
        out.extend(waiting.pop(page_id, []))
    return out
