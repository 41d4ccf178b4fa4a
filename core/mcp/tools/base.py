"""What a tool is: a name, words for a model, an argument model, and a function of the session.

A tool's function returns a Reply (words for the model, and the same facts as structured data), or
raises the store's own refusal (`CrewletError`), which the server returns as an MCP tool error in
that refusal's one line. A tool never catches a refusal to say it differently.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from ...pages.links import link_to

if TYPE_CHECKING:
    from ...pages.model import Page
    from ..session import Session

# who is offered a tool: the knowledge app's tools are everyone's who holds it; a person's tool (the
# ask issue's answer_knowledge) is listed only for a person, and an agent's only for an agent
Audience = Literal["anyone", "person", "agent"]

# the example the body parameters of write_page and save_page give (tests hold it against
# core.pages.links.extract_links)
LINK_EXAMPLE = "[its title](#/knowledge/pages/<page id>)"
BODY_LINKS = ("Link another page BY ID, never by title (a title is an address a rename moves): write "
              f"{LINK_EXAMPLE}, with the id get_page, list_pages or search_knowledge gave. A [[SPACE/Title]] "
              "wiki link is not read as a link.")
REF_HELP = ("The page: its id (as get_page, list_pages and search_knowledge give it), or its address "
            "SPACE/Title (case and spacing do not matter), e.g. 'ENG/Deploy Runbook'.")


class Args(BaseModel):
    """A tool's arguments. Unknown arguments are refused rather than ignored: a model that misspells
    `base_revision` must hear so, not have its save checked against nothing."""

    model_config = ConfigDict(extra="forbid")


@dataclass
class Reply:
    text: str                                   # what the model reads
    data: dict[str, Any] = field(default_factory=dict)  # the same facts, structured


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str                            # what it does, what it returns, when to use it
    # one line for the server's instructions (what a model is told when it connects): when to reach for the
    # tool, beside its siblings; server.instructions() lists the offered tools' hints, and nothing else names them
    hint: str
    args: type[Args]
    run: Callable[[Session, Any], Reply]
    read_only: bool = False
    audience: Audience = "anyone"
    # False: it works on this node's own copy of the knowledge, and a company whose knowledge lives on a
    # remote site refuses it (saying so); the instructions say which are refused there
    on_remote: bool = True

    def offered_to(self, is_agent: bool) -> bool:
        return self.audience == "anyone" or (self.audience == "agent") == is_agent

    def input_schema(self) -> dict[str, Any]:
        schema = self.args.model_json_schema()
        schema.pop("title", None)
        schema.pop("description", None)
        return schema


# -- how pages read, in every tool's reply ------------------------------------------------------------

def page_line(page: Any) -> str:
    return f"{page.container}/{page.title} (id {page.id})"


def page_brief(page: Page) -> dict[str, Any]:
    """A page in a listing or a write's reply: where it is and how to link it, without the body."""
    return {"id": page.id, "title": page.title, "container": page.container,
            "address": f"{page.container}/{page.address}", "revision": page.revision,
            "is_folder": page.is_folder, "child_count": page.child_count, "labels": list(page.labels),
            "parent_id": page.parent_id, "saved_by": page.saved_by, "saved_at": page.saved_at,
            "link": link_to(page.id, page.title)}
