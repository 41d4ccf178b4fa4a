"""`crewlet ask QUESTION` and `crewlet ask --spend`.

An answer written by the configured chat model ([providers.llm]) from the knowledge base's own pages,
every claim cited [n] and checked; without a model, the passages it would be written from. The search
runs on this node's copy, caught up first as `crewlet search` does. On a terminal the answer is printed
as it streams in; piped, or with --json, once it is whole.

Exit codes: 0 an answer (a written one, checked or marked unchecked; the sources when no model is
configured; "nothing matches"); 1 no answer (the search could not run, a spend window had no room, the
model failed or refused: one line on stderr, the sources still on stdout); 2 usage (no question).
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import typer
from rich.text import Text

from .cli_common import (JSON_OPT, actor, catch_up_index, console, emit_json, err_console, fail, handle_errors, open_node,
                         outcome_speaks)
from .sanitize import clean_line, clean_text, markup_safe as escape
from datetime import UTC

if TYPE_CHECKING:
    from core.ask.answer import Answer
    from core.ask.spend import Window

app = typer.Typer()             # this module's top-level commands (cli_root adds them to `crewlet`)
PASSAGE_LINES = 6           # lines of each passage shown when no model wrote an answer


def _stream_to_terminal() -> Any:
    """A callback printing each piece of the answer as it arrives, made inert like everything printed."""

    def show(piece: str) -> None:
        sys.stdout.write(clean_text(piece))
        sys.stdout.flush()

    return show


def _render_sources(result: Answer, *, with_passages: bool) -> None:
    if not result.sources:
        return
    console.print("[bold]Sources[/]")
    for s in result.sources:
        line = Text(f"  [{s.n}] ", style="bold")
        line.append(clean_line(s.title), style="bold")
        # an entry (one fact under a page) says so: "entry under ENG/Caching"
        line.append(f"  {'entry under ' if s.entry_id else ''}{clean_line(s.address)}", style="cyan")
        if s.ancestors:
            line.append(f"  in {' › '.join(clean_line(a) for a in s.ancestors)}", style="dim")
        console.print(line, soft_wrap=True)
        if with_passages:
            for passage in s.passages:
                lines = clean_text(passage).splitlines()
                for text in lines[:PASSAGE_LINES]:
                    console.print(Text("      " + text), soft_wrap=True)
                if len(lines) > PASSAGE_LINES:
                    console.print(Text(f"      … {len(lines) - PASSAGE_LINES} more lines", style="dim"))
                console.print()


def _facts(result: Answer) -> str:
    facts = []
    if result.model:
        facts.append(result.model)
    if result.usage is not None:
        how = "as the endpoint reported" if result.usage.reported else "estimated here"
        cost = f"{result.usage.prompt_tokens:,} tokens in, {result.usage.completion_tokens:,} out ({how})"
        # a cached answer: what it cost when it was written, then that this ask spent nothing
        facts.append(f"written for {cost}" if result.cached else cost)
    if result.cached:
        facts.append("cached: true, this ask spent nothing")
    facts.append(f"{len(result.sources)} source{'s' if len(result.sources) != 1 else ''}, "
                 f"{result.source_tokens:,} tokens of passages")
    if result.usage is None and result.prompt_tokens:
        facts.append(f"a prompt of about {result.prompt_tokens:,} tokens")
    served = result.search.get("served_mode")
    if served:
        facts.append(f"search {served}")
    return " · ".join(facts)


def _render(result: Answer, streamed: bool) -> None:
    from core.ask.answer import ANSWERED, NO_MATCH, NO_MODEL, NOT_ANSWERED, NOT_SEARCHED

    if result.status == NOT_SEARCHED:        # nothing to show: the one line on stderr says why
        return

    if result.status in (ANSWERED, NOT_ANSWERED):
        if not streamed:
            console.print(Text(clean_text(result.text)))
        else:
            console.print()
        console.print()
        check = result.citations
        if result.status == NOT_ANSWERED:
            console.print("[yellow]The sources below do not answer the question.[/]")
        elif check is not None and check.checked:
            note = f" ({check.uncited} sentence{'s' if check.uncited != 1 else ''} cite nothing)" if check.uncited else ""
            console.print(f"[green]✓ checked:[/] every citation names a source below{escape(note)}")
        else:
            console.print(f"[bold yellow]⚠ unchecked:[/] [yellow]{escape(check.reason if check else 'no check')}[/]",
                          soft_wrap=True)
        if result.finish_reason == "length":
            console.print(f"[yellow]{escape(result.reason.split('; ')[-1])}[/]")
        _render_sources(result, with_passages=False)
    elif result.status == NO_MODEL:
        console.print(f"[yellow]{escape(result.reason)}[/]", soft_wrap=True)
        console.print()
        _render_sources(result, with_passages=True)
    elif result.status == NO_MATCH:
        console.print(escape(result.reason[:1].upper() + result.reason[1:]), soft_wrap=True)
        return
    else:                                    # no answer: the reason is the command's line on stderr
        if streamed:
            console.print()
            console.print("[yellow](the reply stopped there: it is not an answer)[/]")
        _render_sources(result, with_passages=False)
    console.print(f"[dim]{escape(_facts(result))}[/]", soft_wrap=True)
    if result.search.get("degraded") and result.search.get("message"):
        console.print(f"[yellow]the search: {escape(result.search['message'])}[/]", soft_wrap=True)


def _render_spend(windows: list[Window], model: str | None, ledger: str) -> None:
    from datetime import datetime

    console.print(f"[bold]Tokens spent on answers[/] [dim](the company's; windows in UTC; {escape(ledger)})[/]",
                  soft_wrap=True)
    console.print(f"  {'window':6} {'spent':>10} {'in':>10} {'out':>9} {'answers':>7} {'budget':>10} {'room':>10}  opens")
    for w in windows:
        opens = datetime.fromtimestamp(w.end / 1000, tz=UTC).strftime("%m-%d")
        budget = f"{w.budget:,}" if w.budget is not None else "—"
        room = f"{w.room:,}" if w.room is not None else "—"
        console.print(f"  {w.name:6} {w.spent:>10,} {w.prompt_tokens:>10,} {w.completion_tokens:>9,} {w.answers:>7,} "
                      f"{budget:>10} {room:>10}  {opens}")
        if w.reserved:
            console.print(f"  [dim]{'':7} {w.reserved:,} tokens held by answers being written[/]")
    console.print(f"[dim]model: {escape(model) if model else 'none configured ([providers.llm] in company.toml)'}[/]")


@app.command()
@handle_errors
def ask(
    question: list[str] | None = typer.Argument(None, metavar="QUESTION", help="The question, in words."),
    container: list[str] | None = typer.Option(None, "--container", "-c", metavar="KEY",
                                                  help="Answer only from this container (repeatable)."),
    spend: bool = typer.Option(False, "--spend", help="Show what answers spent in the company's day, week and "
                                                      "month windows, and the budgets; ask nothing."),
    fresh: bool = typer.Option(False, "--fresh", help="Write a new answer even when one is cached."),
    no_catch_up: bool = typer.Option(False, "--no-catch-up",
                                     help="Read the index as it is: no catch-up pass before searching."),
    as_json: bool = JSON_OPT,
) -> None:
    r"""Answer a question from the knowledge base's own pages, each claim citing its source.

    The model is \[providers.llm] in company.toml (any OpenAI-compatible chat endpoint); without one, the answer is the passages it would be written from. A question nothing matches is answered without a model. A repeat at the same corpus position is served from this node's cache and spends nothing. `--spend` shows the company's day, week and month windows.

    Exit 0 with an answer: a written one (checked, or marked unchecked), the passages when no model is configured, or "nothing matches". Exit 1 when there is no answer (the search could not run, a spend window had no room, the model failed or refused); 2 for no question."""
    if spend:
        if question:
            raise typer.BadParameter("--spend asks nothing: give it no question", param_hint="--spend")
        _spend(as_json)
        return
    text = " ".join(question or []).strip()
    if not text:
        fail("the question is empty: ask it in words, e.g. `crewlet ask \"how do we roll back a deploy?\"`",
             as_json=as_json, payload={"error": "usage", "message": "the question is empty"}, code=2)
    from core.ask.answer import FAILED, NO_MATCH, NOT_SEARCHED, OVER_BUDGET, REFUSED, Asker

    streaming = not as_json and sys.stdout.isatty()
    with open_node() as node:
        if not no_catch_up and not node.readonly:
            catch_up_index(node, show_progress=not as_json and sys.stderr.isatty())
        asker = Asker(node)
        try:
            with outcome_speaks():
                result = asker.answer(text, actor(), list(container) if container else None,
                                      on_text=_stream_to_terminal() if streaming else None, use_cache=not fresh)
        finally:
            asker.close()
        if result.status == NO_MATCH and not node.readonly:
            from core.pages.service import KnowledgeBase     # nothing above the floor: a knowledge gap (issue 37)
            from core.bank.gaps import note_gap

            note_gap(node, text, actor=KnowledgeBase(node).reader(actor()).handle, via="ask")
    streamed = streaming and not result.cached and bool(result.text)   # printed as it arrived
    if as_json:
        emit_json(result.to_json())
    else:
        _render(result, streamed)
    if result.status in (FAILED, OVER_BUDGET, REFUSED, NOT_SEARCHED):
        err_console.print(f"[bold red]crewlet:[/] {escape(result.reason)}", soft_wrap=True)
        raise typer.Exit(1)


def _spend(as_json: bool) -> None:
    from core.ask.spend import Ledger

    with open_node() as node:
        settings = node.company.llm
        ledger = Ledger(node.home.log_dir, node.node_id)
        windows = ledger.windows(settings)
    if as_json:
        emit_json({"windows": [w.to_json() for w in windows], "model": settings.model if settings else None,
                   "ledger": str(ledger.file)})
        return
    _render_spend(windows, settings.model if settings else None, str(ledger.file))
