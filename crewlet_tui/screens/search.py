"""Search over the Searcher seam, reading this node's own copy.

The screen always says what it served and why less than asked, in words (search_words.py, shared with
the CLI: no internal codes), and how current the copy is ("searching this copy: 1,204 pages indexed, up
to date"), and it keeps "not searchable yet" (the first index build has not finished: ask a colleague,
do not conclude nothing was written) and "nothing matched" apart, because they send a reader to
different places.
"""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Input, OptionList, RadioButton, RadioSet, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from core.search.seam import MODES, NOT_SEARCHABLE_YET, Query, Result

from ..sanitize import clean_line
from ..search_words import index_words, search_words
from ..session import safe_search
from ..widgets.status import IndexState
from . import registry
from .base import CrewletScreen

SEARCH_LIMIT = 20
# Run as you type: this long after the last key the search runs (Enter runs it at once); a newer search
# cancels the one before. Measured at 14,435 pages (bench/search_typing.py, load ~9 on 2 cores): after
# 250 ms a search started at most word breaks and ran while the next word was typed — key p95 120 ms
# against 47 ms for Enter alone; after 600 ms it runs when the hand pauses to think, and keys stayed at
# p95 43 ms (Enter alone: 50 ms in the same run), the results 0.84 s after the last letter (p50).
LIVE_DELAY_S = 0.6
# what a person reads for each mode: semantic search is labelled by what it ranks by
MODE_LABELS = {"hybrid": "Hybrid", "keyword": "Keyword", "semantic": "Meaning"}


def mode_label(mode: str | None) -> str:
    return MODE_LABELS.get(mode or "", clean_line(mode or ""))
# the app's reactive holding its background indexer's IndexState: read only through _index_state()
# and watched by this name, so renaming it on the app is this one line
APP_INDEX_STATE = "index_state"


def hit_prompt(hit: object) -> Text:
    title = clean_line(getattr(hit, "title", "")) or "(untitled)"
    if getattr(hit, "entry_id", None):        # an entry under a page: says so, with its kind and status
        title = f"{getattr(hit, 'entry_kind', None) or 'FACT'} entry under {title} · {getattr(hit, 'entry_status', '')}"
    trail = " › ".join(clean_line(x) for x in [getattr(hit, "container", ""), *(getattr(hit, "ancestors", None) or [])])
    text = Text(title, style="bold")
    text.append(f"  {trail}", style="dim")
    snippet = clean_line(getattr(hit, "snippet", ""))
    if snippet:
        text.append("\n  " + snippet, style="italic")
    return text


class Searched(Message):
    """A search ran: its `result` for `query`, posted by the search worker to its screen (which shows it). A
    bench or a test that wants to know when an answer arrives watches for this message (`run_test`'s
    `message_hook`) rather than patching the handler."""

    def __init__(self, query: Query, result: Result) -> None:
        super().__init__()
        self.query, self.result = query, result


