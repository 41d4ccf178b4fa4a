"""What every full screen shares: the header, the status line, the footer, the common keys, and a
way to run a KnowledgeBase call in a thread worker that reports back with a past-tense message."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer
from textual.worker import get_current_worker

from ..sanitize import clean_line
from ..widgets.status import StatusLine
from ..widgets.title_bar import TitleBar

if TYPE_CHECKING:
    from core.pages.service import KnowledgeBase

    from ..app import CrewletApp
    from ..session import Session


def error_text(exc: BaseException) -> str:
    return clean_line(str(exc) or exc.__class__.__name__)


# background calls that change the knowledge base: the app's indexer runs its next pass at once
WRITE_TAGS = frozenset({"created", "saved", "renamed", "moved", "trashed", "restored", "purged", "commented", "changed"})


class CallFinished(Message):
    """A background call finished; `tag` names which (the screen's `got_<tag>` handles it)."""

    def __init__(self, tag: str, result: Any) -> None:
        super().__init__()
        self.tag, self.result = tag, result


class CallFailed(Message):
    """A background call raised; the screen's `failed_<tag>` handles it, else a notification."""

    def __init__(self, tag: str, error: BaseException) -> None:
        super().__init__()
        self.tag, self.error = tag, error


def footer() -> Footer:
    """The keys of the screen on show, compact, without the command palette's key: docked on the right it was
    drawn over the last keys of a full footer ("▏^p palettee" at 80 columns). ctrl+p still opens it, and
    the help screen says so."""
    return Footer(compact=True, show_command_palette=False)


# the keys every screen has; each screen lists them after its own
COMMON_BINDINGS = [
    Binding("escape", "back", "Back"),
    Binding("slash", "app.search", "Search"),
    Binding("question_mark", "app.help", "Help", key_display="?"),
]


class CrewletScreen(Screen[Any]):
    BINDINGS: list[Any] = []

    @property
    def crewlet(self) -> "CrewletApp":
        return self.app  # type: ignore[return-value]

    @property
    def session(self) -> "Session":
        session = self.crewlet.session
        assert session is not None, "no home is open"
        return session

    @property
    def kb(self) -> "KnowledgeBase":
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
            self.dismiss()

    # -- background calls ----------------------------------------------------------------------
    def call_in_background(self, tag: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Run `fn(*args, **kwargs)` in a thread worker; the answer comes back as CallFinished/CallFailed.
        A newer call with the same tag supersedes an older one still running."""
        generation = self._generations.get(tag, 0) + 1
        self._generations[tag] = generation
        self._background(tag, generation, fn, args, kwargs)

    @work(thread=True, exclusive=False)
    def _background(self, tag: str, generation: int, fn: Callable[..., Any], args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> None:
        worker = get_current_worker()
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - every refusal is shown, never a crash
            if not worker.is_cancelled and self._generations.get(tag) == generation:
                self.post_message(CallFailed(tag, exc))
            return
        if not worker.is_cancelled and self._generations.get(tag) == generation:
            self.post_message(CallFinished(tag, result))

    @property
    def _generations(self) -> dict[str, int]:
        gens = self.__dict__.get("_crewlet_generations")
        if gens is None:
            gens = self.__dict__["_crewlet_generations"] = {}
        return gens

    @on(CallFinished)
    def _call_finished(self, message: CallFinished) -> None:
        message.stop()
        if message.tag in WRITE_TAGS:
            poke = getattr(self.app, "poke_indexer", None)
            if callable(poke):
                poke()
        handler = getattr(self, f"got_{message.tag}", None)
        if handler is not None:
            handler(message.result)

    @on(CallFailed)
    def _call_failed(self, message: CallFailed) -> None:
        message.stop()
        handler = getattr(self, f"failed_{message.tag}", None)
        if handler is not None:
            handler(message.error)
        else:
            self.notify(f"refused: {error_text(message.error)}", severity="error", markup=False, timeout=8)
