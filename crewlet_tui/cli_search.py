"""`crewlet search`, `crewlet index status|build` and `crewlet worker`.

`crewlet search` is a read, and on one machine it is also the moment a person expects to see their
own last edit. So before answering it runs a small incremental index pass when the index is behind
(never inside the apply transaction: the rows are already applied; the pass reads them on its own
connection). A home whose first build has not run is built inline only when it is small (at most
INLINE_BUILD_MAX_PAGES live pages, seconds of work); a large one says "not searchable yet" and names
`crewlet worker --once`, which shows the build's progress. `--no-catch-up` reads the index as it is.
"""
from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

from core.search.indexer import Indexer, IndexStatus, PassReport
from core.search.native import NativeSearcher
from core.search.seam import DEFAULT_LIMIT, MODES, NOT_SEARCHABLE_YET, Hit, Query, Result
from core.search.snippets import TermFinder

from .cli_common import JSON_OPT, actor, console, emit_json, err_console, fail, handle_errors, open_kb, open_node, when
# every string printed here is one line: made inert (controls, bidi) and markup-escaped by the one sanitiser
from .sanitize import clean_line, markup_safe as escape

INLINE_BUILD_MAX_PAGES = 2000     # `crewlet search` builds a first index this small itself (a few seconds)
CATCH_UP_MAX_ROWS = 5000          # and catches up at most this many changed pages before answering
REAP_EVERY_S = 3600.0             # the trash reaper runs hourly in the worker loop

index_app = typer.Typer(help="The keyword index: what it covers, and building it.", no_args_is_help=True)


# -- progress --------------------------------------------------------------------------------------

class BuildProgress:
    """A rich progress bar for an index build, shown only once a build actually reports progress."""

    def __init__(self, *, enabled: bool, label: str = "indexing pages", stderr: bool = True) -> None:
        self.enabled = enabled
        self.label = label
        self.console = err_console if stderr else console
        self._progress: Progress | None = None
        self._task: Any = None

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self._progress is None:
            self._progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), TimeRemainingColumn(), console=self.console, transient=False)
            self._progress.start()
            self._task = self._progress.add_task(self.label, total=total)
        self._progress.update(self._task, completed=done, total=total)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def _pass_line(report: PassReport) -> str:
    words = {"build": "first build", "rebuild": "re-derived every page", "incremental": "caught up",
             "none": "nothing to do", "busy": "another indexer is running", "skipped": "skipped",
             "stopped": "stopped", "failed": "failed"}.get(report.kind, report.kind)
    line = (f"index {words}: {report.indexed} indexed, {report.deleted} removed, covers {report.indexed_seq} "
            f"of {report.applied_seq} applied")
    if report.more:
        line += " (more to do)"
    if report.note:
        line += f" — {report.note}"
    return line


# -- search ------------------------------------------------------------------------------------------

def _catch_up(node: Any, *, show_progress: bool) -> PassReport | None:
    """The small pass `crewlet search` runs before answering (see the module's docstring)."""
    progress = BuildProgress(enabled=show_progress, label="building the index")
    try:
        with Indexer(node.home) as indexer:
            return indexer.run_pass(max_rows=CATCH_UP_MAX_ROWS, full_build_max=INLINE_BUILD_MAX_PAGES,
                                    progress=progress)
    except Exception as exc:  # a search still answers from the index as it is
        err_console.print(f"[yellow]warning:[/] the index could not catch up: {escape(str(exc))}", soft_wrap=True)
        return None
    finally:
        progress.close()


@contextmanager
def _outcome_speaks() -> Iterator[None]:
    """The search's own warning (the reason it could not run) is what its outcome says, and the CLI
    prints the outcome: while nothing configured logging, the warning does not reach stderr twice."""
    logger = logging.getLogger("crewlet.search")
    if logger.hasHandlers():
        yield
        return
    quiet = logging.NullHandler()
    logger.addHandler(quiet)
    try:
        yield
    finally:
        logger.removeHandler(quiet)


def _highlighted(snippet: str, finder: TermFinder | None) -> Text:
    text = Text(snippet)  # a Text, never markup: nothing from a page is ever parsed as markup
    if finder is not None:
        for start, end in finder.spans(snippet):
            text.stylize("bold yellow", start, end)
    return text


