"""`crewlet init`, `spaces`, `pages`, `page …` and `trash`: the knowledge base from a shell."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from core.errors import CrewletError

from .cli_common import (JSON_OPT, STATE, actor, console, emit_json, handle_errors, open_kb, open_node, read_body,
                         refuse_elsewhere, when)
from .fmt import plural
from .sanitize import clean_line, clean_text, markup_safe

if TYPE_CHECKING:
    from core.node import Node
    from core.pages.model import Page
# the engine, rich's tables and its highlighter are imported by the commands that use them (start-up)

# past these a body is printed plain rather than highlighted (see page show)
HIGHLIGHT_MAX_CHARS = 256 * 1024
HIGHLIGHT_MAX_LINE = 20_000

app = typer.Typer()             # this module's top-level commands (cli_root adds them to `crewlet`)
page_app = typer.Typer(help="Read and change one page. REF is a page id or CONTAINER/Title.", no_args_is_help=True)
app.add_typer(page_app, name="page")


def _page_line(p: Page) -> str:
    return f"{p.container}/{p.title}"


def _print_page_summary(p: Page, verb: str, where: str = "") -> None:
    """`verb` the page (a folder said so: it holds no text, only pages filed under it), then `where` it now is."""
    what = "folder " if p.is_folder else ""
    console.print(f"{verb} {what}[bold]{markup_safe(_page_line(p))}[/]{markup_safe(where)} "
                  f"(id {p.id}, revision {p.revision})")
    for w in getattr(p, "warnings", []):
        console.print(f"[yellow]warning:[/] {markup_safe(w['message'])}")


@app.command()
@handle_errors
def init(
    example: bool = typer.Option(False, "--example", help="Load the bundled example knowledge base (HOME, ENG, LEAD, PROD)."),
    operator: str = typer.Option("admin", "--operator", metavar="HANDLE", help="Handle of the first (admin) actor when not --example."),
    as_json: bool = JSON_OPT,
) -> None:
    """Create a home: company.toml, the node's SQLite file and its log file."""
    from core import config as config_mod
    from core.node import Node, init_home
    from core.pages.service import KnowledgeBase
    from core.paths import examples_dir

    home = STATE.home
    if not example and not config_mod.HANDLE_RE.match(operator):
        raise typer.BadParameter(f"'{operator}' is not a handle: use lower-case letters, digits, '.', '_' or '-'",
                                 param_hint="--operator")
    data = config_mod.example_config() if example else config_mod.empty_config(operator)
    source = examples_dir() if example else None  # a missing example is refused before a home is made
    init_home(home, data)
    created = 0
    with Node.open(home) as node:
        if source is not None:
            from core.importer import import_directory

            report = import_directory(KnowledgeBase(node), source, actor="alex")
            created = report.created
    if as_json:
        emit_json({"home": str(home.root), "config": str(home.config_file), "example": example, "pages_created": created})
    else:
        console.print(f"Created a crewlet home at [bold]{markup_safe(str(home.root))}[/]")
        if example:
            console.print(f"Loaded the example knowledge base: {created} pages. Try `crewlet spaces`.")

@app.command()
@handle_errors
def spaces(as_json: bool = JSON_OPT) -> None:
    """List the declared spaces with their page counts (undeclared containers shown apart)."""
    with open_kb(local="spaces") as kb:
        rows = kb.spaces(actor=actor())
    if as_json:
        emit_json(rows)
        return
    from rich.table import Table

    table = Table("space", "name", "lead", "pages", "purpose", title="Spaces")
    for r in rows:
        if r["declared"]:
            key = r["key"] + (" (reserved)" if r["reserved"] else "")
            table.add_row(markup_safe(key), markup_safe(r["name"]), markup_safe(r["lead"] or "—"), str(r["pages"]), markup_safe(r["purpose"]))
    console.print(table)
    undeclared = [r for r in rows if not r["declared"]]
    if undeclared:
        console.print("[yellow]Containers that hold pages but no space declares:[/] "
                      + ", ".join(f"{markup_safe(r['key'])} ({r['pages']})" for r in undeclared))

