"""`crewlet search` and `crewlet index status|build`.

`crewlet search` is a read, and on one machine it is also the moment a person expects to see their
own last edit. So before answering it runs a small incremental index pass when the index is behind
(never inside the apply transaction: the rows are already applied; the pass reads them on its own
connection) — core.search.indexer.catch_up_for_search, which `crewlet mcp` runs too. A home whose first
build has not run is built inline only when it is small (at most INLINE_BUILD_MAX_PAGES live pages,
seconds of work); a large one says "not searchable yet" and names `crewlet worker --once`, which shows
the build's progress. `--no-catch-up` reads the index as it is.
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import typer
from rich.text import Text

from core.search.seam import DEFAULT_LIMIT, NOT_SEARCHABLE_YET, Hit, Result, canonical_mode, modes_in_words

from .cli_common import (JSON_OPT, WordsOrSubcommand, actor, catch_up_index, console, damage_json, emit_json, fail,
                         handle_errors, open_node, outcome_speaks, refuse_elsewhere, when)
from .fmt import plural
from .search_words import search_words
# every string printed here is one line: made inert (controls, bidi) and markup-escaped by the one sanitiser
from .sanitize import clean_line, markup_safe as escape

if TYPE_CHECKING:
    from core.search.indexer import IndexPass, IndexStatus
    from core.search.snippets import TermFinder
# the index, the searcher and the semantic engine are imported by the commands that run them (start-up)

app = typer.Typer()             # this module's top-level commands (cli_root adds them to `crewlet`)
index_app = typer.Typer(help="The search indexes: the keyword index and how much is embedded for search by meaning "
                                 "(and the semantic index): what they cover, and building the keyword index.",
                         no_args_is_help=True)
app.add_typer(index_app, name="index")


class SearchCommand(WordsOrSubcommand):
    """`crewlet search QUERY`, and `crewlet search eval …` / `crewlet search floor …` when the first word
    is `eval` or `floor` (to search for either word alone, put an option first)."""

    subcommands = {"eval": "crewlet_tui.cli_eval:eval_app", "floor": "crewlet_tui.cli_floor:floor_app"}


# -- search ------------------------------------------------------------------------------------------

def _highlighted(snippet: str, finder: TermFinder | None) -> Text:
    text = Text(snippet)  # a Text, never markup: nothing from a page is ever parsed as markup
    if finder is not None:
        for start, end in finder.spans(snippet):
            text.stylize("bold yellow", start, end)
    return text


def _render(result: Result, finder: TermFinder | None, *, asked: str, limit: int) -> None:
    words = search_words(result, asked=asked, limit=limit, more=f"`--limit {max(2 * limit, 20)}` shows more")
    for i, h in enumerate(result.hits, 1):
        _render_hit(i, h, finder, remote=result.outcome.source is not None)
    console.print(f"[dim]{escape(words.line())}[/]", soft_wrap=True)
    for warning in words.warnings:
        console.print(f"[yellow]{escape(warning)}[/]", soft_wrap=True)


def _render_hit(i: int, h: Hit, finder: TermFinder | None, *, remote: bool = False) -> None:
    if h.is_entry:      # an entry under a page (spec 003): its kind and status, then where it stands
        console.print(f"[bold]{i}. {escape(h.entry_kind or 'FACT')} · {escape(h.entry_status or '')}[/]  "
                      f"[cyan]{escape(h.where())}[/]", soft_wrap=True)
    else:
        console.print(f"[bold]{i}. {escape(h.title)}[/]  [cyan]{escape(h.container)}/{escape(h.title)}[/]",
                      soft_wrap=True)
    if h.ancestors:
        console.print(f"   [dim]in {escape(' › '.join(h.ancestors))}[/]", soft_wrap=True)
    if h.snippet:
        console.print(Text("   ") + _highlighted(clean_line(h.snippet), finder), soft_wrap=True)
    ident = f"entry {escape(h.entry_id)} · page {escape(h.page_id)}" if h.entry_id else f"id {escape(h.page_id)}"
    console.print(f"   [dim]{ident} · score {h.score:.3f}[/]")
    if h.url and remote:   # a remote hit: where to open it
        console.print(f"   [dim]{escape(h.url)}[/]", soft_wrap=True)


def _not_served_line(result: Result, caught: IndexPass | None) -> str:
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

@app.command(cls=SearchCommand)
@handle_errors
def search(
    query: list[str] = typer.Argument(..., metavar="QUERY", help="Plain words; no query language."),
    mode: str = typer.Option("hybrid", "--mode", "-m", metavar="MODE",
                             help=f"What to rank by: {modes_in_words()} — words and meaning fused, words "
                                  "alone (BM25), or meaning alone."),
    limit: int = typer.Option(DEFAULT_LIMIT, "--limit", "-n", min=1, max=1000, metavar="N",
                              help="At most this many hits (the app shows 20)."),
    container: list[str] | None = typer.Option(None, "--container", "-c", metavar="KEY",
                                                  help="Only this container (repeatable), inside knowledge.scope."),
    no_catch_up: bool = typer.Option(False, "--no-catch-up",
                                     help="Read the index as it is: no catch-up pass before answering."),
    as_json: bool = JSON_OPT,
) -> None:
    """Search the knowledge base (hybrid by default: keyword BM25 and meaning, fused). Exit 0 when it ran, hits or none; 1 when it could not run; 2 for no query.

    An answer with no hits says "nothing matched", or "nothing close enough" when pages were ranked by meaning but none reached the relevance floor (`crewlet search floor`). A query of only punctuation or common words cannot run in keyword mode, nor with nothing to rank it by meaning, and exits 1; hybrid and semantic rank it by meaning, under the floor.

    `crewlet search eval [--store FILE] [--probes N] [--window BYTES] [--json]` measures instead whether search by meaning recovers the exact ranking on this corpus (`crewlet search eval --help`); `crewlet search floor [--measure] [--json]` shows (or measures) the relevance floor. To search for the word "eval" or "floor" alone, put an option first."""
    canonical = canonical_mode(mode)
    if canonical is None:
        raise typer.BadParameter(f"'{mode}' is not one of: {modes_in_words()}", param_hint="--mode")
    mode = canonical
    from core.knowledge import is_remote, make_searcher
    from core.search.seam import Query

    text = " ".join(query)
    if not text.strip():
        fail("the query is empty: give the words to search for, e.g. `crewlet search deploy runbook`",
             as_json=as_json, payload={"error": "usage", "message": "the query is empty"}, code=2)
    with open_node() as node:
        damage = node.damage
        caught = None
        searcher = make_searcher(node)   # knowledge.backend decides: this node's copy, or the site, live
        remote = is_remote(searcher)
        asked = Query(text, actor=actor(), limit=limit, mode=mode, containers=list(container) if container else None)
        try:
            if not remote:
                searcher.prefetch(asked)   # the query's vector is embedded while the index catches up
            if not remote and not no_catch_up and not node.readonly:  # a read-only home: its index as it stands
                caught = catch_up_index(node, show_progress=not as_json and sys.stderr.isatty())
            with outcome_speaks():
                result = searcher.search(asked)
            # the search's own term finder (no second analysis); a remote backend has none
            finder = getattr(searcher, "last_finder", None) if result.hits else None
        finally:
            searcher.close()
    # a damaged log is carried in the answer (the key is there only then: the answer's shape stays as it was)
    said = {"log_damage": damage_json(damage)} if damage is not None else {}
    if result.outcome.served_mode is None:
        fail(_not_served_line(result, caught), as_json=as_json, payload=result.to_json() | said)
    if as_json:
        emit_json(result.to_json() | said)
        return
    _render(result, finder, asked=mode, limit=limit)

@index_app.command("status")
@handle_errors
def index_status(as_json: bool = JSON_OPT) -> None:
    """What the keyword index covers, how much is embedded for search by meaning, and the semantic index.

    How far behind the rows the keyword index is; the embedding duty's coverage and latest events; whether the semantic index is installed, how many lists a search reads, and a training in progress."""
    # rows and the index's small files only: no Whoosh, no numpy, no model (flat at any size)
    from core.duties.status import index_status as semantic_index_status
    from core.duties.status import semantic_status
    from core.search.index_state import keyword_status

    with open_node() as node:
        refuse_elsewhere(node, "index")
        with node.lock:
            st = keyword_status(node.home.index_dir, node.conn)
        meaning = semantic_status(node)
        ivf = semantic_index_status(node, meaning.get("space"))
        damage = node.damage
    if as_json:
        emit_json(st.to_json() | {"semantic": meaning, "semantic_index": ivf, "log_damage": damage_json(damage)})
        return
    _render_status(st, damage)
    _render_semantic(meaning)
    _render_index(ivf)

