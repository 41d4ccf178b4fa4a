"""A refused save: somebody saved the page after the person began editing.

Shows both texts — the person's (kept, not saved yet) and the revision saved meanwhile — and the line
diff from theirs to the person's. The person merges in the editor: `m` rebases their text onto the new
revision (the editor keeps it, the next save states the new revision), `i` does the same and also puts
the other text below theirs between markers to merge by hand. Escape goes back to the editor as it was.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

from core.pages.model import Page

from ..fmt import diff_text, line_diff, when
from ..sanitize import clean_line, clean_text
from ..widgets.page_view import is_large
from ..widgets.plain_body import PlainBody
from ..widgets.title_bar import TitleBar
from . import registry
from .base import footer


@dataclass
class Conflict:
    your_body: str
    base_revision: int
    current: Page
    rescued_to: str | None = None

    @property
    def current_revision(self) -> int:
        return self.current.revision

    def diff(self) -> list[str]:
        return line_diff(clean_text(self.current.body), clean_text(self.your_body),
                         f"revision {self.current.revision} ({self.current.saved_by})", "your text")


def _text(body: str, id: str) -> Widget:
    """A side's whole text: a large one drawn row by row (a Static lays out all of it, seconds at 5 MB)."""
    if is_large(body):
        return PlainBody(clean_text(body), id=id)
    return Static(Text(clean_text(body)), id=id)


class ConflictScreen(Screen[str | None]):
    CSS_PATH = "conflict.tcss"
    BINDINGS = [
        Binding("m", "choose('rebase')", "Merged: keep mine"),
        Binding("i", "choose('append')", "Add theirs below"),
        Binding("escape", "choose('')", "Back to editor"),
        registry.binding("help"),
    ]

    def __init__(self, conflict: Conflict, *, rebased: bool = False) -> None:
        super().__init__(classes="conflict-screen")
        self.conflict = conflict
        self.rebased = rebased
        self.sub_title = "save refused: merge"

    def compose(self) -> ComposeResult:
        c = self.conflict
        yield TitleBar()
        with Vertical(classes="main"):
            head = Text()
            if self.rebased:
                head.append(f"Rebased onto revision {c.current.revision}. ", style="bold cyan")
                head.append("Their text and what differs from yours:")
            else:
                head.append("Not saved — ", style="bold red")
                head.append(f"{clean_line(c.current.saved_by)} saved revision {c.current.revision} "
                            f"({when(c.current.saved_at)}) after you began from revision {c.base_revision}. ")
                head.append("Your text is kept", style="bold")
                head.append(" (in the editor" + (f", and in {clean_line(self._rescued())}" if c.rescued_to else "") + ").")
            yield Static(head, id="conflict-head", classes="screen-title")
            with Horizontal(id="conflict-texts"):
                with Vertical(classes="conflict-pane"):
                    yield Static(Text("Your text (not saved yet)", style="bold green"), classes="pane-title")
                    with VerticalScroll(id="conflict-yours", classes="pane-body"):
                        yield _text(c.your_body, "yours-text")
                with Vertical(classes="conflict-pane"):
                    yield Static(Text(f"Revision {c.current.revision} by {clean_line(c.current.saved_by)}",
                                      style="bold red"), classes="pane-title")
                    with VerticalScroll(id="conflict-theirs", classes="pane-body"):
                        yield _text(c.current.body, "theirs-text")
            yield Static(Text(f"Diff: revision {c.current.revision} → your text", style="bold"), classes="pane-title")
            with VerticalScroll(id="conflict-diff", classes="pane-body"):
                yield Static(diff_text(c.diff(), empty="(the texts are the same)"), id="diff-text")
        yield footer()

    def _rescued(self) -> str:
        """Where the engine kept the text, shown relative to the home (it is the home's rescued/)."""
        path = Path(self.conflict.rescued_to or "")
        home = getattr(self.app, "home", None)
        try:
            return str(path.relative_to(home.root)) if home is not None else str(path)
        except ValueError:
            return str(path)

    def on_mount(self) -> None:
        self.query_one("#conflict-diff").focus()

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice or None)