@app.command()
@handle_errors
def pages(
    container: str = typer.Argument(..., metavar="CONTAINER", help="The space key, e.g. ENG."),
    parent: str | None = typer.Option(None, "--parent", metavar="REF", help="List the children of this page (REF) instead of the top."),
    after: str | None = typer.Option(None, "--after", metavar="CURSOR", help="The cursor a previous window printed."),
    limit: int = typer.Option(500, "--limit", min=1, max=500, metavar="N", help="Window size, at most 500."),
    as_json: bool = JSON_OPT,
) -> None:
    """One level of a space's outline: a window of pages, the level's total, and a cursor."""
    with open_kb(local="outline") as kb:
        window = kb.list_pages(container, parent=parent, after=after, limit=limit, actor=actor())
    if as_json:
        emit_json(window.to_json())
        return
    from rich.table import Table

    table = Table("", "title", "id", "children", "rev", "last saved", title=f"{window.container} — {plural(window.total, 'page')} at this level")
    for p in window.pages:
        table.add_row("📁" if p.is_folder else "📄", markup_safe(p.title), p.id, str(p.child_count or ""), str(p.revision),
                      f"{markup_safe(p.saved_by)} {when(p.saved_at)}")
    console.print(table)
    if window.next_cursor:
        console.print(f"more: --after {window.next_cursor}")

@app.command()
@handle_errors
def trash(as_json: bool = JSON_OPT) -> None:
    """Pages in the trash, with who trashed them and when (purged after 30 days)."""
    with open_kb(local="trash") as kb:
        rows = kb.trash(actor=actor())
    if as_json:
        emit_json([p.to_json(with_body=False) for p in rows])
        return
    from rich.table import Table

    table = Table("page", "id", "trashed by", "trashed at", title=f"Trash — {plural(len(rows), 'page')}")
    for p in rows:
        table.add_row(markup_safe(_page_line(p)), p.id, markup_safe(p.trashed_by or ""), when(p.trashed_at))
    console.print(table)


@page_app.command("show")
@handle_errors
def page_show(ref: str = typer.Argument(..., metavar="REF", help="Page id or CONTAINER/Title."),
              revision: int | None = typer.Option(None, "--revision", "-r", metavar="N", help="Show this revision's body."),
              as_json: bool = JSON_OPT) -> None:
    """Show a page: its body, where it sits, its children, backlinks and comments.

    On a company whose knowledge lives in Confluence or Plane, the page is read there, live."""
    from core.knowledge import remote_site, where

    with open_node() as node:
        if remote_site(node.company) is not None:
            if revision is not None:
                refuse_elsewhere(node, "history")
            _show_remote(_remote_page(node, ref), where(node.company), as_json)
            return
        from core.pages.service import KnowledgeBase

        kb = KnowledgeBase(node)
        who = actor()
        page = kb.get_page(ref, actor=who)
        comments = kb.comments(page.id, actor=who)
        links = kb.backlinks(page.id, actor=who)
        children = kb.list_pages(page.container, parent=page.id, limit=500, actor=who) if page.child_count else None
        rev = kb.revision(page.id, revision, actor=who) if revision is not None else None
        from core.bank.generated import page_view

        generated = page_view(node, page.id, page.body)
    if as_json:
        data = page.to_json()
        if generated is not None:
            data["generated"] = generated
        data["comments"] = [c.to_json() for c in comments]
        data["linked_from"] = [{"id": p.id, "container": p.container, "title": p.title} for p in links]
        data["children"] = [c.to_json(with_body=False) for c in children.pages] if children else []
        if rev:
            data["shown_revision"] = rev.to_json()
        emit_json(data)
        return
    trail = " › ".join([page.container, *[a["title"] for a in page.ancestors], page.title])
    console.print(f"[bold]{markup_safe(page.title)}[/]  [dim]{markup_safe(trail)}[/]")
    console.print(f"[dim]id {page.id} · address {markup_safe(page.container)}/{markup_safe(page.address)} · revision {page.revision} · "
                  f"last saved by {markup_safe(page.saved_by)} {when(page.saved_at)}"
                  + (f" · [red]in the trash since {when(page.trashed_at)}[/]" if page.trashed_at else "") + "[/]")
    console.print()
    _print_body(rev.body if rev else page.body)
    if generated is not None:
        from .cli_generated import print_generated

        print_generated(generated)
    if children:
        console.print(f"\n[bold]Children[/] ({children.total})")
        for c in children.pages:
            console.print(f"  {'📁' if c.is_folder else '📄'} {markup_safe(c.title)} [dim]{c.id}[/]")
    if links:
        console.print("\n[bold]Linked from[/]")
        for p in links:
            console.print(f"  {markup_safe(_page_line(p))} [dim]{p.id}[/]")
    if comments:
        console.print("\n[bold]Comments[/]")
        for comment in comments:
            console.print(f"  [bold]{markup_safe(comment.author)}[/] {when(comment.created_at)} [dim]{comment.id}[/]: "
                          f"{markup_safe(comment.body)}")