@index_app.command("build")
@handle_errors
def index_build(
    rebuild: bool = typer.Option(False, "--rebuild", help="Derive every page again into a new index."),
    as_json: bool = JSON_OPT,
) -> None:
    """Build the keyword index now (the first build, a due re-derivation, or --rebuild), then catch up.

    Embedding for search by meaning is the background worker's (`crewlet worker`, or the app while it runs)."""
    from core.search.indexer import Indexer

    from .progress_bars import ProgressBars

    with open_node() as node:
        refuse_elsewhere(node, "index")
        with Indexer(node.home) as indexer:
            damage = node.damage
            progress = ProgressBars(console, enabled=not as_json)
            try:
                report = indexer.run_pass(force_rebuild=rebuild, progress=progress.bar("indexing pages"), wait=True)
            finally:
                progress.close()
            st = indexer.status()
    if as_json:
        emit_json({"pass": report.to_json(), "status": st.to_json(), "log_damage": damage_json(damage)})
        return
    console.print(escape("index " + report.describe()) + f" in {report.seconds:.1f}s")
    _render_status(st, damage)


def _render_status(st: IndexStatus, damage: Any = None) -> None:
    console.print("[bold]keyword index[/]")
    if st.first_build_done:
        first = f"done {when(st.first_build_at)}"
    else:
        first = "[yellow]not yet[/] — searches answer “not searchable yet”; run `crewlet worker --once`"
    lines = [("first build", first)]
    if st.building is not None:
        b = st.building
        lines.append(("building", f"{b.done:,} of {b.total:,} pages (derivation {b.derivation}, since {when(b.started_at)})"))
    lines.append(("pages indexed", f"{st.pages_indexed:,}"))
    behind = f"[yellow]{st.behind:,} behind[/]" if st.behind else "all of it"
    if damage is not None:
        # never "up to date" over a damaged log: what was applied stops at the damage
        good = damage.good_through
        behind += (f" — [red]the log is damaged past record {good:,}[/]" if good is not None else
                   " — [red]the log is damaged[/]") + ": `crewlet log check` names it"
    elif not st.behind:
        behind = "up to date"
    lines.append(("covers", f"{st.indexed_seq:,} of the {st.applied_seq:,} changes this node applied — {behind}"))
    deriv = f"{st.derivation if st.derivation is not None else '—'} (this crewlet derives {st.current_derivation})"
    if st.rebuild_pending:
        deriv += " — [yellow]a re-derivation is due[/]: the next `crewlet worker` pass runs it"
    lines.append(("derivation", deriv))
    if st.directory:
        lines.append(("directory", escape(st.directory)))
    width = max(len(k) for k, _ in lines)
    for key, value in lines:
        console.print(f"{key:<{width}}  {value}", soft_wrap=True)