def _render(result: Result, finder: TermFinder | None) -> None:
    out = result.outcome
    if not result.hits:
        console.print("nothing matched")
    for i, h in enumerate(result.hits, 1):
        _render_hit(i, h, finder)
    cov = out.coverage
    facts = [f"{len(result.hits)} hit{'s' if len(result.hits) != 1 else ''}", f"served {out.served_mode}",
             f"{cov.pages_indexed} pages indexed"]
    if cov.behind:
        facts.append(f"index {cov.behind} record{'s' if cov.behind != 1 else ''} behind")
    console.print(f"[dim]{escape(' · '.join(facts))}[/]")
    if out.message:
        console.print(f"[yellow]{escape(out.message)}[/]", soft_wrap=True)


def _render_hit(i: int, h: Hit, finder: TermFinder | None) -> None:
    console.print(f"[bold]{i}. {escape(h.title)}[/]  [cyan]{escape(h.container)}/{escape(h.title)}[/]", soft_wrap=True)
    if h.ancestors:
        console.print(f"   [dim]in {escape(' › '.join(h.ancestors))}[/]", soft_wrap=True)
    if h.snippet:
        console.print(Text("   ") + _highlighted(clean_line(h.snippet), finder), soft_wrap=True)
    console.print(f"   [dim]id {escape(h.page_id)} · score {h.score:.3f}[/]")


def _not_served_line(result: Result, caught: PassReport | None) -> str:
    out = result.outcome
    if out.degraded == NOT_SEARCHABLE_YET:
        why = "this node's first index build has not run"
        if caught is not None and caught.kind == "skipped" and caught.note:
            why = caught.note
        elif caught is not None and caught.kind == "busy":
            why = "another process is building the index now"
        return f"not searchable yet — {why}: run `crewlet worker --once` (or `crewlet index build`)"
    return out.message or "the search did not run"


# -- the commands --------------------------------------------------------------------------------------

def register(app: typer.Typer) -> None:
    app.add_typer(index_app, name="index")

    @app.command()
    @handle_errors
    def search(
        query: list[str] = typer.Argument(..., metavar="QUERY", help="Plain words; no query language."),
        mode: str = typer.Option("hybrid", "--mode", "-m", help=f"One of: {', '.join(MODES)}."),
        limit: int = typer.Option(DEFAULT_LIMIT, "--limit", "-n", min=1, max=1000, help="At most this many hits."),
        container: Optional[list[str]] = typer.Option(None, "--container", "-c",
                                                      help="Only this container (repeatable), inside knowledge.scope."),
        no_catch_up: bool = typer.Option(False, "--no-catch-up",
                                         help="Read the index as it is: no catch-up pass before answering."),
        as_json: bool = JSON_OPT,
    ) -> None:
        """Search the knowledge base by keyword (BM25). Exit 1 when it could not run, 2 for no query.

        A query with no word that can be searched (only punctuation or common words) exits 1 too."""
        mode = mode.strip().lower()
        if mode not in MODES:
            raise typer.BadParameter(f"'{mode}' is not one of: {', '.join(MODES)}", param_hint="--mode")
        text = " ".join(query)
        if not text.strip():
            fail("the query is empty: give the words to search for, e.g. `crewlet search deploy runbook`",
                 as_json=as_json, payload={"error": "usage", "message": "the query is empty"}, code=2)
        with open_node() as node:
            caught = None
            if not no_catch_up and not node.readonly:  # a read-only home is searched as its index stands
                caught = _catch_up(node, show_progress=not as_json and sys.stderr.isatty())
            searcher = NativeSearcher(node)
            try:
                with _outcome_speaks():
                    result = searcher.search(Query(text, actor=actor(), limit=limit, mode=mode,
                                                   containers=list(container) if container else None))
                finder = searcher.last_finder if result.hits else None  # the search's own: no second analysis
            finally:
                searcher.close()
        if result.outcome.served_mode is None:
            fail(_not_served_line(result, caught), as_json=as_json, payload=result.to_json())
        if as_json:
            emit_json(result.to_json())
            return
        _render(result, finder)

    @app.command()
    @handle_errors
    def worker(
        once: bool = typer.Option(False, "--once", help="One pass of every duty, then exit."),
        interval: float = typer.Option(2.0, "--interval", min=0.1, help="Seconds between passes."),
        as_json: bool = JSON_OPT,
    ) -> None:
        """Run the background duties: apply the log, keep the index behind the rows, reap the trash."""
        with open_kb() as kb:
            node = kb.node
            indexer = Indexer(node.home)
            progress = BuildProgress(enabled=not as_json, label="indexing pages", stderr=False)
            try:
                if once:
                    applied = node.catch_up()
                    report = indexer.run_pass(progress=progress, wait=True)
                    progress.close()
                    reaped = kb.reap()
                    if as_json:
                        emit_json({"applied": applied, "index": report.to_json(),
                                   "reaped": {"purged": reaped.purged, "refused": reaped.refused, "passes": reaped.passes}})
                        return
                    if applied:
                        console.print(f"applied {applied} record(s) from the log")
                    console.print(escape(_pass_line(report)))
                    console.print(f"trash reaper: {reaped.purged} purged, {reaped.refused} refused")
                    return
                _loop(kb, indexer, progress, interval, as_json)
            finally:
                progress.close()
                indexer.close()

    @index_app.command("status")
    @handle_errors
    def index_status(as_json: bool = JSON_OPT) -> None:
        """What the keyword index covers, and how far behind the applied rows it is."""
        with open_node() as node, Indexer(node.home) as indexer:
            st = indexer.status()
        if as_json:
            emit_json(st.to_json())
            return
        _render_status(st)

    @index_app.command("build")
    @handle_errors
    def index_build(
        rebuild: bool = typer.Option(False, "--rebuild", help="Derive every page again into a new index."),
        as_json: bool = JSON_OPT,
    ) -> None:
        """Build the index now (the first build, a due re-derivation, or --rebuild), then catch up."""
        with open_node() as node, Indexer(node.home) as indexer:
            progress = BuildProgress(enabled=not as_json, label="indexing pages", stderr=False)
            try:
                report = indexer.run_pass(force_rebuild=rebuild, progress=progress, wait=True)
            finally:
                progress.close()
            st = indexer.status()
        if as_json:
            emit_json({"pass": report.to_json(), "status": st.to_json()})
            return
        console.print(escape(_pass_line(report)) + f" in {report.seconds:.1f}s")
        _render_status(st)


