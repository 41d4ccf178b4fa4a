"""The tools `crewlet mcp` serves: one module per tool, registered in TOOLS.

Adding a tool is one module here exporting `TOOL = Tool(...)` (or a group's module exporting a few:
`diary.py`, `onboarding.py`) (name, description written for a model, its one-line hint for the server's
instructions, an `Args` model, `run(session, args) -> Reply`, who it is offered to, whether a remote
company serves it) and one line in TOOLS. The server lists, validates, runs, tells of it in its
instructions and turns refusals into tool errors for every tool alike; no other file changes (tests ask
TOOLS, not a copied set). See docs/architecture.md.
"""
from __future__ import annotations

from . import (add_entry, answer_knowledge, comment_on_page, consolidate_page, diary, get_page, list_pages, load_context, onboarding,
               recall_knowledge, save_page, search_knowledge, supersede_entry, write_page)
from . import make_generated_page
from .base import Args, Reply, Tool

# the knowledge app, as the spec names it
TOOLS: list[Tool] = [
    search_knowledge.TOOL,
    get_page.TOOL,
    list_pages.TOOL,
    write_page.TOOL,
    save_page.TOOL,
    comment_on_page.TOOL,
    # the knowledge bank's entries (core/bank): one fact each, checked against the code it cites
    load_context.TOOL,
    add_entry.TOOL,
    supersede_entry.TOOL,
    consolidate_page.TOOL,
    # a person's question answered by the chat model from the pages (core/ask): offered to persons only
    answer_knowledge.TOOL,
    # a generated page (spec 003): a person's to make; the store refuses an agent
    make_generated_page.TOOL,
    # what the knowledge bank holds on a question (spec 003): entries with their tiers, and pages; agents and persons
    recall_knowledge.TOOL,
    # an agent's own memory (core/agents): offered to agents only
    diary.REMEMBER,
    diary.RECALL,
    diary.FORGET,
    onboarding.ONBOARDING_STATUS,
    onboarding.MARK_ONBOARDED,
]

__all__ = ["TOOLS", "Tool", "Reply", "Args"]