def _render_semantic(m: dict[str, Any]) -> None:
    console.print()
    lines: list[tuple[str, str]] = []
    if not m["vectors"]:
        lines.append(("vectors", "off (knowledge.vectors = false): searches rank by keyword alone and say so"))
    else:
        lines.append(("vectors", escape(f"{m['model']} ({m['provider']}, {m['dimensions']} dimensions)")))
        share = f"{m['covered']:,} of {m['total']:,} pages ({100 * m['coverage']:.1f}%)"
        if m["warning"]:
            share = (f"[yellow]{share} — below 95%[/]: `crewlet worker` embeds the rest"
                     + (" (the app's background worker does too)" if m["total"] else ""))
        lines.append(("coverage", share))
        if m["held"]:
            lines.append(("held back", f"[yellow]{plural(m['held'], 'page')} the provider refused[/] — offered again hourly"))
            for held in m.get("held_pages", []):
                lines.append(("", f"  {escape(held['container'])}/{escape(held['title'])}: {escape(held['reason'])} "
                                  f"[dim](offered again {when(held['held_until'])})[/]"))
            if m["held"] > len(m.get("held_pages", [])):
                lines.append(("", f"  … and {m['held'] - len(m.get('held_pages', [])):,} more"))
    others = {s: n for s, n in m["spaces"].items() if s != m.get("space")}
    if others:
        lines.append(("other spaces", escape(", ".join(f"{s} ({n:,})" for s, n in others.items()))
                      + " — the pages not yet refilled in the configured model"))
    last = m.get("last_pass")
    if last:
        text = f"[red]failed: {escape(last['error'])}[/]" if last["error"] else escape(last["summary"])
        lines.append(("last pass", f"{text} [dim]({when(last['at'])}, {escape(last['holder'])})[/]"))
    for name, event in sorted(m["events"].items()):
        lines.append(("event", f"[yellow]{escape(name)}[/] {when(event['at'])}: {escape(event['message'])}"))
    console.print("[bold]search by meaning[/]")
    width = max(len(k) for k, _ in lines)
    for key, value in lines:
        console.print(f"{key:<{width}}  {value}", soft_wrap=True)


