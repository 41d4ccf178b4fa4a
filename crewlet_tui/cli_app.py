"""`crewlet open`: the terminal app on one page, or on the search screen with a query run."""
from __future__ import annotations


import typer

from core.errors import CrewletError

from .cli_common import STATE, actor, handle_errors, open_node

app = typer.Typer()             # this module's top-level commands (cli_root adds them to `crewlet`)


@app.command("open")
@handle_errors
def open_app(
    ref: str | None = typer.Argument(None, metavar="REF", help="The page to open: a page id or CONTAINER/Title."),
    search: str | None = typer.Option(None, "--search", "-s", metavar="QUERY", help="Open the search screen with this query run."),
) -> None:
    """Open the terminal app on one page, or on the search screen with a query run."""
    if (ref is None) == (search is None):
        raise typer.BadParameter("give a page REF, or --search QUERY (one of them)")
    home = STATE.home
    if not home.exists():
        raise CrewletError(f"no crewlet home at {home.root} — run `crewlet` to create one, "
                           "or `crewlet init --example` (or pass --home DIR)", code="no_home")
    start_page = None
    if ref is not None:
        from core.knowledge import make_searcher, remote_site
        from core.pages.service import KnowledgeBase

        with open_node() as node:  # a wrong REF is one line on stderr, not an app that opens onto nothing
            if remote_site(node.company) is not None:   # the page is the site's, read there (as the app will)
                searcher = make_searcher(node)
                try:
                    start_page = searcher.get_page(ref, actor=actor(), record_read=False).id
                finally:
                    searcher.close()
            else:
                start_page = KnowledgeBase(node).resolve(ref, actor=actor()).id
    from .launch import run_app

    run_app(home, actor(), start_page=start_page, start_search=search)
