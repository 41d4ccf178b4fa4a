"""load_context: what the knowledge bank knows about an area, within a token budget (core/bank/context.py)."""
from __future__ import annotations

from pydantic import Field

from ...bank.context import MIN_TOKEN_BUDGET, load_context
from ...pages.run_model import HOLDOUT_WORDS
from ...sections.bank import MAX_CONTEXT_TOKENS
from ..session import Session
from .base import Args, Reply, Tool


class LoadContextArgs(Args):
    area: str = Field(description=(
        "The folder you are about to work in, e.g. 'apps/server/prisma' (or 'NAME:apps/server' where the company "
        "has several repositories; '.' for the whole repository)."))
    token_budget: int | None = Field(default=None, ge=MIN_TOKEN_BUDGET, le=MAX_CONTEXT_TOKENS, description=(
        f"The most tokens the answer may take ({MIN_TOKEN_BUDGET}–{MAX_CONTEXT_TOKENS:,}); left out: the company's "
        "KNOWLEDGE_CONTEXT_TOKEN_BUDGET (1,500 unless set). The answer is never over it, and says what was left "
        "out."))


def run(session: Session, args: LoadContextArgs) -> Reply:
    if session.holdout:      # an agent run in the holdout arm is given no knowledge, and records no use
        return Reply(HOLDOUT_WORDS, {"area": args.area, "run": session.run, "holdout": True, "pages": [],
                                     "conventions": [], "entries": []})
    ctx = load_context(session.bank, args.area, token_budget=args.token_budget, actor=session.handle,
                       run=session.run)
    return Reply(ctx.text, ctx.to_json() | ({"run": session.run} if session.run else {}))


TOOL = Tool(
    name="load_context",
    title="Load what the bank knows about an area",
    description=(
        "Load what the knowledge bank knows about a folder of the code, within a token budget. Returns the pages "
        "about its modules (addresses: read one with get_page), the conventions of its modules, then the most "
        "relevant entries that are grounded (accepted, every cited line checked and holding) or verified by a "
        "person — each with its id, trust tier, kind, page and age, and each citation with its last check and its "
        "age ('held, checked 3 h ago at 1a2b3c4'); a cited file that changed since its last check says so, and "
        "the entry is then UNGROUNDED: check it against the code before relying on it. Says how many were left out "
        "for the budget and how many more rank lower. Use it before you start work in a folder."),
    hint="before you start work in a folder, load the conventions and the grounded facts the bank holds for it",
    args=LoadContextArgs, run=run, read_only=True, on_remote=False)
