"""get_page: one page in full — its body, revision, id, address, labels, children and backlinks."""
from __future__ import annotations

from typing import Any

from pydantic import Field

from ...bank.context import check_at_head, with_json
from ...bank.entries import Entry
from ...bank.generated import page_view, view_lines
from ...bank.trust import TIER_RANK
from ...pages.links import link_to
from ...pages.model import WINDOW_MAX
from ..session import Session
from .base import REF_HELP, Args, Reply, Tool, page_brief

VIA = "get_page"


class GetPageArgs(Args):
    ref: str = Field(description=REF_HELP)


def page_reply(session: Session, page: Any, entries: list[Entry] | None = None) -> Reply:
    """The page as get_page (and a resource read) gives it. Reads the children, backlinks and comments
    as the session's actor; the read itself, and the serve of its `entries`, are the caller's to record."""
    kb, who = session.kb, session.handle
    children = kb.list_pages(page.container, parent=page.id, limit=WINDOW_MAX, actor=who) if page.child_count else None
    links = kb.backlinks(page.id, actor=who)
    comments = kb.comments(page.id, actor=who)
    data = page_brief(page) | {
        "body": page.body, "created_by": page.created_by, "created_at": page.created_at,
        "trashed": page.trashed_at is not None,
        "ancestors": [{"id": a["id"], "title": a["title"]} for a in page.ancestors],
        "children": [page_brief(c) for c in children.pages] if children else [],
        "children_total": children.total if children else 0,
        "backlinks": [{"id": p.id, "title": p.title, "container": p.container, "link": link_to(p.id, p.title)}
                      for p in links],
        "comments": [{"id": c.id, "author": c.author, "text": c.body, "at": c.created_at} for c in comments],
        "entries": with_json(entries or []),
    }
    generated = page_view(kb.node, page.id, page.body)   # a generated page's sections, each with its entries' tiers
    if generated is not None:
        data["generated"] = generated
    trail = " › ".join([page.container, *[a["title"] for a in page.ancestors], page.title])
    head = [f"# {page.title}",
            f"id {page.id} · address {data['address']} · revision {page.revision} · in {trail}"
            + (f" · labels {', '.join(page.labels)}" if page.labels else "")
            + (" · IN THE TRASH" if data["trashed"] else ""),
            f"last saved by {page.saved_by}; link it as {data['link']}", ""]
    body = page.body if page.body.strip() else "(a folder: nothing is written in it; its pages are listed below)"
    tail: list[str] = []
    if children:
        more = f" (first {len(children.pages)}; list_pages for the rest)" if children.total > len(children.pages) else ""
        tail.append(f"\nChildren ({children.total}){more}:")
        tail += [f"- {c.title} (id {c.id}){' — a folder' if c.is_folder else ''}" for c in children.pages]
    if links:
        tail.append("\nLinked from:")
        tail += [f"- {p.container}/{p.title} (id {p.id})" for p in links]
    if comments:
        tail.append("\nComments:")
        tail += [f"- {c.author}: {c.body}" for c in comments]
    if generated is not None:
        tail.append("\nGenerated page:")
        tail += [f"- {line}" for line in view_lines(generated)]
    if entries:
        tail.append(f"\nEntries in use ({len(entries)}), grounded and verified first:")
        tail += [f"- entry {e.id} · {e.kind} · {e.tier}: {e.body}" for e in entries]
    tail.append(f"\nTo change this page, call save_page with base_revision {page.revision}.")
    return Reply("\n".join(head) + body + "\n" + "\n".join(tail), data)


def remote_page_reply(where: str, page: Any) -> Reply:
    """A page of a remote site (core.remote.searcher.RemotePage) as get_page gives it: its body and where
    it lives. No revision to save against, no children or backlinks: the site keeps those."""
    address = page.ref            # what get_page opens it by again (on Plane PROJECT/PAGE-ID)
    data = {"id": page.id, "title": page.title, "container": page.container, "address": address,
            "url": page.url, "link": f"[{page.title}]({page.url})", "ancestors": list(page.ancestors),
            "version": page.version, "updated_at": page.updated_at, "backend": page.backend, "body": page.body,
            "lives_in": where}
    trail = " › ".join([page.container, *page.ancestors, page.title])
    head = [f"# {page.title}",
            f"id {page.id} · address {address}" + (f" · version {page.version}" if page.version else "")
            + f" · in {trail}",
            f"This page lives in {where}, read live: open it at {page.url}; it is changed there, not here.", ""]
    body = page.body if page.body.strip() else "(nothing is written in this page)"
    return Reply("\n".join(head) + body, data)


def read(session: Session, ref: str) -> Reply:
    """One page as get_page gives it — this node's, or a remote site's through its page API (inside the
    read floor) — an agent's read recorded as one knowledge_read naming the backend either way."""
    if session.remote:
        page = session.searcher.get_page(ref, actor=session.handle)
        return remote_page_reply(session.where(), page)
    session.index_catch_up()  # backlinks are derived with the keyword index: a link written a moment ago counts
    page = session.kb.get_page(ref, actor=session.handle)  # an agent's read is one knowledge_read
    return page_reply(session, page, entries_in_use(session, page.id))


def entries_in_use(session: Session, page_id: str) -> list[Entry]:
    """The page's entries in use, each cited file read at its branch head (a file changed since its last check
    makes the entry UNGROUNDED), verified and grounded first; served to the session's actor, and recorded (against
    its agent run, if any). A holdout run is given none: the page, not the bank's entries."""
    if session.holdout:
        return []
    bank = session.bank
    entries = bank.entries(page_id, actor=session.handle)
    check_at_head(bank, entries)
    entries.sort(key=lambda e: (TIER_RANK[e.tier], -e.created_at, e.id))
    bank.record_serve(session.handle, VIA, entries, run=session.run)
    return entries


def run(session: Session, args: GetPageArgs) -> Reply:
    return read(session, args.ref)


TOOL = Tool(
    name="get_page",
    title="Read a page",
    description=(
        "Read one page of the team knowledge base in full. Returns its Markdown body, its revision (pass it to "
        "save_page as base_revision to change the page), id, address (SPACE/title), labels, the pages filed "
        "under it (children), the pages that link to it (backlinks), its comments and its entries in use (the "
        "facts added under it: id, kind, trust tier, what each says). Use it after search_knowledge or "
        "list_pages gave you a page worth reading, or when you know a page's address. A page that does not exist "
        "is an error naming it."),
    hint=("read a hit in full by its id (or SPACE/Title): its body, revision, children, backlinks, comments and "
          "entries in use"),
    args=GetPageArgs, run=run, read_only=True)