def _render_status(st: IndexStatus) -> None:
    if st.first_build_done:
        first = f"done {when(st.first_build_at)}"
    else:
        first = "[yellow]not yet[/] — searches answer “not searchable yet”; run `crewlet worker --once`"
    lines = [("first build", first)]
    if st.building is not None:
        b = st.building
        lines.append(("building", f"{b.done:,} of {b.total:,} pages (derivation {b.derivation}, since {when(b.started_at)})"))
    lines.append(("pages indexed", f"{st.pages_indexed:,}"))
    behind = f"[yellow]{st.behind:,} behind[/]" if st.behind else "up to date"
    lines.append(("covers", f"log seq {st.indexed_seq:,} of {st.applied_seq:,} applied — {behind}"))
    deriv = f"{st.derivation if st.derivation is not None else '—'} (this crewlet derives {st.current_derivation})"
    if st.rebuild_pending:
        deriv += " — [yellow]a re-derivation is due[/]: the next `crewlet worker` pass runs it"
    lines.append(("derivation", deriv))
    if st.directory:
        lines.append(("directory", escape(st.directory)))
    width = max(len(k) for k, _ in lines)
    for key, value in lines:
        console.print(f"{key:<{width}}  {value}", soft_wrap=True)


def _loop(kb: Any, indexer: Indexer, progress: BuildProgress, interval: float, as_json: bool) -> None:
    node = kb.node
    last_reap = 0.0
    console.print(f"[dim]crewlet worker on {escape(str(node.home.root))} — every {interval:g}s; Ctrl-C stops it[/]")
    try:
        while True:
            stamp = datetime.now().strftime("%H:%M:%S")
            applied = node.catch_up()
            report = indexer.run_pass(progress=progress)
            progress.close()
            if as_json:
                if report.kind not in ("none", "busy") or applied:
                    emit_json({"at": stamp, "applied": applied, "index": report.to_json()})
            elif report.kind not in ("none", "busy"):
                console.print(f"[dim]{stamp}[/] {escape(_pass_line(report))}")
            if time.monotonic() - last_reap >= REAP_EVERY_S:
                reaped = kb.reap()
                last_reap = time.monotonic()
                if reaped.purged or reaped.refused:
                    console.print(f"[dim]{stamp}[/] trash reaper: {reaped.purged} purged, {reaped.refused} refused")
            if not report.more:
                threading.Event().wait(interval)
    except KeyboardInterrupt:
        console.print("worker stopped")
