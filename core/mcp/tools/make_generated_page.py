"""make_generated_page: a person's generated page over MCP (spec 003 "Generated pages") — a page with no body that the
server writes from the entries in its scope (its links) to answer a question. Never listed for an agent; the store
refuses an agent too (core/bank/generated.py make_generated)."""
from __future__ import annotations

from pydantic import Field

from ...bank.generated import make_generated
from ..session import Session
from .base import Args, Reply, Tool, page_brief, page_line


class MakeGeneratedArgs(Args):
    container: str = Field(description="The space to create it in: its key, e.g. 'ENG'.")
    title: str = Field(description="The page's title: its address in its space, so new there.")
    question: str = Field(description="The question the page answers, e.g. 'How do we deploy the API?'.")
    parent: str | None = Field(default=None, description="File it under this page (its id or SPACE/Title).")


def run(session: Session, args: MakeGeneratedArgs) -> Reply:
    page = make_generated(session.kb, args.container, args.title, question=args.question, actor=session.handle,
                          parent=args.parent)
    session.wrote()
    return Reply(f"Created the generated page {page_line(page)}: it answers '{args.question.strip()}' from the entries "
                 "in its scope, written at the server's next build. Link it to what it covers (crewlet page link) "
                 "so its scope holds entries.", page_brief(page) | {"question": args.question.strip()})


TOOL = Tool(
    name="make_generated_page",
    title="Make a generated page",
    description=(
        "Create a generated page: a page with no body that the server writes, section by section, from the "
        "entries in its scope (the pages, spaces and modules it is linked to) to answer a question, and rebuilds "
        "when those entries change. Returns the new page's id and address. Use it when the person wants a page "
        "that keeps answering one question from what the team recorded."),
    hint="make a page the server writes from the recorded entries to answer one question (a person's)",
    args=MakeGeneratedArgs, run=run, audience="person", on_remote=False)
