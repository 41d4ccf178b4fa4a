"""`crewlet confluence import DIR` and `crewlet plane import DIR`: publish Markdown to a remote backend
(see core/remote/publish.py). Searching a remote backend needs no command of its own: `crewlet search`
searches whichever backend company.toml names."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from .cli_common import (JSON_OPT, actor, console, containers_table, emit_json, err_console, fail, handle_errors,
                         open_node, page_lines, section)
from .sanitize import markup_safe as escape

if TYPE_CHECKING:
    from core.remote.publish import RemoteImportReport

app = typer.Typer()             # this module's commands (cli_root adds them to `crewlet`)
confluence_app = typer.Typer(help="The Confluence backend: publish Markdown to it.", no_args_is_help=True)
plane_app = typer.Typer(help="The Plane backend: publish Markdown to it.", no_args_is_help=True)
app.add_typer(confluence_app, name="confluence")
app.add_typer(plane_app, name="plane")

DIR_ARG = typer.Argument(..., metavar="DIR", exists=True, file_okay=False, dir_okay=True,
                         help="The directory of Markdown files, walked recursively (dot-directories skipped).")
DRY_RUN = typer.Option(False, "--dry-run", help="Plan against the site and print it; write nothing.")
UPDATE = typer.Option(False, "--update", help="Write pages that exist and differ from their files (else left as they are).")


def _where(report: RemoteImportReport) -> str:
    cred = report.credential or {}
    who = (f"{cred.get('actor')}'s own credential" if cred.get("credential") == "own" else "the company's credential")
    return f"{report.backend.capitalize()} at {report.url}, as {who} (${cred.get('env')})"


def _print(report: RemoteImportReport) -> None:
    if report.dry_run:
        console.print(f"Plan for [bold]{escape(report.root)}[/] → {escape(_where(report))}: {report.files} file(s), "
                      "nothing written")
        if report.spaces_to_create:
            console.print("Would create spaces: " + ", ".join(escape(k) for k in report.spaces_to_create))
    if report.pages and report.dry_run:
        console.print(containers_table(report))
    section("Creates" if report.dry_run else "Created", page_lines(report, "create"))
    section("Updates" if report.dry_run else "Updated", page_lines(report, "update"))
    if report.dry_run:
        section("Unchanged", page_lines(report, "unchanged"))
    section("Notes", [escape(str(n)) for n in report.notes])
    if report.dry_run:
        console.print(f"Would create {report.created}, update {report.updated}, leave {report.unchanged} as they are; "
                      f"{len(report.notes)} note(s).")
        return
    if report.spaces_created:
        console.print("Created spaces: " + ", ".join(escape(k) for k in report.spaces_created))
    console.print(f"Published [bold]{escape(report.root)}[/] to {escape(_where(report))}: created {report.created}, "
                  f"updated {report.updated}, left {report.unchanged} as they are, notes {len(report.notes)}, "
                  f"{report.seconds:.2f} s")


def _run(backend: str, directory: Path, *, dry_run: bool, update: bool, as_json: bool, **options: Any) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from core.importer import ImportProblems
    from core.remote.publish import publish

    with open_node() as node:
        company = node.company
    show_bar = not (as_json or dry_run) and err_console.is_terminal
    bar: Progress | None = None
    task: Any = None

    def on_progress(done: int, total: int) -> None:
        if bar is not None:
            bar.update(task, description="writing", total=total, completed=done)

    try:
        if show_bar:
            bar = Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                           TimeElapsedColumn(), console=err_console, transient=True)
            task = bar.add_task("planning against the site", total=None)
            with bar:
                report = publish(backend, company, directory, actor(), dry_run=dry_run, update=update,
                                 progress=on_progress, **options)
        else:
            report = publish(backend, company, directory, actor(), dry_run=dry_run, update=update, **options)
    except ImportProblems as exc:
        if not as_json:
            for problem in exc.problems:
                err_console.print(f"[red]problem:[/] {escape(str(problem))}", soft_wrap=True)
        raise
    if as_json:
        emit_json(report.to_json())
    else:
        _print(report)
    if report.failures or report.stopped:
        if not as_json:
            for f in report.failures:
                err_console.print(f"[red]failed:[/] {escape(str(f))}", soft_wrap=True)
        n = len(report.failures)
        fail(f"publishing finished with {n} failed write{'s' if n != 1 else ''}"
             + (f" and stopped: {report.stopped}" if report.stopped else "")
             + f" (created {report.created}, updated {report.updated}) — fix them and run again")


@confluence_app.command("import")
@handle_errors
def confluence_import(
    directory: Path = DIR_ARG,
    dry_run: bool = DRY_RUN,
    update: bool = UPDATE,
    create_space: bool = typer.Option(False, "--create-space",
                                      help="Create a space the tree needs that Confluence does not have."),
    as_json: bool = JSON_OPT,
) -> None:
    """Publish DIR's .md files to Confluence: one space per directory, titled by each file's first # H1.

    Credentials from integrations.confluence (or the acting actor's own). A file with `trigger:` is a tool skill (knowledge.skills_container). Pages are matched by (space, title); one that exists is left as it is unless --update. Pages carry their `labels:` and the crewlet-doc label. Every problem (a missing space, no title, two files publishing as one page…) is listed before anything is written."""
    _run("confluence", directory, dry_run=dry_run, update=update, as_json=as_json, create_space=create_space)

@plane_app.command("import")
@handle_errors
def plane_import(directory: Path = DIR_ARG, dry_run: bool = DRY_RUN, update: bool = UPDATE,
                 as_json: bool = JSON_OPT) -> None:
    """Publish DIR's .md files to Plane: one project per directory (by identifier), titled by each first # H1.

    Credentials from integrations.plane (or the acting actor's own key). A file with `trigger:` is a tool skill (integrations.plane.skills_project). Pages are matched by external_source "crewlet" and external_id "doc:<title>"; one that exists is left as it is unless --update. A project that does not exist stops the run before anything is written (crewlet never creates projects)."""
    _run("plane", directory, dry_run=dry_run, update=update, as_json=as_json)