def _print_body(body: str) -> None:
    # shown as its own text: a body is untrusted input, never markup or terminal escapes
    body = clean_text(body)
    if len(body) > HIGHLIGHT_MAX_CHARS or max(map(len, body.split("\n"))) > HIGHLIGHT_MAX_LINE:
        # Rich's highlighting and wrapping grow faster than the text (a 10 MB line took minutes):
        # a body this large is written as the plain text it is, and the terminal wraps it
        console.file.write(body if body.endswith("\n") else body + "\n")
    else:
        from rich.syntax import Syntax

        console.print(Syntax(body, "markdown", word_wrap=True, theme="ansi_dark") if body.strip() else "[dim](a folder: nothing written)[/]")


def _remote_page(node: Node, ref: str, *, record_read: bool = True) -> Any:
    """A page of the remote site the company's knowledge lives on, read there as the actor (inside the
    read floor; an agent's read recorded, as on this node's own pages)."""
    from core.knowledge import make_searcher

    searcher = make_searcher(node)
    try:
        return searcher.get_page(ref, actor=actor(), record_read=record_read)
    finally:
        searcher.close()


def _show_remote(page: Any, where: str, as_json: bool) -> None:
    if as_json:
        emit_json(page.to_json())
        return
    trail = " › ".join([page.container, *page.ancestors, page.title])
    console.print(f"[bold]{markup_safe(page.title)}[/]  [dim]{markup_safe(trail)}[/]")
    console.print(f"[dim]id {markup_safe(page.id)}" + (f" · version {page.version}" if page.version else "")
                  + f" · read live from {markup_safe(where)}: change it there[/]")
    if page.url:
        console.print(f"[dim]{markup_safe(page.url)}[/]", soft_wrap=True)
    console.print()
    _print_body(page.body)


@page_app.command("create")
@handle_errors
def page_create(container: str = typer.Argument(..., metavar="CONTAINER", help="The space key."),
                title: str = typer.Argument(..., metavar="TITLE", help="The page title (its address is the title lower-cased)."),
                parent: str | None = typer.Option(None, "--parent", metavar="REF", help="File it under this page (REF)."),
                body_file: str | None = typer.Option(None, "--body-file", metavar="FILE", help="Read the body from a file, or - for stdin. Without it the page is a folder (nothing written in it)."),
                message: str | None = typer.Option(None, "--message", "-m", metavar="TEXT", help="A note for the history."),
                generated: bool = typer.Option(False, "--generated", help="A generated page: no body, written from the entries in its scope (its links) to answer --question."),
                question: str | None = typer.Option(None, "--question", metavar="TEXT", help="The question a --generated page answers."),
                as_json: bool = JSON_OPT) -> None:
    """Create a page (an empty body makes a folder; --generated --question Q one the server writes)."""
    if generated or question is not None:
        from .cli_generated import create_generated

        if not generated or not question or body_file is not None:
            raise typer.BadParameter("a generated page takes --generated --question TEXT and no --body-file",
                                     param_hint="--generated")
        page = create_generated(container, title, question, parent)
        if not as_json:
            console.print(f"created generated page [bold]{markup_safe(_page_line(page))}[/] (id {page.id}): "
                          "built from the entries it links at the page-refresh duty's next pass")
            return
    else:
        body = read_body(body_file)
        with open_kb() as kb:
            page = kb.create_page(container, title, body, actor=actor(), parent=parent, message=message)
    if as_json:
        emit_json(page.to_json() | {"warnings": getattr(page, "warnings", [])})
    else:
        _print_page_summary(page, "created")


