"""`crewlet import DIR`: publish a directory of Markdown files as pages (see core/importer)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from .cli_common import (JSON_OPT, LISTED, Listing, actor, console, containers_table, err_console, fail, handle_errors,
                         open_kb, page_lines, section)
from .sanitize import json_text, markup_safe as escape  # titles, paths and notes made inert by the one sanitiser

if TYPE_CHECKING:
    from core.importer import ImportReport
    from core.pages.service import KnowledgeBase
# the importer and rich's progress bars are imported when the command runs (start-up)

app = typer.Typer()             # this module's top-level commands (cli_root adds them to `crewlet`)

def _notes(report: ImportReport, skip: str | None = None) -> Listing:
    out = Listing()
    for n in report.notes:
        if n.code == skip:
            continue
        out.total += 1
        if len(out) < LISTED:
            out.append(escape(str(n)))
    return out


def _print_plan(report: ImportReport) -> None:
    layout = f"the tree, into {report.into}" if report.mode == "tree" else "one space per directory"
    console.print(f"Plan for [bold]{escape(report.root)}[/] ({layout}): {report.files} file(s), nothing written")
    if report.declared:
        console.print("Would declare: " + ", ".join(escape(k) for k in report.declared))
    if report.created or report.updated or report.unchanged:
        console.print(containers_table(report))
    section("Creates", page_lines(report, "create"))
    section("Updates", page_lines(report, "update"))
    section("Unchanged", page_lines(report, "unchanged"))
    section("Notes", _notes(report))
    console.print(f"Would create {report.created}, update {report.updated}, leave {report.unchanged} unchanged; "
                  f"{len(report.notes)} note(s).")


def _print_summary(report: ImportReport) -> None:
    if report.declared:
        console.print("Declared: " + ", ".join(escape(k) for k in report.declared))
    section("Notes", _notes(report))
    console.print(f"Imported [bold]{escape(report.root)}[/]: created {report.created}, updated {report.updated}, "
                  f"unchanged {report.unchanged}, notes {len(report.notes)}, {report.seconds:.2f} s")


def _into_key(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise typer.BadParameter("give the space key to import into (e.g. --into DOCS), or leave --into out")
    return value


def _print_nothing(report: ImportReport) -> bool:
    """A tree with no .md files says so, rather than "created 0"."""
    if report.files or report.created or report.updated or report.unchanged:
        return False
    console.print(f"No .md files under [bold]{escape(report.root)}[/] (dot-directories are skipped): nothing to "
                  "import.")
    section("Notes", _notes(report, skip="no_markdown"))
    return True


@app.command("import")
@handle_errors
def import_cmd(
    directory: Path = typer.Argument(..., metavar="DIR", exists=True, file_okay=False, dir_okay=True,
                                     help="The directory of Markdown files, walked recursively "
                                          "(dot-directories skipped)."),
    into: str | None = typer.Option(None, "--into", metavar="KEY", callback=_into_key,
                                       help="Keep the tree: every directory a folder page in space KEY."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; write nothing."),
    title_from_name: bool = typer.Option(False, "--title-from-name",
                                         help="A doc with no title: and no # H1 takes its file name."),
    declare_spaces: bool = typer.Option(False, "--declare-spaces",
                                        help="Declare in company.toml the spaces the tree needs."),
    as_json: bool = JSON_OPT,
) -> None:
    """Publish DIR's .md files as pages: one space per directory (the spec's layout) or --into KEY.

    A file with `trigger:` in its frontmatter is a tool skill (the skills container). Title: frontmatter `title:`, else the first `# ` H1 (stripped from the body). Frontmatter `space:`, `parent:` and `labels:` are honoured. Idempotent: an unchanged file writes nothing, an edited one is saved in place, an existing page is never moved. Every problem is listed before anything is written.

    With --into KEY, titles are unique per space, not per folder: where two collide, the one met first (shallower, then by path) keeps it and the others take their directory's path, e.g. "About (7.4/Microsoft.PowerShell.Core)". A page already published under a file's own folder keeps its title, so adding or removing files never moves content between pages."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from core.importer import ImportProblems

    with open_kb() as kb:
        progress_bar: Progress | None = None
        task: Any = None

        def on_progress(done: int, total: int) -> None:
            nonlocal task
            if progress_bar is None:
                return
            if task is None:
                task = progress_bar.add_task("planning", total=None)
            progress_bar.update(task, description="writing", total=total, completed=done)

        show_bar = not (as_json or dry_run) and err_console.is_terminal
        try:
            if show_bar:
                progress_bar = Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                                        MofNCompleteColumn(), TimeElapsedColumn(), console=err_console,
                                        transient=True)
                task = progress_bar.add_task("reading and planning", total=None)
                with progress_bar:
                    report = _run(kb, directory, into, dry_run, title_from_name, declare_spaces, on_progress)
            else:
                report = _run(kb, directory, into, dry_run, title_from_name, declare_spaces, None)
        except ImportProblems as exc:
            try:
                if not as_json:
                    for problem in exc.problems:
                        err_console.print(f"[red]problem:[/] {escape(str(problem))}", soft_wrap=True)
            finally:
                exc.report.close()
            raise
    try:
        _output(report, as_json, dry_run)
    finally:
        report.close()
    if report.failures:
        if not as_json:
            for f in report.failures:
                err_console.print(f"[red]failed:[/] {escape(str(f))}", soft_wrap=True)
        n = len(report.failures)
        fail(f"import finished with {n} refused write{'s' if n != 1 else ''} "
             f"(created {report.created}, updated {report.updated}) — fix them and run again")


def _output(report: ImportReport, as_json: bool, dry_run: bool) -> None:
    if as_json:
        # written as the plan is read: a million pages' report never stands in memory at once
        report.write_json(sys.stdout, lambda value, indent: json_text(value, indent=indent))
        sys.stdout.flush()
    elif _print_nothing(report):
        pass
    elif dry_run:
        _print_plan(report)
    else:
        _print_summary(report)


def _run(kb: KnowledgeBase, directory: Path, into: str | None, dry_run: bool, title_from_name: bool, declare_spaces: bool,
         progress: Any) -> ImportReport:
    from core.importer import import_directory

    return import_directory(kb, directory, actor=actor(), into=into, dry_run=dry_run,
                            title_from_name=title_from_name, declare_spaces=declare_spaces, progress=progress)