class SearchScreen(CrewletScreen):
    CSS_PATH = "search.tcss"
    # the box takes every printable key (/ and ? are typed, not keys here): help is f1, as in the editor
    BINDINGS = [
        Binding("f2", "next_mode", "Mode"),
        Binding("f3", "ask", "Ask"),
        Binding("down", "focus_results", "Results", show=False),   # the box scrolls on ↓ first: said below
        Binding("escape", "back", "Back"),
        Binding("f1", "app.show('help')", "Help"),
        registry.binding("help", show=False),
        Binding("ctrl+l", "focus_query", "Query", show=False),
    ]

    live = True     # search as the words are typed (bench/search_typing.py measured it against Enter alone)

    def __init__(self, query: str = "", mode: str = "hybrid") -> None:
        super().__init__(classes="search-screen")
        self._live_timer: Any = None
        self.initial_query = query
        self.mode = mode if mode in MODES else "hybrid"
        self.last: Result | None = None
        self.last_text = ""
        # the app's index state when the search now showing (or in flight) was asked: an answer of "not
        # searchable yet" is asked again if the state has turned current since (see _searched)
        self._asked_state: IndexState | None = None
        self.sub_title = "search"

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        with Vertical(classes="main"):
            with Horizontal(id="search-bar"):
                # a remote site is asked live on Enter alone: as-you-type would send it a request per pause
                yield Input(value=self.initial_query, id="search-input",
                            placeholder=(f"search {self.session.remote_label}, live — words, then Enter"
                                         if self.session.remote else "words — results as you type"
                                         if self.live else "words, then Enter"))
                with RadioSet(id="search-mode"):
                    for mode in MODES:
                        yield RadioButton(MODE_LABELS[mode], value=mode == self.mode, id=f"mode-{mode}")
            yield Static(id="search-copy", classes="search-copy")
            yield Static(id="search-outcome", classes="search-outcome")
            yield OptionList(id="search-results")
        yield from self.compose_footer()

    def on_mount(self) -> None:
        field = self.query_one("#search-input", Input)
        field.cursor_blink = self.crewlet.cursor_blink
        field.focus()
        self.query_one("#search-results", OptionList).display = False
        self._show_copy()
        self.watch(self.app, APP_INDEX_STATE, self._index_changed, init=False)
        if self.initial_query.strip():
            self.run_search(self.initial_query)

    def _index_state(self) -> IndexState:
        return getattr(self.app, APP_INDEX_STATE)

    def _show_copy(self) -> None:
        if self.session.remote:   # no copy here: the site is asked live, as current as it is
            line = Text(f"searching {self.session.where()} live", style="bold")
            line.append(" — no local copy: as current as the site, your own credential if you have one",
                        style="dim")
            self.query_one("#search-copy", Static).update(line)
            return
        state = self._index_state()
        line = Text("searching this copy: ", style="bold")
        coverage = self.last.outcome.coverage if self.last is not None else None
        if coverage is not None and (coverage.indexed_seq or coverage.applied_seq):
            line.append(index_words(coverage))
        elif state.phase == "current":
            line.append(index_words(indexed_seq=state.indexed_seq, applied_seq=state.applied_seq, pages=state.total))
        else:
            line.append(state.describe(), style="dim")
        self.query_one("#search-copy", Static).update(line)

    def _index_changed(self, state: IndexState) -> None:
        """The answer showing said "not searchable yet" and the index has turned current: ask again.
        (An answer still in flight is handled when it arrives, in _searched.)"""
        self._show_copy()
        if (state.phase == "current" and self.last is not None and self.last.outcome.degraded == NOT_SEARCHABLE_YET
                and self.last_text.strip()):
            self.run_search(self.last_text)

    def _became_current_since_asked(self) -> bool:
        """Whether an index pass finished after the search being answered was asked. The searcher reads
        the index in a thread: its answer can have been decided before the build finished and arrive
        after the app heard so, when _index_changed saw no "not searchable" answer to re-run. Each pass
        the app hears of is a new IndexState object, so identity tells "changed since"; an answer asked
        while the state was already current is not asked again (no loop if the two ever disagree)."""
        state = self._index_state()
        return state.phase == "current" and state is not self._asked_state

    # -- searching -------------------------------------------------------------------------------
    def run_search(self, text: str) -> None:
        self.last_text = text
        self._asked_state = self._index_state()
        self.query_one("#search-outcome", Static).update(Text(f"searching for “{clean_line(text)}”…", style="dim"))
        query = Query(text=text, actor=self.session.handle, limit=SEARCH_LIMIT, mode=self.mode)
        self._search(query)

    @work(thread=True, exclusive=True, group="search", exit_on_error=False)
    def _search(self, query: Query) -> None:
        """One search in a thread. exclusive: a newer search cancels this one — it is skipped if it has not
        started (the searcher runs one search at a time), and its answer is dropped if it has."""
        worker = get_current_worker()
        if worker.is_cancelled:
            return
        result = safe_search(self.session.searcher, query)
        if not worker.is_cancelled:
            self.post_message(Searched(query, result))

    @on(Input.Submitted, "#search-input")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._stop_live_timer()
        if event.value.strip() and (event.value != self.last_text or self.last is None):
            self.run_search(event.value)

    @on(Input.Changed, "#search-input")
    def _typed(self, event: Input.Changed) -> None:
        """Run as you type: the search runs LIVE_DELAY_S after the last key (a key meanwhile starts the wait
        again), so a word typed at speed is searched once, when the hand pauses."""
        event.stop()
        if not self.live or self.session.remote:
            return
        self._stop_live_timer()
        if event.value.strip() and event.value != self.last_text:
            self._live_timer = self.set_timer(LIVE_DELAY_S, lambda: self._run_typed(event.value))

    def _run_typed(self, text: str) -> None:
        self._live_timer = None
        if self.query_one("#search-input", Input).value == text and text != self.last_text:
            self.run_search(text)

    def _stop_live_timer(self) -> None:
        if self._live_timer is not None:
            self._live_timer.stop()
            self._live_timer = None

    @on(RadioSet.Changed, "#search-mode")
    def _mode_changed(self, event: RadioSet.Changed) -> None:
        event.stop()
        self.mode = (event.pressed.id or "mode-hybrid").removeprefix("mode-")
        if self.last_text.strip():
            self.run_search(self.last_text)

    def action_next_mode(self) -> None:
        i = (MODES.index(self.mode) + 1) % len(MODES)
        self.query_one(f"#mode-{MODES[i]}", RadioButton).value = True

    def action_focus_query(self) -> None:
        self.query_one("#search-input", Input).focus()

    def action_ask(self) -> None:
        """The words in the box, asked as a question (the Ask screen)."""
        self.crewlet.open_ask(self.query_one("#search-input", Input).value)

    def action_focus_results(self) -> None:
        results = self.query_one("#search-results", OptionList)
        if results.display and results.option_count:
            results.focus()
            if results.highlighted is None:
                results.highlighted = 0

    @on(Searched)
    def _searched(self, message: Searched) -> None:
        message.stop()
        if not self.is_gone:   # dismissed while the answer was queued: a read, nothing to say
            self.show_result(message.result)

    def show_result(self, result: Result) -> None:
        self.last = result
        outcome = result.outcome
        results = self.query_one("#search-results", OptionList)
        results.clear_options()
        words = search_words(result, asked=self.mode, limit=SEARCH_LIMIT, more="more words narrow it")
        style = {"ok": "bold green", "warning": "bold yellow", "error": "bold red"}[words.tone]
        if words.tone == "ok" and not result.hits:
            style = "bold"            # nothing matched: a fact, not a fault
        text = Text(clean_line(words.headline[:1].upper() + words.headline[1:]), style=style)
        if outcome.served_mode is not None and not result.hits:
            text.append(f" for “{clean_line(self.last_text)}” — " + (
                "the site found nothing this credential can read; try other words" if self.session.remote else
                "try other words or another mode (f2)"))
        if words.facts:
            text.append("  · " + " · ".join(clean_line(f) for f in words.facts), style="dim")
        if result.hits:
            text.append(" · ↓ the results, enter opens one", style="dim")
        for warning in words.warnings:
            text.append("\n" + clean_line(warning), style="yellow")
        self.query_one("#search-outcome", Static).update(text)
        options: list[Option | None] = []
        for i, hit in enumerate(result.hits):
            if i:
                options.append(None)  # a separator line between results
            # an entry's option names its page too (several hits may stand under one page: ids stay unique)
            ident = f"entry:{hit.page_id}:{hit.entry_id}" if hit.entry_id else f"page:{hit.page_id}"
            options.append(Option(hit_prompt(hit), id=ident))
        results.add_options(options)
        results.display = bool(result.hits)
        self._show_copy()
        if outcome.degraded == NOT_SEARCHABLE_YET and self.last_text.strip() and self._became_current_since_asked():
            self.run_search(self.last_text)

    @on(OptionList.OptionSelected, "#search-results")
    def _open(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        option_id = event.option.id or ""
        if option_id.startswith("page:"):
            self.crewlet.open_page(option_id[5:])
        elif option_id.startswith("entry:"):     # an entry opens its own screen where the app has one, else its page
            _kind, page_id, entry_id = option_id.split(":", 2)
            open_entry = getattr(self.crewlet, "open_entry", None)
            if callable(open_entry):
                open_entry(entry_id)
            else:
                self.crewlet.open_page(page_id)