@page_app.command("save")
@handle_errors
def page_save(ref: str = typer.Argument(..., metavar="REF", help="Page id or CONTAINER/Title."),
              body_file: str = typer.Option(..., "--body-file", metavar="FILE", help="The new body: a file, or - for stdin."),
              base_rev: int = typer.Option(..., "--base-rev", metavar="N", help="The revision you edited; a stale one is refused."),
              message: str | None = typer.Option(None, "--message", "-m", metavar="TEXT", help="Your note for the history."),
              as_json: bool = JSON_OPT) -> None:
    """Save a new body against the revision you edited."""
    body = read_body(body_file)
    with open_kb() as kb:
        page = kb.save_page(ref, body, base_revision=base_rev, actor=actor(), message=message)
    if as_json:
        emit_json(page.to_json())
    else:
        _print_page_summary(page, "saved")


@page_app.command("rename")
@handle_errors
def page_rename(ref: str = typer.Argument(..., metavar="REF", help="Page id or CONTAINER/Title."),
                new_title: str = typer.Argument(..., metavar="TITLE", help="The new title."),
                as_json: bool = JSON_OPT) -> None:
    """Rename a page (moves its address unless only the capitalisation changes)."""
    with open_kb() as kb:
        page = kb.rename_page(ref, new_title, actor=actor())
    if as_json:
        emit_json(page.to_json())
    else:
        _print_page_summary(page, "renamed to")


@page_app.command("move")
@handle_errors
def page_move(ref: str = typer.Argument(..., metavar="REF", help="Page id or CONTAINER/Title."),
              parent: str | None = typer.Option(None, "--parent", metavar="REF", help="The new parent (REF), in the same space."),
              top: bool = typer.Option(False, "--top", help="Move it to the top of its space."),
              as_json: bool = JSON_OPT) -> None:
    """File a page under another page of its space, or at its top."""
    if bool(parent) == top:
        raise typer.BadParameter("give exactly one of --parent REF or --top")
    with open_kb() as kb:
        page = kb.move_page(ref, None if top else parent, actor=actor())
    if as_json:
        emit_json(page.to_json(with_body=False) | {"warnings": getattr(page, "warnings", [])})
    else:
        _print_page_summary(page, "moved", _placed(page))


def _placed(page: Page) -> str:
    """Where a moved page now is: under its parent (by its address), or at the top of its space."""
    if not page.ancestors:
        return f" to the top of {page.container}"
    parent = page.ancestors[-1]
    return f" under {page.container}/{parent.get('title', parent.get('id', ''))}"


def _trash_verb(verb: str, method: str, ref: str, as_json: bool) -> None:
    """trash, restore and purge: one page by REF, and what became of it."""
    from core.pages.model import Page

    with open_kb() as kb:
        result = getattr(kb, method)(ref, actor=actor())
    if as_json:
        emit_json(result.to_json(with_body=False) if isinstance(result, Page) else result)
    elif isinstance(result, Page):
        _print_page_summary(result, f"{verb}ed" if not verb.endswith("e") else f"{verb}d")
    else:
        console.print(f"purged [bold]{markup_safe(result['container'])}/{markup_safe(result['title'])}[/] ({result['page_id']})")


@page_app.command("trash")
@handle_errors
def page_trash(ref: str = typer.Argument(..., metavar="REF", help="Page id or CONTAINER/Title."), as_json: bool = JSON_OPT) -> None:
    """Move a page to the trash (restorable for 30 days)."""
    _trash_verb("trash", "trash_page", ref, as_json)


