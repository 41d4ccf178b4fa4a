"""search_knowledge: plain text in, ranked hits out, and what the search did in words."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ...pages.links import link_to
from ...pages.model import normalise_title
from ...errors import CrewletError, Invalid, UnknownContainer
from ...search.seam import DEFAULT_LIMIT, NO_TERMS, PARTIAL_COVERAGE, UNKNOWN_CONTAINER, Query, Result
from ..session import Session, keep_paths_here
from .base import Args, Reply, Tool

MAX_LIMIT = 50


class SearchArgs(Args):
    query: str = Field(description="What you are looking for, in plain words: a question or a few keywords "
                                   "(no operators, quotes or fields: they are read as words).")
    mode: Literal["hybrid", "keyword", "semantic"] = Field(
        default="hybrid", description="'hybrid' (the default: by words and by meaning, fused), 'keyword' (pages "
                                      "that share the query's words) or 'semantic' (pages about the same thing, "
                                      "even in other words).")
    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description=f"How many hits at most (1–{MAX_LIMIT}).")
    container: str | None = Field(default=None, description="Search only this space (its key, e.g. 'ENG').")


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def outcome_words(result: Result) -> str:
    """What the search did, in sentences a model acts on: 'nothing matched' (the knowledge base was searched
    and holds nothing on it), 'the knowledge base could not be searched just now' (it was not: ask again, or
    ask a colleague), and how much of it was searched by meaning are different sentences."""
    out = result.outcome
    if out.served_mode is None:
        return out.message or "the knowledge base could not be searched just now"
    n = len(result.hits)
    served = {"hybrid": "by their words and by meaning", "keyword": "by their words only",
              "semantic": "by meaning only"}[out.served_mode]
    cov = out.coverage
    sentences = [f"{_plural(n, 'page')} matched, ranked {served}" if n else f"nothing matched (searched {served})"]
    notes = [n for n in out.message.split("; ") if n]
    if out.served_mode != "keyword" and cov.embeddable and cov.embedded < cov.embeddable:
        searched = f"searched {cov.embedded:,} of {_plural(cov.embeddable, 'page')} by meaning"
        if out.degraded == PARTIAL_COVERAGE:  # the searcher's own note says the same: said once
            searched += ": the rest are not embedded yet"
            notes = [n for n in notes if not n.startswith("ranked by meaning over")]
        sentences.append(searched)
    if cov.behind:
        sentences.append(f"the keyword index is {_plural(cov.behind, 'change')} behind this node's pages")
    sentences += notes
    return ". ".join(s[0].upper() + s[1:] for s in sentences) + "."


def _entries_served(session: Session, query: str, hits: list[dict[str, Any]]) -> dict[str, str]:
    """The entries among the hits, each with its trust tier (core/bank/trust.py) as it serves now — each cited
    file's blob at its branch head compared with the one last checked —, recorded as served to the caller by this
    tool at their rank among the entries (spec 003: every serve is recorded)."""
    if not hits:
        return {}
    from core.bank.entries import EntryBank

    bank = EntryBank(session.node)
    try:
        entries = []
        for h in hits:
            try:
                entries.append(bank.show(h["entry_id"], at_head=True, actor=session.handle))
            except CrewletError:        # gone since the search read it
                continue
        bank.record_serve(session.handle, "search_knowledge", entries, query=query, run=session.run)
        return {e.id: e.tier for e in entries}
    finally:
        bank.close()


def run(session: Session, args: SearchArgs) -> Reply:
    if not args.query.strip():
        # what the call got wrong is a tool error, as answer_knowledge refuses an empty question
        raise Invalid("the query is empty", code="empty_query")
    session.await_model()   # the first search of a session waits for the model the session began to load
    session.index_catch_up()
    result = session.searcher.search(Query(args.query, actor=session.handle, limit=args.limit, mode=args.mode,
                                           containers=[args.container] if args.container else None))
    if result.outcome.degraded == UNKNOWN_CONTAINER:
        # what the call got wrong is a tool error, as list_pages says it: a typo must not read as "nothing matched"
        raise UnknownContainer.of(args.container or "")
    if result.outcome.degraded == NO_TERMS and result.outcome.served_mode is None:
        # only punctuation or words too common to index, and nothing ranked by meaning either: not "nothing matched"
        raise Invalid(f"nothing was searched: the query '{args.query.strip()}' has no word that can be searched",
                      code="no_words", query=args.query)
    remote = session.remote  # a Confluence or Plane page is linked by its own URL, and read there
    hits = [{"id": h.page_id, "title": h.title, "container": h.container,
             "address": f"{h.container}/{normalise_title(h.title)}", "snippet": h.snippet, "score": h.score,
             "ancestors": h.ancestors, "link": f"[{h.title}]({h.url})" if remote else link_to(h.page_id, h.title),
             **({"url": h.url} if remote else {}),
             # an entry under the page (spec 003): its own id, kind, status and tier, and where it stands
             **({"kind": "entry", "entry_id": h.entry_id, "entry_kind": h.entry_kind, "status": h.entry_status}
                if h.entry_id else {})} for h in result.hits
            # an agent run in the holdout arm is given no knowledge: the pages, not the bank's entries
            if not (session.holdout and h.entry_id)]
    served = _entries_served(session, args.query, [h for h in hits if h.get("entry_id")])
    words = keep_paths_here(outcome_words(result), session.node.home)   # e.g. a backend named in company.toml
    lines = [words]
    for i, h in enumerate(hits, 1):
        if h.get("entry_id"):
            tier = served.get(h["entry_id"])
            h["tier"] = tier
            lines.append(f"{i}. {h['entry_kind']} entry under {h['container']}/{h['title']} (entry {h['entry_id']}, "
                         f"{h['status']}{', ' + tier if tier else ''}, score {h['score']:.3f})")
            if h["snippet"]:
                lines.append(f"   {h['snippet']}")
            continue
        lines.append(f"{i}. {h['container']}/{h['title']} (id {h['id']}, score {h['score']:.3f})"
                     + (f" in {' › '.join(h['ancestors'])}" if h["ancestors"] else ""))
        if h["snippet"]:
            lines.append(f"   {h['snippet']}")
    if hits:
        lines.append("Read a page in full with get_page and its id; this company's pages live on its own site, "
                     "each at its url." if remote else "Read a page in full with get_page and its id.")
    out = result.outcome
    return Reply("\n".join(lines), {"hits": hits, "outcome": words, "served_mode": out.served_mode,
                                    "degraded": out.degraded, "coverage": out.coverage.to_json()})


TOOL = Tool(
    name="search_knowledge",
    title="Search the knowledge base",
    description=(
        "Search the team knowledge base (runbooks, decisions, how the company works) with plain text. Returns "
        "ranked hits (id, address, title, a snippet, a score; a hit that is an entry — one fact under a page — says "
        "'entry under SPACE/Page' with its entry id, status and trust tier) and a sentence saying what the search did: "
        "'nothing matched' means the knowledge base holds nothing on it; 'could not be searched' or 'not "
        "searchable from this node yet' means you do not know — ask a colleague rather than concluding nothing "
        "has been written down. Use it before you act on something the team may already have written down, and "
        "before you write a page, so you do not write one that exists; read a hit in full with get_page."),
    hint=("search before you act on something the team may have written down, and before you write a page (so you "
          "do not write one that exists)"),
    args=SearchArgs, run=run, read_only=True)
