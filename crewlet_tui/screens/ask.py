"""Ask: a question in words, answered from the pages the person may read, every claim cited [n].

The answer is written in a thread worker (core.ask: the search, the passages, the model) that posts each
piece of the reply as it arrives; the screen streams it into a Markdown view, so the app stays responsive
while a slow model writes. When the reply is whole, its citations are checked: each [n] becomes a link to
source n (the n-th entry of the list below the answer, which opens its page), and a reply citing a source
that was not given, or none, is marked unchecked in the status line — never silently. With no model
configured the screen shows the passages an answer would be written from, and how to configure one.
Asking again, or leaving, stops a reply still being written.
"""
from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Input, Markdown, OptionList, Static
from textual.widgets.option_list import Option

from ..links import classify
from ..sanitize import clean_line, clean_text
from ..widgets.page_view import PageBody
from . import registry
from .base import CrewletScreen, error_text

if TYPE_CHECKING:
    from textual.widgets.markdown import MarkdownStream

    from core.ask.answer import Answer, Asker

SOURCE_HREF = "#source-{n}"
_SOURCE_HREF = re.compile(r"^#source-(\d+)$")
_CITATION = re.compile(r"(?<!\\)\[(\d{1,3}(?:\s*(?:[,;]|[-–])\s*\d{1,3})*)\](?!\()")


class AnswerStreamed(Message):
    """A piece of the reply arrived."""

    def __init__(self, generation: int, piece: str) -> None:
        super().__init__()
        self.generation, self.piece = generation, piece


class AnswerArrived(Message):
    """The answer is whole (written, or the reason there is none)."""

    def __init__(self, generation: int, answer: Answer) -> None:
        super().__init__()
        self.generation, self.answer = generation, answer


class AnswerRefused(Message):
    """The ask was refused before anything was searched (an agent, an empty question)."""

    def __init__(self, generation: int, error: BaseException) -> None:
        super().__init__()
        self.generation, self.error = generation, error


def linked(text: str, sources: int) -> str:
    """The reply's Markdown with each citation of a given source made a link to it ([2] → [\\[2\\]](#source-2))."""
    from core.ask.citations import numbers

    def link(m: re.Match[str]) -> str:
        found = numbers(m.group(1))
        if not found or any(not 1 <= n <= sources for n in found):
            return m.group(0)
        return "".join(f"[\\[{n}\\]]({SOURCE_HREF.format(n=n)})" for n in found)

    out, fence = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        out.append(line if fence else _CITATION.sub(link, line))
    return "\n".join(out)


def source_prompt(source: Any) -> Text:
    text = Text(f"[{source.n}] ", style="bold")
    text.append(clean_line(source.title) or "(untitled)", style="bold")
    trail = " › ".join(clean_line(x) for x in [source.container, *source.ancestors])
    text.append(f"  {trail}", style="dim")
    return text