@page_app.command("restore")
@handle_errors
def page_restore(ref: str = typer.Argument(..., metavar="REF", help="Page id or CONTAINER/Title."), as_json: bool = JSON_OPT) -> None:
    """Bring a page back from the trash."""
    _trash_verb("restore", "restore_page", ref, as_json)


@page_app.command("purge")
@handle_errors
def page_purge(ref: str = typer.Argument(..., metavar="REF", help="Page id or CONTAINER/Title."), as_json: bool = JSON_OPT) -> None:
    """Delete a trashed page for good (admin only; cannot be undone)."""
    _trash_verb("purge", "purge_page", ref, as_json)


@page_app.command("history")
@handle_errors
def page_history(ref: str = typer.Argument(..., metavar="REF", help="Page id or CONTAINER/Title."), as_json: bool = JSON_OPT) -> None:
    """Every revision: who, when, what kind of change, and the writer's note."""
    with open_kb(local="history") as kb:
        revs = kb.history(ref, actor=actor())
    if as_json:
        emit_json([r.to_json(with_body=False) for r in revs])
        return
    from rich.table import Table

    table = Table("rev", "kind", "author", "at", "title", "message")
    for r in revs:
        table.add_row(str(r.revision), r.kind, markup_safe(r.author), when(r.at), markup_safe(r.title), markup_safe(r.message or ""))
    console.print(table)


@page_app.command("diff")
@handle_errors
def page_diff(ref: str = typer.Argument(..., metavar="REF", help="Page id or CONTAINER/Title."),
              a: int = typer.Argument(..., metavar="A", help="A revision. Alone: what that save changed."),
              b: int | None = typer.Argument(None, metavar="B", help="A second revision: the diff from A to B."),
              as_json: bool = JSON_OPT) -> None:
    """The line diff between two revisions (or what one save changed)."""
    with open_kb(local="history") as kb:
        lines = kb.diff(ref, a, b, actor=actor())
    if as_json:
        emit_json({"from": a - 1 if b is None else a, "to": a if b is None else b, "diff": lines})
        return
    from .fmt import diff_text

    console.print(diff_text(lines), soft_wrap=True, end="")


@page_app.command("comment")
@handle_errors
def page_comment(ref: str = typer.Argument(..., metavar="REF", help="Page id or CONTAINER/Title (or a comment id with --edit/--remove)."),
                 text: str | None = typer.Argument(None, metavar="TEXT", help="The comment."),
                 edit: bool = typer.Option(False, "--edit", help="REF is a comment id: replace its text (author only)."),
                 remove: bool = typer.Option(False, "--remove", help="REF is a comment id: remove it (author or admin)."),
                 as_json: bool = JSON_OPT) -> None:
    """Comment on a page; or edit or remove a comment."""
    if edit and remove:
        raise typer.BadParameter("give --edit or --remove, not both")
    if not remove and not text:
        raise typer.BadParameter("give the comment's TEXT")
    with open_kb() as kb:
        if remove:
            kb.remove_comment(ref, actor=actor())
            result = {"comment_id": ref, "removed": True}
        elif edit:
            result = kb.edit_comment(ref, text or "", actor=actor()).to_json()
        else:
            result = kb.add_comment(ref, text or "", actor=actor()).to_json()
    if as_json:
        emit_json(result)
    else:
        console.print(f"comment {result['comment_id'] if 'comment_id' in result else result['id']}: "
                      + ("removed" if remove else "edited" if edit else "added"))


@page_app.command("backlinks")
@handle_errors
def page_backlinks(ref: str = typer.Argument(..., metavar="REF", help="Page id or CONTAINER/Title."), as_json: bool = JSON_OPT) -> None:
    """The pages that link to this one by id ("Linked from")."""
    with open_kb(local="backlinks") as kb:
        pages = kb.backlinks(ref, actor=actor())
    if as_json:
        emit_json([{"id": p.id, "container": p.container, "title": p.title} for p in pages])
        return
    if not pages:
        console.print("[dim]no page links here[/]")
    for p in pages:
        console.print(f"{markup_safe(_page_line(p))} [dim]{p.id}[/]")