def _render_index(ix: dict[str, Any]) -> None:
    """The semantic index: installed or why not, how many lists a search reads, a training in progress."""
    if not ix.get("space"):
        return
    lines: list[tuple[str, str]] = []
    if ix["installed"]:
        m = ix.get("measured") or {}
        lines.append(("first stage", f"the semantic index: {ix['probes']} of {ix['lists']:,} lists probed "
                                     f"(generation {ix['generation']}, trained on {ix['trained_sources']:,} pages)"))
        if m:
            lines.append(("measured", escape(f"{m.get('worst_recall', 0):.4f} against a {m.get('worst_floor', 0):.4f} "
                                             f"floor in its worst shape ({m.get('worst_shape', '—')}), "
                                             f"{m.get('head_misses', 0)} head miss(es), {when(ix['measured_at'])}")))
        if ix["refiled"] < ix["batches"]:
            lines.append(("re-filing", f"[yellow]{ix['refiled']} of {ix['batches']} batches applied[/] — searches read "
                                       "the rows not yet re-filed in full"))
    elif ix["sources"] < ix["min_sources"]:
        lines.append(("first stage", f"the full scan: {ix['sources']:,} pages, an index needs {ix['min_sources']:,}"))
    else:
        why = (f"the training at {ix['declined_at']:,} pages needed more than half its lists"
               if ix.get("declined_at") else "not trained yet — `crewlet worker` trains it")
        lines.append(("first stage", f"the full scan: {escape(why)}"))
    running = ix.get("running")
    if running:
        lines.append(("training" if running.get("phase") == "training" else "measuring",
                      f"[yellow]{escape(running.get('label', ''))}[/] {running.get('done', 0):,} of "
                      f"{running.get('total', 0):,} (since {when(running.get('since'))})"))
    last = ix.get("last_pass")
    if last:
        text = f"[red]failed: {escape(last['error'])}[/]" if last["error"] else escape(last["summary"])
        lines.append(("last pass", f"{text} [dim]({when(last['at'])}, {escape(last['holder'])})[/]"))
    console.print()
    console.print("[bold]semantic index[/]")
    width = max(len(k) for k, _ in lines)
    for key, value in lines:
        console.print(f"{key:<{width}}  {value}", soft_wrap=True)