class AskScreen(CrewletScreen):
    CSS_PATH = "ask.tcss"
    # the box types ? and / (a question ends in one): help is f1 here, and search is the app's palette
    BINDINGS = [
        Binding("f5", "ask_again", "Ask again"),
        Binding("down", "focus_sources", "Sources", show=False),
        Binding("escape", "back", "Back"),
        Binding("f1", "app.show('help')", "Help"),
        registry.binding("help", show=False),
        Binding("ctrl+l", "focus_question", "Question", show=False),
    ]

    def __init__(self, question: str = "", containers: list[str] | None = None) -> None:
        super().__init__(classes="ask-screen")
        self.initial_question = question
        self.containers = containers
        self.sub_title = "ask"
        self.answer: Answer | None = None
        self.question = ""
        self.streamed = ""                      # the reply as it arrived so far
        self._generation = 0
        self._cancel: threading.Event | None = None
        self._stream: MarkdownStream | None = None
        self._asker: Asker | None = None
        self._asker_lock = threading.Lock()
        self._left = False                      # unmounted: no asker is made again

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        with Vertical(classes="main"):
            yield Input(value=self.initial_question, placeholder="ask in words — answered from the pages you may "
                        "read, every claim cited", id="ask-input")
            yield Static(id="ask-status", classes="ask-status")
            with VerticalScroll(id="ask-answer-scroll"):
                yield PageBody("", id="ask-answer")
            yield Static(Text("Sources", style="bold"), id="ask-sources-title")
            yield OptionList(id="ask-sources")
        yield from self.compose_footer()

    def on_mount(self) -> None:
        field = self.query_one("#ask-input", Input)
        field.cursor_blink = self.crewlet.cursor_blink
        field.focus()
        self._show_sources([])
        self._status(Text("Ask a question: the answer is written from the pages you may read, and cites them.",
                          style="dim"))
        if self.initial_question.strip():
            self.ask(self.initial_question)

    def on_unmount(self) -> None:
        if self._cancel is not None:
            self._cancel.set()
        with self._asker_lock:
            self._left = True
            if self._asker is not None:
                self._asker.close()
                self._asker = None

    # -- asking ------------------------------------------------------------------------------------
    def ask(self, question: str, *, fresh: bool = False) -> None:
        if self._cancel is not None:
            self._cancel.set()                  # a reply still being written is no longer wanted
        self._generation += 1
        self._cancel = threading.Event()
        self.question, self.answer, self.streamed = question, None, ""
        self._stream = None
        self.query_one("#ask-answer", PageBody).show("")
        self.set_class(False, "-sources-only")
        self._show_sources([])
        self._status(Text(f"searching and writing the answer to “{clean_line(question)}”…", style="dim"))
        self._write(self._generation, question, self._cancel, fresh)

    @work(thread=True, exclusive=False, group="ask", exit_on_error=False)
    def _write(self, generation: int, question: str, cancel: threading.Event, fresh: bool) -> None:
        def piece(text: str) -> None:
            if not cancel.is_set():
                self.post_message(AnswerStreamed(generation, text))

        try:
            asker = self._the_asker()
            answer = asker.answer(question, self.session.handle, self.containers, on_text=piece, cancel=cancel,
                                  use_cache=not fresh)
            if answer.status == "no_match":     # nothing above the floor: a knowledge gap (core/bank/gaps.py)
                from core.bank.gaps import note_gap
                from core.pages.service import KnowledgeBase

                node = self.session.node
                note_gap(node, question, actor=KnowledgeBase(node).reader(self.session.handle).handle, via="ask")
        except Exception as exc:  # noqa: BLE001 - a refusal is shown, never a crash
            self.post_message(AnswerRefused(generation, exc))
            return
        self.post_message(AnswerArrived(generation, answer))

    def _the_asker(self) -> Asker:
        from core.ask.answer import Asker

        with self._asker_lock:
            if self._left:
                raise RuntimeError("the Ask screen was closed")
            searcher = self.session.searcher     # an edit of knowledge.backend re-points it: follow
            if self._asker is None or self._asker.searcher is not searcher:
                if self._asker is not None:
                    self._asker.close()
                self._asker = Asker(self.session.node, searcher)
            return self._asker

    @on(AnswerStreamed)
    async def _streamed(self, message: AnswerStreamed) -> None:
        message.stop()
        if message.generation != self._generation:
            return
        if self._stream is None:
            self._stream = Markdown.get_stream(self.query_one("#ask-answer", PageBody))
            self._status(Text("writing…", style="dim"))
        self.streamed += message.piece
        await self._stream.write(clean_text(message.piece))

    @on(AnswerArrived)
    async def _arrived(self, message: AnswerArrived) -> None:
        message.stop()
        if message.generation != self._generation:
            return
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        self.answer = answer = message.answer
        view = self.query_one("#ask-answer", PageBody)
        if answer.text:
            view.show(linked(answer.text, len(answer.sources)))
        # nothing was written: the sources are the answer, and take the room
        self.set_class(not answer.text and bool(answer.sources), "-sources-only")
        self._show_sources(answer.sources)
        self._status(self._verdict(answer))

    @on(AnswerRefused)
    def _refused(self, message: AnswerRefused) -> None:
        message.stop()
        if message.generation != self._generation:
            return
        self._status(Text.assemble(("Not asked. ", "bold red"), (error_text(message.error), "red")))

    def _verdict(self, answer: Answer) -> Text:
        from core.ask import answer as kinds

        text = Text()
        if answer.status == kinds.ANSWERED and answer.checked:
            text.append("✓ checked", style="bold green")
            text.append(": every citation names a source below")
        elif answer.status == kinds.ANSWERED:
            text.append("⚠ unchecked", style="bold yellow")
            text.append(f": {clean_line(answer.citations.reason if answer.citations else answer.reason)}",
                        style="yellow")
        elif answer.status == kinds.NOT_ANSWERED:
            text.append("The sources below do not answer the question.", style="bold yellow")
        elif answer.status == kinds.NO_MODEL:
            text.append("No model is configured", style="bold yellow")
            text.append(", so no answer was written — these are the passages one would be written from. To have "
                        "answers written, add [providers.llm] (base_url, model, api_key_env) to company.toml.")
        elif answer.status == kinds.NO_MATCH:
            text.append("Nothing matched. ", style="bold")
            text.append(clean_line(answer.reason[:1].upper() + answer.reason[1:]))
        else:
            label = {kinds.FAILED: "No answer", kinds.REFUSED: "Refused", kinds.OVER_BUDGET: "Not asked",
                     kinds.NOT_SEARCHED: "Could not search"}.get(answer.status, "No answer")
            text.append(f"{label}. ", style="bold red")
            text.append(clean_line(answer.reason), style="red")
            if answer.sources:
                text.append(" — the sources below were found", style="dim")
        if answer.finish_reason == "length" and answer.status == kinds.ANSWERED:
            text.append(" · cut at max_output_tokens", style="yellow")
        facts = []
        if answer.cached:
            facts.append("cached: nothing spent")
        elif answer.spent:
            facts.append(f"{answer.spent:,} tokens")
        if answer.model and answer.written:
            facts.append(clean_line(answer.model))
        if facts:
            text.append("  · " + " · ".join(facts), style="dim")
        return text

    # -- showing -------------------------------------------------------------------------------------
    def _status(self, text: Text) -> None:
        self.query_one("#ask-status", Static).update(text)

    def _show_sources(self, sources: list[Any]) -> None:
        listed = self.query_one("#ask-sources", OptionList)
        listed.clear_options()
        options: list[Option | None] = []
        for source in sources:
            if options:
                options.append(None)
            prompt = source_prompt(source)
            if self.answer is not None and self.answer.status == "no_model":
                for passage in source.passages[:1]:
                    lines = clean_text(passage).splitlines()[:4]
                    prompt.append("\n  " + "\n  ".join(clean_line(x) for x in lines), style="italic")
            options.append(Option(prompt, id=f"source:{source.n}"))
        listed.add_options(options)
        listed.display = bool(sources)
        self.query_one("#ask-sources-title", Static).display = bool(sources)

    def open_source(self, n: int) -> None:
        answer = self.answer
        if answer is None or not 1 <= n <= len(answer.sources):
            self.notify(f"there is no source [{n}]", severity="warning", markup=False)
            return
        self.crewlet.open_page(answer.sources[n - 1].page_id)

    # -- events and keys -------------------------------------------------------------------------------
    @on(Input.Submitted, "#ask-input")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.value.strip():
            self.ask(event.value)

    @on(OptionList.OptionSelected, "#ask-sources")
    def _open(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        option_id = event.option.id or ""
        if option_id.startswith("source:"):
            self.open_source(int(option_id[7:]))

    @on(Markdown.LinkClicked)
    def _link(self, event: Markdown.LinkClicked) -> None:
        event.stop()
        m = _SOURCE_HREF.match(event.href)
        if m:
            self.open_source(int(m.group(1)))
            return
        target = classify(event.href)          # a link the model wrote: the rules a page's links follow
        if target.kind == "page":
            self.crewlet.open_page(target.value)
        elif target.kind == "external":
            self.crewlet.open_external(target.value)
        else:
            self.notify(f"not followed: {clean_line(event.href)} — {target.value}", severity="warning", markup=False)

    def action_focus_question(self) -> None:
        self.query_one("#ask-input", Input).focus()

    def action_focus_sources(self) -> None:
        listed = self.query_one("#ask-sources", OptionList)
        if listed.display and listed.option_count:
            listed.focus()
            if listed.highlighted is None:
                listed.highlighted = 0

    def action_ask_again(self) -> None:
        """Write the answer again, even when one is cached."""
        text = self.query_one("#ask-input", Input).value
        if text.strip():
            self.ask(text, fresh=True)
