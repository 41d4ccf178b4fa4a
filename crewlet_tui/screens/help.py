"""The help screen (?): what each screen is for and its keys — the screen you came from first."""
from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from .base import footer

INTRO = ("A local-first knowledge base: pages in spaces, every change a record on an ordered log, applied "
         "into this node's SQLite copy. Everything here reads and writes this node's own copy.")

# (section title, the screens it is for, [(keys, what they do)])
SECTIONS: list[tuple[str, tuple[str, ...], list[tuple[str, str]]]] = [
    ("Everywhere", (), [
        ("/", "search"),
        ("ctrl+p", "command palette: search for what you type, go to a screen, change the theme"),
        ("?  f1", "this help (f1 in the editor)"),
        ("escape", "back"),
        ("ctrl+q", "quit (asks first when an editor holds unsaved text)"),
    ]),
    ("Spaces", ("SpacesScreen",), [
        ("↑ ↓  j k  g G", "move"),
        ("enter", "open the space's outline"),
        ("t", "the trash"),
        ("d", "agents' diaries"),
        ("r", "refresh the page counts"),
    ]),
    ("Diaries", ("DiariesScreen",), [
        ("↑ ↓  j k", "pick an agent: its notes show below, newest first"),
        ("tab", "move between the agents and the notes"),
        ("r", "read them again"),
    ]),
    ("Outline", ("OutlineScreen",), [
        ("↑ ↓  j k  g G", "move"),
        ("→ l  /  ← h", "open a level / close it (read when it opens, 500 pages at a time; "
                        "enter on “more…” reads the next 500)"),
        ("enter", "open the page"),
        ("n  f", "new page / new folder (a folder is an empty page)"),
        ("r  m  d", "rename / move (pick the new parent) / trash"),
    ]),
    ("Page", ("PageScreen",), [
        ("e", "edit"),
        ("y", "history"),
        ("c", "comment"),
        ("n", "new page under this one"),
        ("r  m  d", "rename / move / trash"),
        ("u", "restore it, when it is in the trash (t: the whole trash)"),
        ("o", "the space's outline"),
        ("tab", "the side panel: children and “Linked from” (enter opens)"),
        ("j k g G", "scroll"),
        ("links", "followed for http(s), mailto and the app's own page routes; other schemes are inert"),
    ]),
    ("Edit", ("EditScreen", "ConflictScreen"), [
        ("ctrl+s", "save (asks for an optional note); the save states the revision you began from"),
        ("ctrl+t", "after a refused save: their text and the diff again"),
        ("escape", "leave (asks first when the text is not saved)"),
        ("m  /  i", "refused save: rebase your text onto their revision once merged / also insert "
                    "their text below yours to merge by hand"),
    ]),
    ("History", ("HistoryScreen",), [
        ("↑ ↓  j k", "pick a revision"),
        ("b", "toggle its body / what its save changed (+ green, - red)"),
    ]),
    ("Search", ("SearchScreen",), [
        ("", "it searches as you type, when you pause (0.6 s)"),
        ("enter", "search now (in the box) / open the result (in the list)"),
        ("f2", "next mode: hybrid, keyword, meaning"),
        ("f3", "ask the words in the box as a question (the Ask screen)"),
        ("f1", "this help (the box types ? and /)"),
        ("↓", "from the box to the results"),
    ]),
    ("Ask", ("AskScreen",), [
        ("enter", "ask (in the box) / open the source's page (in the list)"),
        ("f1", "this help (the box types ? and /)"),
        ("↓", "from the box to the sources"),
        ("f5", "write the answer again, even when one is cached"),
        ("[n] links", "a citation opens source n's page"),
    ]),
    ("Trash", ("TrashScreen",), [
        ("u", "restore the page"),
        ("P", "purge it for good — an admin's alone, and it asks first"),
    ]),
]


def help_renderable(current: str | None) -> Group:
    ordered = sorted(SECTIONS, key=lambda s: (0 if current in s[1] else 1 if not s[1] else 2))
    parts: list[object] = [Text(INTRO, style="dim"), Text()]
    for title, screens, keys in ordered:
        heading = Text(title, style="bold")
        if current in screens:
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
