"""The help screen (?): what each screen is for and its keys — the screen you came from first."""
from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from . import registry
from .base import footer

INTRO = ("A local-first knowledge base: pages in spaces, every change a record on an ordered log, applied "
         "into this node's SQLite copy. Everything here reads and writes this node's own copy.")

# the keys of no one screen; each screen's own come from the registry (screens/registry.py), in its order
EVERYWHERE: list[tuple[str, str]] = [
    ("/", "search"),
    ("ctrl+p", "command palette: search for what you type, go to a screen, change the theme"),
    ("?  f1", "this help (f1 in the editor)"),
    ("escape", "back"),
    ("ctrl+q  q", "quit (asks first when an editor holds unsaved text); q and ctrl+c where no text is typed"),
]


def sections() -> list[tuple[str, str | None, list[tuple[str, str]]]]:
    """(title, the registry entry it is for — None: everywhere —, its keys), in the registry's order."""
    return [("Everywhere", None, EVERYWHERE)] + [(item.title, item.name, list(item.keys))
                                                  for item in registry.SCREENS if item.keys]


def help_renderable(current: str | None) -> Group:
    """`current`: the registry's name of the screen help was opened from; its section comes first."""
    mine = registry.help_section(current)
    ordered = sorted(sections(), key=lambda s: (0 if s[1] is not None and s[1] == mine else 1 if s[1] is None else 2))
    parts: list[RenderableType] = [Text(INTRO, style="dim"), Text()]
    for title, name, keys in ordered:
        heading = Text(title, style="bold")
        if name is not None and name == mine:
            heading.append("  (this screen)", style="dim")
        parts.append(heading)
        table = Table(box=None, show_header=False, padding=(0, 2, 0, 1), expand=True)
        table.add_column(style="bold yellow", no_wrap=True, width=16)
        table.add_column(ratio=1)
        for key, does in keys:
            table.add_row(key, does)
        parts.append(table)
        parts.append(Text())
    return Group(*parts)


class HelpScreen(ModalScreen[None]):
    CSS_PATH = "dialogs.tcss"
    BINDINGS = [
        Binding("escape,q,question_mark", "close", "Close"),
        # a dialog does not pass keys on to the app: ctrl+c quits from here as from the screen beneath
        Binding("ctrl+c", "app.help_quit", "Quit", show=False),
        Binding("j,down", "scroll('down')", "Down", show=False),
        Binding("k,up", "scroll('up')", "Up", show=False),
    ]

    def __init__(self, current: str | None = None) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="help-dialog", classes="dialog dialog-tall"):
            yield Static(Text("crewlet — keys   (escape closes)", style="bold"), classes="dialog-title")
            with VerticalScroll(id="help-scroll"):
                yield Static(help_renderable(self.current), id="help-text")
        yield footer()

    def on_mount(self) -> None:
        self.query_one("#help-scroll").focus()

    def action_scroll(self, where: str) -> None:
        scroll = self.query_one("#help-scroll", VerticalScroll)
        scroll.scroll_down() if where == "down" else scroll.scroll_up()

    def action_close(self) -> None:
        self.dismiss(None)
