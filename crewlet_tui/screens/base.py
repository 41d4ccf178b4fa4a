"""What every full screen shares: the header, the status line, the footer, the common keys, and a
way to run a KnowledgeBase call in a thread worker that reports back with a past-tense message."""
from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.events import ScreenResume
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey
from textual.worker import Worker, get_current_worker

from ..error_words import error_text  # noqa: F401 - the screens' one way to word a refusal
from ..sanitize import clean_line
from ..widgets.status import StatusLine
from ..widgets.title_bar import TitleBar
from . import registry

if TYPE_CHECKING:
    from core.pages.service import KnowledgeBase

    from ..app import CrewletApp
    from ..session import Session


T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class Call(Generic[T]):
    """One background call and where its answer goes: each handler a method reference the type checker
    and a reader can follow (a handler found by a name built at runtime did nothing when misspelt).

    `what`: the call in a person's words ("restored", "saved"), said when its answer lands after the screen
    was left. `slot`: a newer call in the same slot supersedes an older one still running (its answer is
    dropped). `writes`: the call changes the knowledge base — the app's duties run their next pass at once,
    and its outcome is always said, even to a screen that was left."""

    what: str
    slot: Hashable
    generation: int
    on_done: Callable[[T], object] | None = None
    on_fail: Callable[[BaseException], object] | None = None
    on_gone: Callable[[T], str | None] | None = None
    writes: bool = False


class CallFinished(Message):
    """A background call finished: its `call.on_done` handles `result`."""

    def __init__(self, call: Call[Any], result: Any) -> None:
        super().__init__()
        self.call, self.result = call, result

    @property
    def writes(self) -> bool:
        return self.call.writes


class CallFailed(Message):
    """A background call raised: its `call.on_fail` handles `error`, else a notification says it."""

    def __init__(self, call: Call[Any], error: BaseException) -> None:
        super().__init__()
        self.call, self.error = call, error

    @property
    def writes(self) -> bool:
        return self.call.writes


class KeysFooter(Footer):
    """Textual's footer, on two rows when its keys do not fit on one (a page's twelve keys at 80 columns):
    a key left out of the footer is a key nobody finds."""

    DEFAULT_CSS = """
    KeysFooter.-two-rows {
        layout: grid;
        height: 2;
        grid-columns: auto;
        grid-gutter: 0 1;
        FooterKey { margin-right: 0; }
    }
    """

    def compose(self) -> ComposeResult:
        wanted = 0
        count = 0
        for widget in super().compose():
            if isinstance(widget, FooterKey) and "-command-palette" not in widget.classes:
                count += 1
                wanted += len(widget.key_display) + len(widget.description) + 2  # a space inside, one after
            yield widget
        two_rows = count > 1 and wanted > self.app.size.width
        self.set_class(two_rows, "-two-rows")
        if two_rows:
            self.styles.grid_size_columns = (count + 1) // 2


def footer() -> Footer:
    """The keys of the screen on show, compact, without the command palette's key: docked on the right it was
    drawn over the last keys of a full footer ("▏^p palettee" at 80 columns). ctrl+p still opens it, and
    the help screen says so."""
    return KeysFooter(compact=True, show_command_palette=False)


class LateAnswer(Message):
    """A background call answered after its screen was dismissed: the app says the answer (the call's
    `on_gone` words it), and nothing of the screen runs — a gone screen must not dismiss another."""

    def __init__(self, screen: CrewletScreen, answer: CallFinished | CallFailed) -> None:
        super().__init__()
        self.screen, self.answer = screen, answer


# the keys every screen has; each screen lists them after its own (q quits as on the spaces screen: a
# screen whose keys type text — search, ask, the editor — has ctrl+q alone)
COMMON_BINDINGS = [
    Binding("escape", "back", "Back"),
    registry.binding("search"),
    registry.binding("help"),
    Binding("q", "app.quit", "Quit", show=False),
]


def _discarding(step: Callable[[], Any]) -> Callable[[], None]:
    """`step`, its answer dropped: `call_later` awaits an awaitable answer, and a screen may not await its own
    dismissal from its own handler."""

    def run() -> None:
        step()

    return run


