"""The crewlet terminal app.

`make_app` is the one factory the CLI, the tests and the screenshot script share, so what the tests
drive and what the screenshots show is what `crewlet` runs. Long work runs in thread workers that post
past-tense messages back (HomeOpened, DutyProgressed, DutyPassed…). The node's background duties
(core/duties: applying the log, the keyword index, the trash reaper, embedding, the semantic index) run
in one such worker for the app's whole life, through the same `run_duties` `crewlet worker` calls: the
keyword index every `index_interval` seconds, every duty at once after a write in the app.

Launch is one path a person waits on — process start to the spaces screen painted — so it imports and
does only what that screen needs: the other screens are imported when first opened, the duties (and the
search and embedding engines behind them) once the first screen is up, in their worker thread.
"""
from __future__ import annotations

import gc
import os
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rich.text import Text
from textual import on, work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen
from textual.theme import Theme

# the duties by name, as core names them (core.duties' face imports no duty: a launch loads none)
from core.duties import APPLY as APPLY_DUTY
from core.duties import EMBEDDING as EMBEDDING_DUTY
from core.duties import TRIAGE as TRIAGE_DUTY
from core.duties import KEYWORD_INDEX as KEYWORD_INDEX_DUTY
from core.duties import SEMANTIC_INDEX as INDEX_TRAINING_DUTY
from core.paths import Home

from .commands import CrewletCommands
from .error_words import error_text
from .fmt import Clock, system_clock
from .sanitize import clean_line
from .screens import registry
from .screens.base import CallFinished, CrewletScreen, LateAnswer
from .screens.spaces import SpacesScreen
from .widgets.status import IndexState, MeaningState

if TYPE_CHECKING:
    from core.node import Node

    from .opening import Opening
    from core.pages.model import Page
    from core.duties.runner import DutyReport

    from .screens.edit import EditScreen
    from .screens.welcome import WelcomeScreen
    from .session import Session

BACKGROUND_AFTER_S = 1.0     # the background work starts this long after the home opened at the latest


def _clock(ms: int | None) -> str:
    if not ms:
        return "it opened"
    import time as time_mod

    return time_mod.strftime("%H:%M", time_mod.localtime(ms / 1000))



CREWLET_THEME = Theme(
    name="crewlet",
    primary="#5FA8D3",
    secondary="#9D8FD6",
    accent="#E8B04A",
    foreground="#E4E7EB",
    background="#14181D",
    surface="#1B2027",
    panel="#252C35",
    success="#6CC070",
    warning="#E8B04A",
    error="#E5484D",
    dark=True,
)

# -- messages (posted from workers; past tense) --------------------------------------------------

class HomeOpened(Message):
    def __init__(self, session: Session, note: str = "") -> None:
        super().__init__()
        self.session, self.note = session, note


class HomeFailed(Message):
    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error


class HomeProgressed(Message):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class DutyProgressed(Message):
    def __init__(self, duty: str, done: int, total: int, label: str) -> None:
        super().__init__()
        self.duty, self.done, self.total, self.label = duty, done, total, label


class DutyPassed(Message):
    """A duty's pass finished (or did not run: another process holds its lease)."""

    def __init__(self, report: DutyReport, status: dict[str, Any]) -> None:
        super().__init__()
        self.report, self.status = report, status


class CrewletApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "crewlet"
    COMMANDS = App.COMMANDS | {CrewletCommands}
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
        Binding("f1", "show('help')", "Help", show=False),
    ]

    index_state: reactive[IndexState] = reactive(IndexState, always_update=True)
    meaning_state: reactive[MeaningState] = reactive(MeaningState, always_update=True)
    # "the log is damaged past record N" while it is: the status line says it in place of the index's progress
    log_state: reactive[str] = reactive("", always_update=True)

    def __init__(self, home: Home, actor: str | None = None, *, start_page: str | None = None,
                 start_search: str | None = None, clock: Clock | None = None, cursor_blink: bool = True,
                 start_indexer: bool = True, index_interval: float = 30.0,
                 searcher_factory: Callable[[Node], Any] | None = None, allow_external: bool = True,
                 opening: Opening | None = None, gc_paused: bool = False) -> None:
        super().__init__()
        self._use_theme_from_the_start(CREWLET_THEME)
        self.home = home
        self.actor = actor
        self.start_page = start_page
        self.start_search = start_search
        self.clock: Clock = clock or system_clock
        self.cursor_blink = cursor_blink
        self.start_indexer = start_indexer
        self.index_interval = index_interval
        self.searcher_factory = searcher_factory
        self.allow_external = allow_external
        self.session: Session | None = None
        self.actor_line = ""
        self._duty_wake = threading.Event()
        self._stopping = threading.Event()
        # the session's node is closed by whichever ends last, the app or its duties thread (under this lock)
        self._session_lock = threading.Lock()
        self._duties_running = False
        self._unmounted = False
        self.opened_urls: list[str] = []
        self.index_passes = 0
        self._background_started = False
        self.opening = opening            # the home already opened (crewlet's own launch)
        self.gc_paused = gc_paused        # crewlet's own launch paused the cyclic GC until the first paint

    # -- starting -----------------------------------------------------------------------------
    def _use_theme_from_the_start(self, theme: Theme) -> None:
        """Make `theme` the app's theme before its stylesheet is first parsed. Setting `self.theme` (on
        mount, as before) runs Textual's theme watcher, whose refresh_css parses every rule again with the
        new variables, and empties the parse cache so the next widget type added parses them all a
        third time: 12-45 ms of the launch (by load). This does what that watcher does, minus the reparse:
        the variables, the app's theme classes, the truecolor filter."""
        self.register_theme(theme)
        self.set_reactive(App.theme, theme.name)
        self.stylesheet.set_variables(self.get_css_variables())
        self.update_classes({**{name: False for name in self.classes if name.startswith("-theme-")},
                             f"-theme-{theme.name}": True, "-dark-mode": theme.dark,
                             "-light-mode": not theme.dark}, update=False)
        self._refresh_truecolor_filter(self.ansi_theme)

    def on_mount(self) -> None:
        if self.gc_paused:   # at the latest then (the welcome screen, a home that fails to open)
            self.set_timer(BACKGROUND_AFTER_S, self._resume_gc)
        self.sub_title = clean_line(str(self.home.root))
        problem = self.home.not_a_directory()
        if problem:   # told as the CLI tells it; the welcome screen would offer a home that cannot be made
            self._home_failed(HomeFailed(NotADirectoryError(problem)))
        elif not self.home.exists():
            from .screens.welcome import WelcomeScreen

            self.push_screen(WelcomeScreen(str(self.home.root)))
        elif self.opening is not None:
            self._opened(self.opening)    # opened before Textual loaded: the first screen now
        else:
            self._open_home(create=None)

    def _opened(self, opening: Opening) -> None:
        if opening.error is not None or opening.session is None:
            self._home_failed(HomeFailed(opening.error or RuntimeError("the home did not open")))
        else:
            self._home_opened(HomeOpened(opening.session), spaces=opening.spaces)

    def create_home(self, example: bool) -> None:
        """The welcome screen's answer: create the home (with the example) in a worker."""
        self._open_home(create="example" if example else "empty")

    @work(thread=True, exclusive=True, group="home", exit_on_error=False)
    def _open_home(self, create: str | None) -> None:
        from .session import Session

        note = ""
        try:
            if create is not None:
                from core import config as config_mod
                from core.node import init_home

                data = config_mod.example_config() if create == "example" else config_mod.empty_config(
                    self.actor or "admin")
                init_home(self.home, data)
                self.post_message(HomeProgressed("home created; opening it…"))
            session = Session.open(self.home, self.actor, self.searcher_factory)
            if create == "example":
                from core.importer import import_directory
                from core.paths import examples_dir

                self.post_message(HomeProgressed("importing the example knowledge base…"))

                def progress(done: int, total: int) -> None:
                    self.post_message(HomeProgressed(f"importing the example… {done} of {total} records"))

                report = import_directory(session.kb, examples_dir(), actor="alex", progress=progress)
                note = f"loaded the example knowledge base: {report.created} pages"
        except Exception as exc:  # noqa: BLE001 - shown on the welcome screen or on exit
            self.post_message(HomeFailed(exc))
            return
        self.post_message(HomeOpened(session, note))

    @on(HomeProgressed)
    def _home_progressed(self, message: HomeProgressed) -> None:
        if registry.is_showing(self.screen, "welcome"):
            cast("WelcomeScreen", self.screen).progress(message.text)

    @on(HomeFailed)
    def _home_failed(self, message: HomeFailed) -> None:
        text = error_text(message.error)
        if registry.is_showing(self.screen, "welcome"):
            cast("WelcomeScreen", self.screen).progress(f"could not create the home: {text}", error=True)
        else:
            self.exit(return_code=1, message=Text(f"crewlet: {text}"))

    def show_log_damage(self) -> None:
        """The status line follows the node's damage (found at open, by a write, or by the apply duty)."""
        damage = self.session.node.damage if self.session is not None else None
        if damage is None:
            text = ""
        else:
            good = getattr(damage, "good_through", None)
            text = ("log damaged" + (f" past record {good:,}" if good is not None else "")
                    + ": crewlet log check")
        if text != self.log_state:
            self.log_state = text

    @on(HomeOpened)
    def _home_opened(self, message: HomeOpened, spaces: list[dict[str, Any]] | None = None) -> None:
        self.session = message.session
        self.show_log_damage()
        # a save waiting for the log's lock (another process holds it) says so, once, naming the holder
        # (notify posts a message: safe from the worker thread the save runs in)
        self.session.node.on_lock_wait(lambda text: self.notify(clean_line(text), severity="warning", markup=False,
                                                                timeout=8))
        who = self.session.who()
        handle = self.session.handle or "nobody"
        role = ("admin" if who and who.admin else who.kind if who else "unknown actor") if handle != "nobody" else ""
        remote = self.session.remote
        self.actor_line = f"as {handle}" + (f" ({role})" if role else "") + (
            f" · {self.session.remote_label}, live" if remote else " · this node's copy")
        if registry.is_showing(self.screen, "welcome"):
            self.pop_screen()
        self.push_screen(SpacesScreen(spaces))
        if message.note:
            self.notify(clean_line(message.note), markup=False)
        if self.start_page:
            self.open_page(self.start_page)
        elif self.start_search is not None:
            self.open_search(self.start_search)
        elif remote:   # the knowledge is not in this node's spaces: the search is where it is reached
            self.open_search("")
        # the background work starts once the first screen has shown its rows (SpacesScreen says so), or
        # after BACKGROUND_AFTER_S: its imports and first passes would hold the GIL that paint waits on
        self.set_timer(BACKGROUND_AFTER_S, self.first_screen_shown)
        if remote:
            self.index_state = IndexState("off", message=self.session.knowledge_home())
        elif not self.start_indexer:
            self.index_state = IndexState("off", message="background worker off")

    def _say_offline(self) -> None:
        """The status line says when this node cannot reach its log's servers (reads go on, writes refuse)."""
        node = getattr(self.session, "node", None) if self.session is not None else None
        offline = getattr(node, "offline", None)
        base = self.actor_line.split(" · offline")[0]
        line = base if offline is None else f"{base} · offline, behind since {_clock(offline.last_contact_ms)}"
        if line != self.actor_line:
            self.actor_line = line
            self.index_state = self.index_state   # the status line reads actor_line when the state is set

    def _resume_gc(self) -> None:
        """The launch is over: the cyclic GC runs again. What the launch built (modules, classes, the
        first screen) is frozen first, so no later collection walks it again."""
        if self.gc_paused:
            self.gc_paused = False
            gc.freeze()
            gc.enable()

    def first_screen_shown(self) -> None:
        """The first screen is up: make the searcher and start the duties, in the background (once)."""
        self._resume_gc()
        if self._background_started or self.session is None:
            return
        self._background_started = True
        self._warm_up_searcher()
        if self.start_indexer and not self.session.remote:   # a remote backend has no local copy to keep
            self._run_duties()

    @work(thread=True, exclusive=True, group="warm-up", exit_on_error=False)
    def _warm_up_searcher(self) -> None:
        session = self.session
        if session is not None:
            try:
                session.searcher  # noqa: B018 - made now, so the first search does not wait for its imports
            except Exception:  # noqa: BLE001 - made again, and its failure told, when a search asks for it
                pass

    # -- the background duties -------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="duties", exit_on_error=False)
    def _run_duties(self) -> None:
        with self._session_lock:
            session = self.session
            if session is None or self._unmounted:
                return
            self._duties_running = True
        try:
            self._duties(session)
        finally:
            with self._session_lock:
                self._duties_running = False
                if self._unmounted:   # the app left while a pass was running: the node is ours to close
                    self._close_session()

    def _duties(self, session: Session) -> None:
        from core.duties.roster import run_duties
        from core.duties.runner import duty_records

        node = session.node
        _yield_cpu_to_interface()

        def progress(duty: str, done: int, total: int, label: str) -> None:
            if not self._stopping.is_set():
                self.post_message(DutyProgressed(duty, done, total, label))

        def passed(report: DutyReport) -> None:
            if self._stopping.is_set():
                return
            status = report.result.status if report.result is not None else {}
            if not report.ran and not report.error:  # another process runs it: show what its last pass left
                record = duty_records(node).get(report.duty)
                status = record.status if record is not None else {}
            self.post_message(DutyPassed(report, status))

        # a write in the app, or another process or node appending, wakes the duties at once (the apply
        # duty alone polls every 2 s); a first fill hands the thread back to the other duties every few
        # seconds, and at once when a write wants the keyword index (bench/app_embed.py)
        run_duties(node, label="crewlet app", stop=self._stopping, wake=self._duty_wake, progress=progress,
                   on_report=passed, index_interval_s=self.index_interval, embed_threads=1,
                   embed_pass_budget_s=EMBED_PASS_BUDGET_S)

    def poke_indexer(self) -> None:
        """Run every duty now (after a write in the app): the new text is searchable at once."""
        self._duty_wake.set()

    @on(LateAnswer)
    def _late_answer(self, message: LateAnswer) -> None:
        """A screen's background call answered after the screen was dismissed: say the answer here. A write
        wakes the duties as it would have on the screen (the new text is searchable at once)."""
        if isinstance(message.answer, CallFinished) and message.answer.writes:
            self.poke_indexer()
        words = message.screen.late_words(message.answer)
        if words:
            self.notify(clean_line(words[0]), severity=words[1], markup=False, timeout=8)  # type: ignore[arg-type]

    @on(DutyProgressed)
    def _duty_progressed(self, message: DutyProgressed) -> None:
        if message.duty == KEYWORD_INDEX_DUTY:
            old = self.index_state
            self.index_state = IndexState("indexing", message.done, message.total, old.indexed_seq, old.applied_seq)
        elif message.duty == EMBEDDING_DUTY and message.total:
            meaning = self.meaning_state
            phase = "embedding" if message.done < message.total else meaning.phase
            self.meaning_state = MeaningState(phase, meaning.covered, meaning.total, message.done, message.total)
        elif message.duty == INDEX_TRAINING_DUTY and message.total > message.done:
            meaning = self.meaning_state   # the one long tick: a training (or the daily measurement) of the index
            self.meaning_state = MeaningState("training", meaning.covered, meaning.total, message.done, message.total,
                                              message.label)

    @on(DutyPassed)
    def _duty_passed(self, message: DutyPassed) -> None:
        report, status = message.report, message.status
        self.show_log_damage()
        if report.duty == APPLY_DUTY:
            self._say_offline()
        if report.duty == APPLY_DUTY and report.result is not None and report.result.counts.get("applied"):
            self._refresh_views()
            return
        if report.duty == TRIAGE_DUTY and report.result is not None and report.result.worked:
            self._refresh_views()       # this node's triage decided (in mode on, acted): the review queue shows it
            return
        if report.duty == EMBEDDING_DUTY:
            self._embedding_passed(report, status)
            return
        if report.duty == INDEX_TRAINING_DUTY:
            old = self.meaning_state
            if old.phase == "training":
                self.meaning_state = MeaningState("current", old.covered, old.total)
            return
        if report.duty != KEYWORD_INDEX_DUTY:
            return
        self.index_passes += 1
        indexed, applied = int(status.get("indexed_seq", 0)), int(status.get("applied_seq", 0))
        if report.error:
            self.index_state = IndexState("failed", message=report.error)
        elif not status.get("first_build_done"):
            why = report.skipped or (report.result.summary if report.result else "")
            self.index_state = IndexState("waiting", 0, 0, indexed, applied,
                                          why or "the first index build has not finished")
        else:
            pages = int(status.get("pages_indexed", 0))
            self.index_state = IndexState("current", pages, pages, indexed, applied,
                                          report.skipped and f"kept by another process: {report.skipped}")

    def _refresh_views(self) -> None:
        """Records another process or node appended were applied: the screen on show reads its rows again
        (an editor is left alone: its save states its base revision, and a stale one is kept and told)."""
        screen = self.screen
        if isinstance(screen, CrewletScreen):
            screen.refresh_rows()

    def _embedding_passed(self, report: DutyReport, status: dict[str, Any]) -> None:
        if report.error:
            self.meaning_state = MeaningState("failed", message=report.error)
        elif status.get("vectors") is False:
            self.meaning_state = MeaningState("off")
        elif "covered" in status:
            failure = str(status.get("failure") or "")
            held = int(status.get("held", 0))
            note = failure or (f"{held:,} refused" if held else "")
            phase = "embedding" if report.more else "current"
            self.meaning_state = MeaningState(phase, int(status["covered"]), int(status["total"]),
                                              self.meaning_state.done, self.meaning_state.goal, note)

    # -- navigation ------------------------------------------------------------------------------
    def open_outline(self, container: str) -> None:
        from .screens.outline import OutlineScreen

        if self.session is not None and self.session.remote:
            self.notify(f"{clean_line(container)} lives in {self.session.remote_label}, which this app reads live: there is no "
                        "local outline — search it with /", markup=False)
            return
        self.push_screen(OutlineScreen(container))

    def open_page(self, ref: str) -> None:
        from .screens.page import PageScreen

        if self.session is not None and self.session.remote:
            from .screens.remote_page import RemotePageScreen

            self.push_screen(RemotePageScreen(ref))
            return
        screen = self.screen
        if isinstance(screen, PageScreen) and ref in (screen.ref, screen.page.id if screen.page else None):
            screen.reload()
            return
        self.push_screen(PageScreen(ref))

    def open_entry(self, entry_id: str) -> None:
        """An entry's screen (spec 003): from a page's list of entries, another entry's links, a search hit."""
        from .screens.entry import EntryScreen

        screen = self.screen
        if isinstance(screen, EntryScreen) and screen.entry_id == entry_id:
            screen.reload()
            return
        self.push_screen(EntryScreen(entry_id))

    def open_editor(self, page: Page) -> None:
        from .screens.edit import EditScreen, too_long_to_edit

        why = too_long_to_edit(page.body)
        if why:  # the editor would take many seconds to open (and each key after): say so rather than hang
            self.notify(why, title="not opened in the editor", severity="warning", markup=False, timeout=12)
            return
        self.push_screen(EditScreen(page))

    def open_new_page(self, container: str, title: str, parent: Page | None) -> None:
        from .screens.edit import EditScreen, NewPage

        self.push_screen(EditScreen(new=NewPage(container, title, parent)))

    def replace_with_page(self, screen: Any, page_id: str) -> None:
        """After a new page's first save: the editor gives way to the page."""
        from .screens.page import PageScreen

        if self.screen is screen:
            self.pop_screen()
        elif screen in self.screen_stack:
            return  # covered: the screen asks again once it is shown (CrewletScreen.when_shown)
        self.push_screen(PageScreen(page_id))

    def open_history(self, page: Page) -> None:
        from .screens.history import HistoryScreen

        self.push_screen(HistoryScreen(page))

    def open_search(self, query: str = "") -> None:
        from .screens.search import SearchScreen

        screen = self.screen
        if isinstance(screen, SearchScreen):
            field = screen.query_one("#search-input")
            field.value = query  # type: ignore[attr-defined]
            if query.strip():
                screen.run_search(query)
            field.focus()
            return
        self.push_screen(SearchScreen(query, mode="keyword") if self.session and self.session.remote
                         else SearchScreen(query))

    def open_ask(self, question: str = "") -> None:
        """The Ask screen: a question answered from the pages, every claim cited (asked at once when given)."""
        from .screens.ask import AskScreen

        screen = self.screen
        if isinstance(screen, AskScreen):
            field = screen.query_one("#ask-input")
            field.value = question  # type: ignore[attr-defined]
            if question.strip():
                screen.ask(question)
            field.focus()
            return
        self.push_screen(AskScreen(question))

    def open_external(self, url: str) -> None:
        """http(s) and mailto only (see links.py). Tests and screenshots never open anything."""
        self.opened_urls.append(url)
        self.notify(f"opening {clean_line(url)}", markup=False)
        if self.allow_external and not self.is_headless:
            self.open_url(url)

    def action_show(self, name: str) -> None:
        """Open the registered screen `name` (screens/registry.py): what the palette and the screens' keys run."""
        item = registry.entry(name)
        if item.needs_home and self.session is None:
            return
        if item.opens is not None:
            item.opens(self)
        elif not item.is_showing(self.screen):
            self.push_screen(item.load()())

    def show(self, name: str) -> None:
        self.action_show(name)

    def back_to_spaces(self) -> None:
        """Back to the spaces, from anywhere (the palette too) — but never past unsaved text unasked."""
        def go(yes: bool | None = True) -> None:
            if yes:
                while len(self.screen_stack) > 2 and not isinstance(self.screen, SpacesScreen):
                    self.pop_screen()

        if self.unsaved_editors():
            from .screens.modals import ConfirmModal

            self.push_screen(ConfirmModal("Leave unsaved text?", "An editor holds text that is not saved. "
                                          "Leave it and lose it?", yes="Leave, losing it", no="Keep editing",
                                          danger=True, id="leave-unsaved"), go)
        else:
            go()

    def open_help(self) -> None:
        from .screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(registry.name_of(self.screen)))

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """Textual's commands but its "Keys" panel: the palette's "Help" (the help screen) says every key."""
        for command in super().get_system_commands(screen):
            if command.title != "Keys":
                yield command

    # -- leaving ---------------------------------------------------------------------------------
    def unsaved_editors(self) -> list[EditScreen]:
        editors = [cast("EditScreen", s) for s in self.screen_stack if registry.is_showing(s, "edit")]
        return [s for s in editors if s.has_unsaved_text]

    async def action_quit(self) -> None:
        if not self.unsaved_editors():
            self.exit()
            return

        def answer(yes: bool | None) -> None:
            if yes:
                self.exit()

        from .screens.modals import ConfirmModal

        self.push_screen(ConfirmModal("Quit with unsaved text?", "An editor holds text that is not saved. "
                                      "Quit and lose it?", yes="Quit, losing it", no="Keep editing", danger=True,
                                      id="quit-unsaved", interrupt_answers_yes=True), answer)

    # textual awaits an action that is a coroutine; its App declares this one plain, which an override may not
    async def action_help_quit(self) -> None:  # type: ignore[override]
        """ctrl+c (Textual binds it here, after a text field's copy and a selection's): quit, asking first over
        unsaved text. Textual's own only said "press ctrl+q" — and nothing at all where no quit key was shown."""
        await self.action_quit()

    def on_unmount(self) -> None:
        self._stopping.set()
        self._duty_wake.set()
        with self._session_lock:
            self._unmounted = True
            # a duty's pass in flight (an embedding request) finishes and publishes before the node
            # closes: the duties thread closes it on its way out
            if not self._duties_running:
                self._close_session()

    def _close_session(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None


# How long one embedding pass keeps the app's duties thread (its other duties and the status line wait
# that long at most); a pass's selection costs about 0.2 s at 14,000 pages, so 1-2% of a first fill.
EMBED_PASS_BUDGET_S = 15.0
# The duties thread's nice increment (Linux): onnxruntime computing in it otherwise shares a busy core
# evenly with the interface thread, and a key press's paint waited twice as long at p95 (bench/app_embed.py).
DUTIES_NICE = 10


def _yield_cpu_to_interface() -> None:
    """Lower the calling thread's CPU priority by DUTIES_NICE. Linux gives each thread its own nice value
    (setpriority on a thread id), and threads it starts (onnxruntime's, the tokenizer's) inherit it; an
    idle core still runs it at full speed. Elsewhere setpriority would renice the whole process, so
    nothing is done."""
    if DUTIES_NICE <= 0 or not sys.platform.startswith("linux"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + DUTIES_NICE))
    except OSError:  # a sandbox that refuses it: the duties run at the interface's priority, as before
        pass


def make_app(home: Home | str | Path, actor: str | None = None, *, start_page: str | None = None,
             start_search: str | None = None, clock: Clock | None = None, **options: Any) -> CrewletApp:
    """The app, configured. Shared by `crewlet`, `crewlet open`, the tests and the screenshot script.

    `clock` (seconds since the epoch) fixes "3 min ago" for deterministic screenshots; further options
    (cursor_blink, start_indexer, index_interval, searcher_factory, allow_external) go to CrewletApp.
    """
    if not isinstance(home, Home):
        home = Home(Path(home))
    return CrewletApp(home, actor, start_page=start_page, start_search=start_search, clock=clock, **options)
