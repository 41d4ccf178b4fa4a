"""From ranked page ids to hits: every candidate checked against the current rows, then titled, placed
in its outline and given a snippet — in one place, whichever retriever (or fusion of them) ranked it.

The walk accepts candidates in rank order until `limit` are accepted: a candidate the rows no longer
admit (trashed or purged since an index caught up, moved out of scope, beneath an excluded ancestor)
costs a result its page, never a place.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..pages import reads
from ..pages.service import KnowledgeBase
from . import entry_docs
from .access import Access
from .seam import SNIPPET_MAX, Hit
from .snippets import TermFinder, plain_text, snippet

if TYPE_CHECKING:
    from ..node import Node

PAGE_URL = "#/knowledge/pages/{id}"
TEXT_CACHE_CHARS = 16_000_000     # plain texts kept for snippets, keyed on (page id, row version)


def page_url(page_id: str) -> str:
    return PAGE_URL.format(id=page_id)


@dataclass
class Accepted:
    row: Any                      # the page's row (an entry's: the page it is under)
    score: float
    ancestors: list[str]
    entry: Any = None             # an entry's row (entry_docs.rows_by_id), None for a page

    @property
    def doc_id(self) -> str:
        """The ranked document: the page's id, or `entry:<id>`."""
        return entry_docs.doc_id(self.entry["entry_id"]) if self.entry is not None else self.row["id"]


class HitAssembler:
    """Used under the searcher's lock (one search at a time); reads rows under the node's lock."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self._texts: OrderedDict[tuple[str, int], str] = OrderedDict()
        self._text_chars = 0
        self._kb: Any = None

    def accept(self, candidates: Sequence[tuple[str, float]], access: Access, limit: int,
               accepted: list[Accepted] | None = None, seen: set[str] | None = None) -> list[Accepted]:
        """Walk `candidates` (best first) until `limit` are accepted. `accepted`/`seen` carry a walk on
        over a deeper read of the same ranking."""
        accepted = [] if accepted is None else accepted
        seen = set() if seen is None else seen
        chains: dict[str, list[str]] = {}
        fresh = [(pid, score) for pid, score in candidates if pid not in seen]
        step = max(16, 2 * limit)
        for start in range(0, len(fresh), step):
            if len(accepted) >= limit:
                break
            batch = fresh[start:start + step]
            seen.update(pid for pid, _ in batch)
            with self.node.lock:
                entries = entry_docs.rows_by_id(self.node.conn, [e for pid, _ in batch
                                                                 if (e := entry_docs.entry_of(pid)) is not None])
                pages = {e["page_id"] for e in entries.values()}
                rows = reads.by_id(self.node.conn, [pid for pid, _ in batch if entry_docs.entry_of(pid) is None]
                                   + sorted(pages))
                for pid, score in batch:
                    if len(accepted) >= limit:
                        break
                    entry_id = entry_docs.entry_of(pid)
                    entry = entries.get(entry_id) if entry_id is not None else None
                    if entry_id is not None and (entry is None
                                                 or not entry_docs.serves(entry["entry_status"], agent=access.is_agent)):
                        continue  # gone, out of the bank since the ranking was read, or not served to this searcher
                    row = rows.get(entry["page_id"] if entry is not None else pid)
                    if row is None:
                        continue  # purged since the ranking was read
                    ancestors = chains.get(row["parent_id"] or "")
                    if ancestors is None:  # siblings share their chain: walked once per parent per search
                        ancestors = [a["title"] for a in self._knowledge_base().ancestors(row["parent_id"])]
                        chains[row["parent_id"] or ""] = ancestors
                    if access.admits(row, ancestors):
                        accepted.append(Accepted(row, score, ancestors, entry))
        return accepted

    def hits(self, accepted: list[Accepted], finder: TermFinder | None) -> list[Hit]:
        """The hits, each with a snippet around its first matched term, or its opening when none matches
        (a page found by meaning need not hold any of the query's words)."""
        texts = self._plain_texts([a.row for a in accepted if a.entry is None])
        out = []
        for a in accepted:
            if a.entry is not None:
                e = a.entry
                out.append(Hit(title=a.row["title"], url=entry_docs.entry_url(e["entry_id"]),
                               container=a.row["container"], page_id=a.row["id"],
                               snippet=_snippet(plain_text(e["entry_body"]), finder), ancestors=a.ancestors,
                               score=round(a.score, 6), entry_id=e["entry_id"], entry_kind=e["entry_kind"],
                               entry_status=e["entry_status"]))
                continue
            text = texts.get(a.row["id"], "")
            out.append(Hit(title=a.row["title"], url=page_url(a.row["id"]), container=a.row["container"],
                           page_id=a.row["id"], snippet=_snippet(text, finder), ancestors=a.ancestors,
                           score=round(a.score, 6)))
        return entry_docs.below_their_pages(out)     # a consolidated entry is evidence for its page: below it

    def _plain_texts(self, rows: list[Any]) -> dict[str, str]:
        """Each accepted page's plain text, from a cache keyed on (page id, row version)."""
        out: dict[str, str] = {}
        missing = []
        for row in rows:
            key = (row["id"], row["version"])
            text = self._texts.get(key)
            if text is None:
                missing.append(row["id"])
            else:
                self._texts.move_to_end(key)
                out[row["id"]] = text
        if missing:
            with self.node.lock:
                found = reads.bodies(self.node.conn, missing)
            for r in found:
                text = plain_text(r["body"])
                out[r["id"]] = text
                self._texts[(r["id"], r["version"])] = text
                self._text_chars += len(text)
            while self._text_chars > TEXT_CACHE_CHARS and self._texts:
                _, old = self._texts.popitem(last=False)
                self._text_chars -= len(old)
        return out

    def _knowledge_base(self) -> Any:
        """The KnowledgeBase over this node (ancestors, reads): the one walk of the outline crewlet has."""
        if self._kb is None:
            self._kb = KnowledgeBase(self.node)
        return self._kb

    def record_read(self, handle: str, hits: list[Hit], text: str) -> None:
        """An agent's search is one knowledge_read event listing the hits it was shown."""
        self._knowledge_base().record_read(
            handle, "search", [{"id": h.page_id, "container": h.container, "title": h.title} for h in hits],
            query=text)


# a finder with no terms: a snippet without a matched term is the page's opening
_NO_TERMS = TermFinder((), lambda word: ())


def _snippet(text: str, finder: TermFinder | None) -> str:
    return snippet(text, finder or _NO_TERMS, limit=SNIPPET_MAX)
