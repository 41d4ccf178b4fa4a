"""Search over the Searcher seam, reading this node's own copy.

The screen always says what it served (served_mode, degraded, the message) and how current the copy
is ("searching this node's copy, indexed through record N of M"), and it keeps "not searchable yet"
(the first index build has not finished: ask a colleague, do not conclude nothing was written) and
"nothing matched" apart, because they send a reader to different places.
"""
from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, OptionList, RadioButton, RadioSet, Static
from textual.widgets.option_list import Option

from core.search.seam import MODES, NOT_SEARCHABLE_MESSAGE, NOT_SEARCHABLE_YET, UNAVAILABLE, Query, Result

from ..sanitize import clean_line
from ..session import safe_search
from ..widgets.status import IndexState
from .base import COMMON_BINDINGS, CrewletScreen

SEARCH_LIMIT = 20
# what a person reads for each mode: semantic search is labelled by what it ranks by
MODE_LABELS = {"hybrid": "Hybrid", "keyword": "Keyword", "semantic": "Meaning"}


def mode_label(mode: str | None) -> str:
    return MODE_LABELS.get(mode or "", clean_line(mode or ""))
# the app's reactive holding its background indexer's IndexState: read only through _index_state()
# and watched by this name, so renaming it on the app is this one line
APP_INDEX_STATE = "index_state"


def hit_prompt(hit: object) -> Text:
    title = clean_line(getattr(hit, "title", "")) or "(untitled)"
    trail = " › ".join(clean_line(x) for x in [getattr(hit, "container", ""), *(getattr(hit, "ancestors", None) or [])])
    text = Text(title, style="bold")
    text.append(f"  {trail}", style="dim")
    snippet = clean_line(getattr(hit, "snippet", ""))
    if snippet:
        text.append("\n  " + snippet, style="italic")
    return text


class SearchScreen(CrewletScreen):
    CSS_PATH = "search.tcss"
    BINDINGS = [
        Binding("f2", "next_mode", "Mode"),
        Binding("f3", "ask", "Ask"),
        Binding("ctrl+l", "focus_query", "Query", show=False),
        Binding("down", "focus_results", "Results", show=False),
        *COMMON_BINDINGS,
    ]

    def __init__(self, query: str = "", mode: str = "hybrid") -> None:
        super().__init__(classes="search-screen")
        self.initial_query = query
        self.mode = mode if mode in MODES else "hybrid"
        self.last: Result | None = None
        self.last_text = ""
        # the app's index state when the search now showing (or in flight) was asked: an answer of "not
        # searchable yet" is asked again if the state has turned current since (see got_searched)
        self._asked_state: IndexState | None = None
        self.sub_title = "search"

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        with Vertical(classes="main"):
            with Horizontal(id="search-bar"):
                yield Input(value=self.initial_query, id="search-input",
                            placeholder="search this node's copy — plain words" if not self.session.remote
                            else f"search {self.session.remote_label}, live — plain words")
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
        line = Text("searching this node's copy", style="bold")
        coverage = self.last.outcome.coverage if self.last is not None else None
        if coverage is not None and (coverage.indexed_seq or coverage.applied_seq):
            line.append(f", indexed through record {coverage.indexed_seq:,} of {coverage.applied_seq:,}")
            if coverage.pages_indexed:
                line.append(f" ({coverage.pages_indexed:,} pages)", style="dim")
        elif state.phase == "current":
            line.append(f", indexed through record {state.indexed_seq:,} of {state.applied_seq:,}")
        else:
            line.append(f" — {state.describe()}", style="dim")
        line.append(" — as current as this node's place on the log", style="dim")
        self.query_one("#search-copy", Static).update(line)

    def _index_changed(self, state: IndexState) -> None:
        """The answer showing said "not searchable yet" and the index has turned current: ask again.
        (An answer still in flight is handled when it arrives, in got_searched.)"""
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
        self.call_in_background("searched", safe_search, self.session.searcher, query)

    @on(Input.Submitted, "#search-input")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.value.strip():
            self.run_search(event.value)

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

    def got_searched(self, result: Result) -> None:
        self.last = result
        outcome = result.outcome
        text = Text()
        results = self.query_one("#search-results", OptionList)
        results.clear_options()
        if outcome.degraded == NOT_SEARCHABLE_YET:
            text.append("Not searchable yet. ", style="bold yellow")
            text.append(clean_line(outcome.message or NOT_SEARCHABLE_MESSAGE))
        elif outcome.served_mode is None and outcome.degraded == UNAVAILABLE:
            text.append("Could not search. ", style="bold red")
            text.append(clean_line(outcome.message or UNAVAILABLE))
        elif outcome.served_mode is None:
            text.append(f"Nothing served in {mode_label(self.mode)} mode ", style="bold yellow")
            text.append(f"({clean_line(outcome.degraded or 'not served')}): ", style="yellow")
            text.append(clean_line(outcome.message))
            if outcome.modes:
                text.append(f"  · this node serves: {', '.join(mode_label(m) for m in outcome.modes)}", style="dim")
        else:
            if result.hits:
                text.append(f"{len(result.hits)} result{'s' if len(result.hits) != 1 else ''}", style="bold green")
            else:
                text.append("Nothing matched", style="bold")
                text.append(f" “{clean_line(self.last_text)}” — " + (
                    "the site found nothing this credential can read; try other words." if self.session.remote else
                    "the index is current enough to say so; try other words or another mode."))
            text.append(f"  · served {mode_label(outcome.served_mode)}", style="dim")
            if outcome.served_mode != self.mode:
                text.append(f" (asked {mode_label(self.mode)})", style="yellow")
            cov = outcome.coverage
            if outcome.served_mode in ("hybrid", "semantic") and cov.embeddable:
                text.append(f" · meaning over {cov.embedded:,} of {cov.embeddable:,} pages", style="dim")
            if outcome.degraded:
                text.append(f" · degraded: {clean_line(outcome.degraded)}", style="yellow")
                if outcome.message:
                    text.append(f" — {clean_line(outcome.message)}", style="yellow")
            elif outcome.message:
                text.append(f" · {clean_line(outcome.message)}", style="dim")
        self.query_one("#search-outcome", Static).update(text)
        options: list[Option | None] = []
        for i, hit in enumerate(result.hits):
            if i:
                options.append(None)  # a separator line between results
            options.append(Option(hit_prompt(hit), id=f"page:{hit.page_id}"))
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