class CrewletScreen(Screen[Any]):
    BINDINGS: ClassVar[list[Any]] = []

    @property
    def crewlet(self) -> CrewletApp:
        return self.app  # type: ignore[return-value]

    @property
    def session(self) -> Session:
        session = self.crewlet.session
        assert session is not None, "no home is open"
        return session

    @property
    def kb(self) -> KnowledgeBase:
        return self.session.kb

    def refresh_rows(self) -> None:
        """Read the rows this screen shows again: records another process or node appended were applied.
        A screen that shows none (or an editor, whose save states its base revision) does nothing."""

    def compose_header(self) -> ComposeResult:
        yield TitleBar()

    def compose_footer(self) -> ComposeResult:
        yield StatusLine(classes="status-line")
        yield footer()

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.finish()

    # -- finishing where the screen stands --------------------------------------------------------------
    @property
    def is_gone(self) -> bool:
        """Dismissed (or never shown): no longer in the app's stack of screens."""
        try:
            return self not in self.app.screen_stack
        except Exception:  # noqa: BLE001 - an app that is closing
            return True

    def when_shown(self, step: Callable[[], Any]) -> None:
        """Run `step` now if this screen is the one on show; if another covers it (help, a notice), once that
        closes; never if this screen is gone. A background call's answer can land at any of the three: a
        covered screen that dismissed itself would pop the screen covering it instead (Textual pops the top)."""
        if self.is_gone:
            return
        if self.app.screen is self:
            step()
            return
        self._when_shown.append(step)

    def finish(self, result: Any = None) -> None:
        """Dismiss this screen with `result`, where it stands (see `when_shown`)."""
        self.when_shown(lambda: self.dismiss(result))

    @property
    def _when_shown(self) -> list[Callable[[], Any]]:
        steps = self.__dict__.get("_crewlet_when_shown")
        if steps is None:
            steps = self.__dict__["_crewlet_when_shown"] = []
        return steps

    @on(ScreenResume)
    def _shown_again(self, _event: ScreenResume) -> None:
        steps, self.__dict__["_crewlet_when_shown"] = list(self._when_shown), []
        for step in steps:
            if self.is_gone or self.app.screen is not self:
                self._when_shown.append(step)
                continue
            self.call_later(_discarding(step))

    # -- background calls ----------------------------------------------------------------------
    def call_in_background(self, fn: Callable[..., T], *args: Any, what: str,
                           on_done: Callable[[T], object] | None = None,
                           on_fail: Callable[[BaseException], object] | None = None,
                           on_gone: Callable[[T], str | None] | None = None,
                           writes: bool = False, **kwargs: Any) -> Worker[None]:
        """Run `fn(*args, **kwargs)` in a thread worker; the answer comes back as CallFinished/CallFailed and
        goes to `on_done(result)` / `on_fail(error)` (no `on_fail`: a notification says it). A newer call
        answered by the same `on_done` (or, without one, making the same `fn`) supersedes an older one still
        running — so pass methods, not lambdas (a lambda is a new slot at each call). `writes=True` for a
        call that changes the knowledge base: the duties index it at once, and
        an answer landing after the screen was left is always said (`on_gone(result)` words it; without it,
        `what` and the result's ref). See `Call`. Returns the thread worker (a test awaits `wait()`)."""
        slot: Hashable = on_done if on_done is not None else fn
        generation = self._generations.get(slot, 0) + 1
        self._generations[slot] = generation
        call = Call(what, slot, generation, on_done, on_fail, on_gone, writes)
        self.__dict__["_crewlet_app"] = self.app   # a screen removed from the app no longer finds it on its own
        return self._background(call, fn, args, kwargs)

    @work(thread=True, exclusive=False)
    def _background(self, call: Call[Any], fn: Callable[..., Any], args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> None:
        # a worker of a screen that was dismissed is cancelled with it, but the call (a save) ran to its end all
        # the same: its answer goes to the app then (`_answer`), never nowhere
        get_current_worker()
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - every refusal is shown, never a crash
            if self._is_latest(call):
                self._answer(CallFailed(call, exc))
            return
        if self._is_latest(call):
            self._answer(CallFinished(call, result))

    def _is_latest(self, call: Call[Any]) -> bool:
        return self._generations.get(call.slot) == call.generation

    def _answer(self, message: CallFinished | CallFailed) -> None:
        """To the screen; to the app when the screen was dismissed while the call ran (its queue is closed)."""
        app = self.__dict__.get("_crewlet_app")
        gone = app is None or self not in app.screen_stack
        if (gone or not self.post_message(message)) and app is not None:
            app.post_message(LateAnswer(self, message))

    def late_words(self, message: CallFinished | CallFailed) -> tuple[str, str] | None:
        """(what to notify, severity) for an answer that arrived after this screen was dismissed: a write's
        outcome is always said (the person may have left thinking it would not land). A call words its own
        with `on_gone(result)`."""
        call = message.call
        if isinstance(message, CallFailed):
            return f"{call.what.replace('_', ' ')}: not done — {error_text(message.error)}", "error"
        if call.on_gone is not None:
            words = call.on_gone(message.result)
            return (words, "information") if words else None
        if call.writes:
            ref = getattr(message.result, "ref", None)
            return f"{call.what} {clean_line(ref)}" if ref else call.what, "information"
        return None

    @property
    def _generations(self) -> dict[Hashable, int]:
        gens = self.__dict__.get("_crewlet_generations")
        if gens is None:
            gens = self.__dict__["_crewlet_generations"] = {}
        return gens

    @on(CallFinished)
    def _call_finished(self, message: CallFinished) -> None:
        message.stop()
        if message.writes:
            poke = getattr(self.app, "poke_indexer", None)
            if callable(poke):
                poke()
        if self.is_gone:  # dismissed while the message was queued
            self.app.post_message(LateAnswer(self, message))
            return
        if message.call.on_done is not None:
            message.call.on_done(message.result)

    @on(CallFailed)
    def _call_failed(self, message: CallFailed) -> None:
        message.stop()
        show = getattr(self.app, "show_log_damage", None)
        if callable(show):  # a write refused over a damaged log: the status line says so from now on
            show()
        if self.is_gone:
            self.app.post_message(LateAnswer(self, message))
            return
        if message.call.on_fail is not None:
            message.call.on_fail(message.error)
        else:
            self.notify(f"refused: {error_text(message.error)}", severity="error", markup=False, timeout=8)
