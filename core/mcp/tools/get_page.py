"""get_page: one page in full — its body, revision, id, address, labels, children and backlinks."""
from __future__ import annotations

from typing import Any

from pydantic import Field

from ...pages.links import link_to
from ...pages.model import WINDOW_MAX
from ..session import Session
from .base import REF_HELP, Args, Reply, Tool, page_brief


class GetPageArgs(Args):
    ref: str = Field(description=REF_HELP)


def page_reply(session: Session, page: Any) -> Reply:
    """The page as get_page (and a resource read) gives it. Reads the children, backlinks and comments
    as the session's actor; the read itself is the caller's to record."""
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
    }
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
    tail.append(f"\nTo change this page, call save_page with base_revision {page.revision}.")
    return Reply("\n".join(head) + body + "\n" + "\n".join(tail), data)


def run(session: Session, args: GetPageArgs) -> Reply:
    session.index_catch_up()  # backlinks are derived with the keyword index: a link written a moment ago counts
    page = session.kb.get_page(args.ref, actor=session.handle)  # an agent's read is one knowledge_read
    return page_reply(session, page)


TOOL = Tool(
    name="get_page",
    title="Read a page",
    description=(
        "Read one page of the team knowledge base in full. Returns its Markdown body, its revision (pass it to "
        "save_page as base_revision to change the page), id, address (SPACE/title), labels, the pages filed "
        "under it (children), the pages that link to it (backlinks) and its comments. Use it after "
        "search_knowledge or list_pages gave you a page worth reading, or when you know a page's address. "
        "A page that does not exist is an error naming it."),
    args=GetPageArgs, run=run, read_only=True)
