"""write_page: create a page (an empty body files a folder)."""
from __future__ import annotations

from pydantic import Field

from ...errors import Refused
from ..session import Session
from .base import BODY_LINKS, LINK_EXAMPLE, Args, Reply, Tool, page_brief, page_line


class WritePageArgs(Args):
    container: str = Field(description="The space to create it in: its key, e.g. 'ENG' (list_pages with no "
                                       "container lists them). A space nobody declared is refused.")
    title: str = Field(description="The page's title. It is the page's address in its space (case and spacing "
                                   "do not matter), so it must be new there.")
    body: str = Field(default="", description="The page in Markdown, without the title as a heading (the title "
                                              "is shown apart). Empty makes a folder: a page that groups the "
                                              "pages filed under it. " + BODY_LINKS)
    parent: str | None = Field(default=None, description="File it under this page (its id or SPACE/Title, in "
                                                         "the same space). Leave it out for the space's top.")


def run(session: Session, args: WritePageArgs) -> Reply:
    try:
        page = session.kb.create_page(args.container, args.title, args.body, actor=session.handle, parent=args.parent)
    except Refused as exc:
        if exc.code == "title_taken":  # the store's line, and the next step in this surface's words
            raise Refused(f"{exc} — or, to change that page, get_page '{args.container}/{args.title}' and "
                          "save_page with the revision it gives", code=exc.code, **exc.details) from None
        raise
    session.wrote()
    warnings = [w["message"] for w in getattr(page, "warnings", [])]
    kind = "folder" if page.is_folder else "page"
    text = (f"Created the {kind} {page_line(page)} at revision {page.revision}. Link it as "
            f"[{page.title}](#/knowledge/pages/{page.id}).")
    if warnings:
        text += " Warnings: " + "; ".join(warnings)
    return Reply(text, page_brief(page) | {"warnings": warnings})


TOOL = Tool(
    name="write_page",
    title="Create a page",
    description=(
        "Create a new page in the team knowledge base: a space, a title, a Markdown body and optionally the "
        "page to file it under. Returns the new page's id, address, revision and the Markdown to link it. Use "
        "it to write down what the team should know (a runbook, a decision, how something works) once "
        "search_knowledge showed no page already says it. A title that exists in the space is refused: read "
        "that page with get_page and change it with save_page instead. Pages are filed parents first."),
    hint=f"create a page once search_knowledge showed none says it; link pages by id: {LINK_EXAMPLE}",
    args=WritePageArgs, run=run, on_remote=False)
