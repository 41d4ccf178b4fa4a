"""Recalling what the bank knows about a question (spec 003, "What agents get": `recall_knowledge(question)`).

    with Node.open(home) as node:
        found = recall(node, "how long does the session cache hold?", actor="eng-bot")
        print(found.to_text())

The entries and pages that answer a question, found by the one hybrid search (entries are documents of it:
core/search/entry_docs.py), each entry with its trust tier — read at serve time, each cited file's blob at its
branch head compared with the one last checked, so an entry whose code changed since serves as UNGROUNDED —
and the page it stands under. HUMAN_VERIFIED and GROUNDED entries rank above the others (the other entries and
the pages, in the search's order). An agent is shown entries in use only (STANDING, CONSOLIDATED); a person
every entry still in the bank.

With a chat model configured (`[providers.llm]`) it is also an answer with [n] citations, written exactly as
`crewlet ask` writes one (core/ask/answer.py: the same sources — an entry's whole body is its one passage —,
prompt, citation check, cache and spend windows), over the hits in that order, so [n] is the n-th source.
Without one, the hits are the answer and a sentence says how to configure a model. Every entry given is
recorded as served (`entry.serve`, via recall_knowledge, with its rank).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..bank.entries import Entry, EntryBank
from ..bank.trust import GROUNDED, HUMAN_VERIFIED
from ..errors import CrewletError
from ..bank.gaps import note_gap
from .answer import NO_MATCH, Answer, Asker

if TYPE_CHECKING:
    from ..node import Node
    from ..search.seam import Hit, Searcher

VIA = "recall_knowledge"
TRUSTED = (HUMAN_VERIFIED, GROUNDED)


@dataclass
class Recalled:
    """One hit of a recall: a page, or an entry with its tier, citations' states and page."""

    rank: int
    hit: Hit
    entry: Entry | None = None
    source: int | None = None        # the [n] this hit is in the answer's sources, when it is one

    @property
    def trusted(self) -> bool:
        return self.entry is not None and self.entry.tier in TRUSTED

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rank": self.rank, "kind": "entry" if self.entry is not None else "page",
                               "page_id": self.hit.page_id, "page": self.hit.address, "snippet": self.hit.snippet,
                               "source": self.source}
        if self.entry is not None:
            e = self.entry
            out |= {"entry_id": e.id, "entry_kind": e.kind, "status": e.status, "tier": e.tier, "body": e.body,
                    "scope": e.scope, "citations": [c.to_json(_now()) for c in e.citations]}
        else:
            out |= {"title": self.hit.title}
        return out

    def line(self) -> str:
        mark = f"[{self.source}] " if self.source is not None else ""
        if self.entry is None:
            return f"{mark}page {self.hit.address} (id {self.hit.page_id}): {self.hit.snippet}"
        e = self.entry
        cited = "; ".join(f"citation {c.index}: {c.said(_now())}" for c in e.citations) or "cites nothing"
        return (f"{mark}{e.tier} · {e.kind} entry under {e.page} (entry {e.id}, {e.status}): "
                f"{' '.join(e.body.split())} — {cited}")


@dataclass
class Recall:
    question: str
    found: list[Recalled] = field(default_factory=list)
    answer: Answer | None = None

    def to_text(self) -> str:
        parts: list[str] = []
        if self.answer is not None and self.answer.written and self.answer.text.strip():
            parts.append(self.answer.text.strip())
            parts.append(("(cached) " if self.answer.cached else "") + self.answer.verdict())
        elif self.answer is not None and self.answer.reason:
            parts.append(self.answer.reason)
        if self.found:
            parts.append("What the bank holds on it, grounded and verified entries first:\n"
                         + "\n".join(r.line() for r in self.found))
        return "\n\n".join(p for p in parts if p)

    def to_json(self) -> dict[str, Any]:
        return {"question": self.question, "found": [r.to_json() for r in self.found],
                "answer": self.answer.to_json() if self.answer is not None else None}


def _now() -> int:
    from ..clock import calendar_now_ms

    return calendar_now_ms()


def trusted_first(hits: list[Hit], tiers: dict[str, str]) -> list[Hit]:
    """Grounded and verified entries first, then the rest (other entries and pages), each in the search's order."""
    return sorted(hits, key=lambda h: 0 if h.entry_id and tiers.get(h.entry_id) in TRUSTED else 1)


def recall(node: Node, question: str, actor: str | None = None, *, asker: Asker | None = None,
           searcher: Searcher | None = None, run: str | None = None) -> Recall:
    """What the bank holds on `question` for `actor` (agent or person), and the answer written from it where a
    chat model is configured. `asker`: one to share (the MCP session's), else one is made over `searcher`.
    Never from the answer cache: the tiers are read at serve time, and every serve is recorded — a kept answer
    could say neither. `run`: the agent run the serve is recorded against."""
    own = asker is None
    asker = asker or Asker(node, searcher)
    bank = EntryBank(node)
    entries: dict[str, Entry] = {}
    ranked: list[Hit] = []

    def rank(hits: list[Hit]) -> list[Hit]:
        for h in hits:
            if h.entry_id and h.entry_id not in entries:
                try:
                    entries[h.entry_id] = bank.show(h.entry_id, at_head=True, actor=actor)
                except CrewletError:          # gone since the search read it
                    continue
        kept = [h for h in hits if not h.entry_id or h.entry_id in entries]
        ranked[:] = trusted_first(kept, {k: e.tier for k, e in entries.items()})
        return list(ranked)

    try:
        answer = asker.answer(question, actor, agents=True, rank=rank, use_cache=False)
        sources = {(s.entry_id or s.page_id, bool(s.entry_id)): s.n for s in answer.sources}
        found = [Recalled(i, h, entries.get(h.entry_id) if h.entry_id else None,
                          sources.get((h.entry_id or h.page_id, bool(h.entry_id))))
                 for i, h in enumerate(ranked, 1)]
        if answer.status == NO_MATCH:       # nothing above the floor: a knowledge gap (issue 37, core/bank/gaps.py)
            note_gap(node, question, actor=bank.kb.reader(actor).handle, via=VIA)
        served = [r.entry for r in found if r.entry is not None]
        if served:
            who = bank.kb.reader(actor)
            bank.record_serve(who.handle, VIA, served, query=question, run=run)
        return Recall(question, found, answer)
    finally:
        bank.close()
        if own:
            asker.close()
