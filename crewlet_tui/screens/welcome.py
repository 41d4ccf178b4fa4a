"""The first run: no home here yet. Offer to create one with the bundled example knowledge base."""
from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Button, Static

from ..sanitize import clean_line
from ..widgets.title_bar import TitleBar
from .base import footer


class WelcomeScreen(Screen[None]):
    CSS_PATH = ["dialogs.tcss", "welcome.tcss"]   # in this order: .welcome outranks .dialog
    BINDINGS = [
        Binding("y,enter", "create(True)", "Create with the example"),
        Binding("e", "create(False)", "Create empty"),
        Binding("q,escape", "app.quit", "Quit"),
    ]

    def __init__(self, home_root: str) -> None:
        super().__init__(classes="welcome-screen")
        self.home_root = home_root
        self.busy = False
        self.sub_title = "first run"

    def compose(self) -> ComposeResult:
        yield TitleBar()
        with Vertical(classes="dialog welcome"):
            yield Static(Text("Welcome to crewlet", style="bold"), classes="dialog-title")
            body = Text()
            body.append("There is no crewlet home at\n")
            body.append(f"  {clean_line(self.home_root)}\n\n", style="bold")
            body.append("Create one here? The example is a small company knowledge base (spaces ENG, LEAD, PROD "
                        "and HOME, with a few pages each) to look around in; you act as its operator, alex.\n"
                        "(--home DIR or CREWLET_HOME picks another place.)")
            yield Static(body, classes="dialog-body")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Create with the example", variant="primary", id="example")
                yield Button("Create empty", id="empty")
                yield Button("Quit", id="quit")
            yield Static(id="welcome-progress")
        yield footer()

    def on_mount(self) -> None:
        self.query_one("#example", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "quit":
            self.app.exit()
        else:
            self.action_create(event.button.id == "example")

    def action_create(self, example: bool) -> None:
        if self.busy:
            return
        self.busy = True
        for button in self.query(Button):
            button.disabled = True
        self.progress("creating the home…")
        self.app.create_home(example)  # type: ignore[attr-defined]

    def progress(self, text: str, *, error: bool = False) -> None:
        self.query_one("#welcome-progress", Static).update(Text(clean_line(text), style="bold red" if error else "yellow"))
        if error:
            self.busy = False
            for button in self.query(Button):
                button.disabled = False
