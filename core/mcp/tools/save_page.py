"""save_page: a new body for a page, saved against the revision the writer read."""
from __future__ import annotations

from pydantic import Field

from ..session import Session
from .base import BODY_LINKS, REF_HELP, Args, Reply, Tool, page_brief, page_line


class SavePageArgs(Args):
    ref: str = Field(description=REF_HELP)
    body: str = Field(description="The page's whole new body in Markdown (it replaces the old one; empty makes "
                                  "the page a folder). " + BODY_LINKS)
    base_revision: int = Field(ge=1, description="The revision you read with get_page and edited. If somebody "
                                                 "saved since, the save is refused and nothing is overwritten.")
    message: str | None = Field(default=None, description="One line saying what you changed and why, shown in "
                                                          "the page's history under your name.")


def run(session: Session, args: SavePageArgs) -> Reply:
    page = session.kb.save_page(args.ref, args.body, base_revision=args.base_revision, actor=session.handle,
                                message=args.message, rescue=False)   # the model holds its own text: no file kept
    session.wrote()
    if page.revision == args.base_revision:
        text = f"Nothing to save: {page_line(page)} already says exactly this (revision {page.revision})."
    else:
        text = f"Saved {page_line(page)}: now at revision {page.revision}."
    return Reply(text, page_brief(page))


TOOL = Tool(
    name="save_page",
    title="Change a page",
    description=(
        "Replace a page's body with a new one, saved against the revision you read (get_page gives it). "
        "Returns the page's new revision. Use it to correct or extend a page, or to publish a file over a "
        "page of the same title. If somebody saved the page since you read it, the save is refused (nothing "
        "is overwritten, and your text is not saved): read the page again with get_page, merge your text into "
        "it, and save against its new revision."),
    hint="change a page against the revision you read (base_revision): a stale one is refused, nothing overwritten",
    args=SavePageArgs, run=run, on_remote=False)