@page_app.command("reads")
@handle_errors
def page_reads(ref: str = typer.Argument(..., metavar="REF", help="Page id or CONTAINER/Title."),
               limit: int = typer.Option(100, "--limit", min=1, max=10_000, metavar="N", help="The latest N reads at most."),
               as_json: bool = JSON_OPT) -> None:
    """Who read a page, how (get_page or a search, at what rank) and when: agents' knowledge_read events."""
    from core.knowledge import remote_site
    from core.pages.service import KnowledgeBase

    with open_node() as node:
        kb = KnowledgeBase(node)
        site = remote_site(node.company)
        if site is not None:     # the page is the site's (found there); the reads are this node's records
            page = _remote_page(node, ref, record_read=False)
            reads = kb.reads_of(page.id, backend=site.backend, limit=limit, actor=actor())
        else:
            page = kb.resolve(ref, actor=actor())
            reads = kb.page_reads(page.id, limit=limit, actor=actor())
    if as_json:
        emit_json({"page": {"id": page.id, "container": page.container, "title": page.title}, "reads": reads})
        return
    if not reads:
        console.print(f"[dim]no agent has read {markup_safe(_page_line(page))}[/]")
        return
    from rich.table import Table

    table = Table("when", "who", "how", "rank", "query", title=f"Reads of {markup_safe(_page_line(page))} ({len(reads)})")
    for r in reads:
        how = "search" if r["via"] == "search" else r["via"]
        table.add_row(when(r["at"]), markup_safe(r["actor"]), markup_safe(how), f"{r['rank']} of {r['of']}",
                      markup_safe(clean_line(r["query"] or "")))
    console.print(table)


# what each entry policy lets an agent do under a page (spec 003, "Pages")
POLICY_WORDS = {
    "OPEN": "agents add entries freely, for scratch work: repeats are written, no budget",
    "CURATED": "agents add entries, with the checks for repeats and PAGE_PROPOSED_ENTRY_BUDGET proposed entries "
               "each (the default)",
    "LOCKED": "agents read the page but add nothing: people maintain it by hand",
}


@page_app.command("policy")
@handle_errors
def page_policy(ref: str = typer.Argument(..., metavar="REF", help="Page id or CONTAINER/Title."),
                policy: str | None = typer.Argument(None, metavar="[POLICY]",
                                                    help="open, curated or locked; none shows the one in force."),
                as_json: bool = JSON_OPT) -> None:
    """A page's entry policy: what agents may add under it — OPEN, CURATED (the default) or LOCKED.

    Setting it is a person's (an agent, by --as or CREWLET_AS, is refused)."""
    from .cli_entries import entry_bank

    with entry_bank("entry policies") as bank:
        page = bank.kb.resolve(ref, actor=actor())
        was = bank.policy(page.id, actor=actor())
        now = bank.set_policy(page.id, policy, actor=actor()) if policy is not None else was
    if as_json:
        emit_json({"page": {"id": page.id, "container": page.container, "title": page.title}, "policy": now,
                   "was": was, "changed": now != was, "means": POLICY_WORDS[now]})
        return
    line = _page_line(page)
    if policy is None:
        console.print(f"[bold]{markup_safe(line)}[/]: {now} — {POLICY_WORDS[now]}", soft_wrap=True)
    elif now == was:
        console.print(f"[bold]{markup_safe(line)}[/] was already {now}: nothing changed", soft_wrap=True)
    else:
        console.print(f"[bold]{markup_safe(line)}[/]: {was} → {now} — {POLICY_WORDS[now]}", soft_wrap=True)


