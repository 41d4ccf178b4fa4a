"""consolidate_page: propose folding a page's entries into its body (spec 003, "Consolidation"). The page does not
change: a person accepts or declines the proposal in the review queue."""
from __future__ import annotations

from pydantic import Field

from ...bank.consolidation import Consolidation
from ..session import Session
from .base import Args, Reply, Tool


class ConsolidatePageArgs(Args):
    page: str = Field(description="The page: its id, or CONTAINER/Title, as get_page takes it.")
    body: str = Field(description="The page's whole new body (Markdown), which says what the folded entries say, "
                                  "written into what the page says now.")
    entry_ids: list[str] = Field(description="The ids of the page's STANDING entries the new body says (get_page and "
                                             "load_context give them).", min_length=1)
    message: str | None = Field(default=None, description="A note for the person who decides.")


def run(session: Session, args: ConsolidatePageArgs) -> Reply:
    p = Consolidation(session.bank).propose(args.page, args.body, args.entry_ids, actor=session.handle,
                                            message=args.message)
    text = (f"Proposal {p.id} stored: fold {len(p.entries)} entr{'y' if len(p.entries) == 1 else 'ies'} into "
            f"{p.page}'s body (made against revision {p.base_revision}). The page does not change until a person "
            "accepts it in the review queue; the entries stay served beside the page until then.")
    return Reply(text, {"proposal": p.to_json()})


TOOL = Tool(
    name="consolidate_page",
    title="Propose folding a page's entries into its body",
    description=(
        "Propose a new body for a page that says what some of its STANDING entries say, folding them in. Nothing "
        "changes yet: the proposal waits for a person in the review queue. Once accepted, the page gets the new body "
        "and the entries become CONSOLIDATED (still served, as evidence for the page, ranked below it). Returns the "
        "proposal: its id, the page, the revision it was made against and the entries it folds. Refused for "
        "an entry of another page or one not STANDING, and if the page changed since you read it. Use it when a "
        "page has many entries that would read better as a paragraph of its body."),
    hint="propose folding a page's entries into its body (a person accepts it)",
    args=ConsolidatePageArgs, run=run, on_remote=False)
