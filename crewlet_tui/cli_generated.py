"""`crewlet page create … --generated --question Q`, `page question`, `page refresh`, `page takeover`: generated pages
(issue 37, spec 003 "Generated pages"; the engine is core/bank/generated.py). `page show` prints a generated page's
sections with `print_generated`."""
from __future__ import annotations

from typing import Any

import typer

from .cli_common import JSON_OPT, actor, console, emit_json, handle_errors, open_kb, open_node
from .cli_pages import page_app
from .sanitize import markup_safe

app = typer.Typer()             # no top-level command: the commands are `page …` ones (cli_pages.page_app)


def create_generated(container: str, title: str, question: str, parent: str | None) -> Any:
    """A generated page made by `page create --generated` (no body: the page-refresh duty builds it)."""
    from core.bank.generated import make_generated

    with open_kb() as kb:
        return make_generated(kb, container, title, question=question, actor=actor(), parent=parent)


def print_generated(view: dict[str, Any]) -> None:
    """A generated page's sections under its body: each section's entries, their tier, and which are no longer
    in use."""
    from core.bank.generated import view_lines

    console.print("\n[bold]Generated page[/]")
    for line in view_lines(view):
        console.print(f"  {markup_safe(line)}")


@page_app.command("question")
@handle_errors
def page_question(ref: str = typer.Argument(..., metavar="REF", help="A generated page's id or CONTAINER/Title."),
                  question: str = typer.Argument(..., metavar="QUESTION", help="The new question it answers."),
                  as_json: bool = JSON_OPT) -> None:
    """Change a generated page's question: it is rebuilt for it once KNOWLEDGE_PAGE_REFRESH_MIN_INTERVAL passed."""
    from core.bank.generated import set_question

    with open_kb() as kb:
        out = set_question(kb, ref, question, actor=actor())
    if as_json:
        emit_json(out)
    else:
        console.print(f"question {out.get('question_no')} set: the page is rebuilt for it at the next build")


@page_app.command("takeover")
@handle_errors
def page_takeover(ref: str = typer.Argument(..., metavar="REF", help="A generated page's id or CONTAINER/Title."),
                  as_json: bool = JSON_OPT) -> None:
    """Take a generated page over: it becomes authored, edited by people and never rebuilt. A person's to do."""
    from core.bank.generated import take_over

    with open_kb() as kb:
        out = take_over(kb, ref, actor=actor())
    if as_json:
        emit_json(out)
    else:
        console.print(f"taken over: {out['page_id']} is an authored page now, never rebuilt")


@page_app.command("refresh")
@handle_errors
def page_refresh(ref: str = typer.Argument(..., metavar="REF", help="A generated page's id or CONTAINER/Title."),
                 as_json: bool = JSON_OPT) -> None:
    """Build a generated page now, whatever the interval (the page-refresh duty builds it on its own otherwise).

    The configured model's edits to single sections; without a model, only the dead sections are removed."""
    from core.bank.generated import FAILED, refresh
    from core.chat.openai_http import ChatProvider
    from core.errors import CrewletError
    from core.pages.service import KnowledgeBase

    with open_node() as node:
        page = KnowledgeBase(node).resolve(ref, actor=actor())
        llm = node.company.llm
        chat = ChatProvider(llm) if llm is not None else None
        try:
            out = refresh(node, page.id, chat=chat)
        finally:
            if chat is not None:
                chat.close()
    if as_json:
        emit_json(out.to_json())
    else:
        console.print(f"{out.status}: {markup_safe(out.reason)}"
                      + (f" (revision {out.revision})" if out.revision else ""))
        for why in out.dropped:
            console.print(f"  [dim]dropped: {markup_safe(why)}[/]")
    if out.status == FAILED:
        raise CrewletError(f"the build of {page.container}/{page.title} failed: {out.reason}", code="build_failed")