@page_app.command("link")
@handle_errors
def page_link(ref: str = typer.Argument(..., metavar="REF", help="Page id or CONTAINER/Title."),
              module: str | None = typer.Option(None, "--module", metavar="FOLDER",
                                                help="A module's folder: apps/server, or NAME:apps/server."),
              space: str | None = typer.Option(None, "--space", metavar="KEY", help="A space's key, e.g. ENG."),
              page_ref: str | None = typer.Option(None, "--page", metavar="REF", help="Another page (id or CONTAINER/Title)."),
              remove: bool = typer.Option(False, "--remove", help="Remove that link instead."),
              as_json: bool = JSON_OPT) -> None:
    """What a page is about: link it to a module, a space or another page, or list its links.

    An agent loading the context of work in a linked module gets the page's address first.

    Without --module, --space or --page, the page's links are listed."""
    given = [name for name, value in (("--module", module), ("--space", space), ("--page", page_ref))
             if value is not None]
    if len(given) > 1:
        raise typer.BadParameter(f"link one item at a time: {' and '.join(given)} were given", param_hint=given[1])
    if remove and not given:
        raise typer.BadParameter("say which link to remove: --module FOLDER, --space KEY or --page REF",
                                 param_hint="--remove")
    from .cli_entries import entry_bank

    with entry_bank("page links") as bank:
        page = bank.kb.resolve(ref, actor=actor())
        before = bank.links(page.id)
        links = (bank.link_page(page.id, module=module, space=space, page_ref=page_ref, remove=remove, actor=actor())
                 if given else before)
    changed = {(a.kind, a.item) for a in links} != {(b.kind, b.item) for b in before}
    if as_json:
        emit_json({"page": {"id": page.id, "container": page.container, "title": page.title}, "changed": changed,
                   "links": [link.to_json() for link in links]})
        return
    line = markup_safe(_page_line(page))
    if given:
        what = f"{given[0][2:]} {module or (space or '').upper() or page_ref}"
        if changed:
            console.print(f"{'unlinked' if remove else 'linked'} [bold]{line}[/] {'from' if remove else 'to'} "
                          f"{markup_safe(what)}", soft_wrap=True)
        else:
            console.print(f"[bold]{line}[/] {'was not' if remove else 'is already'} linked to {markup_safe(what)}: "
                          "nothing changed", soft_wrap=True)
    if not links:
        console.print(f"[dim]{line} is linked to nothing — `crewlet page link {markup_safe(ref)} --module FOLDER` "
                      "links it to a module[/]", soft_wrap=True)
        return
    console.print(f"[bold]{line}[/] is about:")
    for link in links:
        console.print(f"  {link.kind} {markup_safe(link.label)}  [dim]linked by {markup_safe(link.by)} "
                      f"{when(link.at)}[/]", soft_wrap=True)


__all__ = ["app", "CrewletError"]


@page_app.command("revert")
@handle_errors
def page_revert(ref: str = typer.Argument(..., metavar="REF", help="Page id or CONTAINER/Title."),
                revision: int = typer.Argument(..., metavar="REVISION", help="The revision whose body comes back "
                                                                             "(`crewlet page history REF`)."),
                base_rev: int | None = typer.Option(None, "--base-rev", metavar="N", help="The revision you last saw "
                                                    "the page at; refused if it was saved since. Default: its own."),
                as_json: bool = JSON_OPT) -> None:
    """Bring back an earlier revision's body as the page's next revision.

    Undoing a consolidation's save is its own revert (its entries stand again); undoing that revert folds them back."""
    from core.bank.page_revert import revert_page

    from .cli_entries import entry_bank

    with entry_bank() as bank:
        done = revert_page(bank, ref, revision, actor=actor(), base_revision=base_rev)
    if as_json:
        emit_json(done.to_json())
        return
    how = {"revert": f" (consolidation {done.proposal_id} reverted: {plural(len(done.standing), 'entry', 'entries')} "
                     "STANDING again)",
           "undo_revert": f" (consolidation {done.proposal_id} back: {plural(len(done.consolidated), 'entry', 'entries')}"
                          " folded in again)"}.get(done.via, "")
    _print_page_summary(done.page, f"reverted to revision {done.reverted_to}:", how)
