"""list_pages: one level of a space's outline (or the spaces themselves), in windows of at most 500."""
from __future__ import annotations

from pydantic import Field

from ...pages.model import WINDOW_MAX
from ..session import Session
from .base import Args, Reply, Tool, page_brief


class ListPagesArgs(Args):
    container: str | None = Field(
        default=None, description="The space's key, e.g. 'ENG'. Leave it out to list the spaces themselves "
                                  "(key, name, purpose, how many pages each holds).")
    parent: str | None = Field(
        default=None, description="List the pages filed under this page (its id or SPACE/Title) instead of "
                                  "the space's top level. It must be in `container`.")
    cursor: str | None = Field(
        default=None, description="The next_cursor a previous call returned, for the next window of the same "
                                  "level. Leave it out for the first window.")


def _spaces(session: Session) -> Reply:
    rows = session.kb.spaces(actor=session.handle)
    agent = session.actor.is_agent
    lines = [f"{len(rows)} space(s):"]
    for r in rows:
        notes = []
        if r["reserved"]:
            notes.append("reserved" + (": agents may not add pages" if agent else ""))
        if not r["declared"]:
            notes.append("not declared: no new page can be created there")
        lines.append(f"- {r['key']}: {r['name']} — {r['pages']} page(s)"
                     + (f"; {r['purpose']}" if r["purpose"] else "") + (f" ({'; '.join(notes)})" if notes else ""))
    lines.append("Call list_pages with a container to see its pages.")
    return Reply("\n".join(lines), {"spaces": rows})


def run(session: Session, args: ListPagesArgs) -> Reply:
    session.elsewhere("spaces and their outline")    # a remote site's are not listed from here
    if not args.container:
        if args.parent or args.cursor:
            from ...errors import Invalid

            raise Invalid("give the container (the space key) with parent or cursor", code="invalid_container")
        return _spaces(session)
    window = session.kb.list_pages(args.container, parent=args.parent, after=args.cursor, limit=WINDOW_MAX,
                                   actor=session.handle)
    pages = [page_brief(p) for p in window.pages]
    where = f"under {args.parent}" if args.parent else "at the top"
    lines = [f"{window.container}: {window.total} page(s) {where}; this window shows {len(pages)}."]
    for p in window.pages:
        extra = []
        if p.is_folder:
            extra.append("folder")
        if p.child_count:
            extra.append(f"{p.child_count} under it")
        lines.append(f"- {p.title} (id {p.id}, revision {p.revision}){' — ' + ', '.join(extra) if extra else ''}")
    if window.next_cursor:
        lines.append(f"More: call list_pages again with cursor '{window.next_cursor}'.")
    return Reply("\n".join(lines), {"container": window.container, "parent_id": window.parent_id, "total": window.total,
                                    "pages": pages, "next_cursor": window.next_cursor})


TOOL = Tool(
    name="list_pages",
    title="Browse a space",
    description=(
        "Browse the team knowledge base as an outline, one level at a time. Returns the pages at the top of a "
        f"space (or filed under one page), each with its id, title, revision and how many pages are under it, in "
        f"windows of at most {WINDOW_MAX} with the level's total and a cursor for the next window. With no "
        "container it returns the spaces. Use it to see what a space holds or where a new page belongs; to "
        "find pages about something, search_knowledge is faster."),
    hint="browse a space's outline one level at a time (with no space: the spaces themselves)",
    args=ListPagesArgs, run=run, read_only=True, on_remote=False)
