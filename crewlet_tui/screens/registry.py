"""Every screen of the app, in one table: the app opens screens by these names, the command palette lists
the entries that open with no argument, the help screen shows each entry's keys (in this order), and the
keys that open a screen from elsewhere are made here (`binding`).

To add a screen: write its module in screens/ (a `CrewletScreen` subclass) and add one `ScreenEntry` below.
The registry imports no screen: a screen's module is imported when the screen is first opened (the launch
loads only the first screen's).
"""
from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual.binding import Binding

if TYPE_CHECKING:
    from ..app import CrewletApp


@dataclass(frozen=True)
class ScreenEntry:
    name: str                       # what the app, the palette and the bindings call it: app.show(name)
    module: str                     # its module in crewlet_tui/screens/
    cls: str                        # its class there
    title: str                      # the help section's heading and the palette's name
    about: str = ""                 # one line: the palette's help for it
    keys: tuple[tuple[str, str], ...] = ()   # its help section: (keys, what they do)
    help_in: str = ""               # shown in another entry's help section (a screen reached only from that one)
    palette: bool = False           # listed in the command palette (it opens with no argument)
    command: str = ""               # its name in the palette, when not its title
    key: str = ""                   # the key that opens it from other screens (bound where `binding` is used)
    key_display: str | None = None
    needs_home: bool = True         # opened only once a home is open
    opens: Callable[[CrewletApp], None] | None = None   # how it opens when not simply pushed (a screen reused)

    @property
    def palette_name(self) -> str:
        return self.command or self.title

    @property
    def qualified(self) -> str:
        return f"crewlet_tui.screens.{self.module}"

    def load(self) -> type[Any]:
        """The screen's class (its module imported now, if it was not)."""
        return getattr(importlib.import_module(self.qualified), self.cls)

    def is_showing(self, screen: Any) -> bool:
        """isinstance against this screen's class, without importing it (a module not loaded has no screens)."""
        mod = sys.modules.get(self.qualified)
        return mod is not None and isinstance(screen, getattr(mod, self.cls))


SCREENS: tuple[ScreenEntry, ...] = (
    ScreenEntry("spaces", "spaces", "SpacesScreen", "Spaces", "the declared spaces with their page counts",
                palette=True, opens=lambda app: app.back_to_spaces(), keys=(
                    ("↑ ↓  j k  g G", "move"),
                    ("enter", "open the space's outline"),
                    ("t", "the trash"),
                    ("d", "agents' diaries"),
                    ("v", "the review queue: what waits for a person"),
                    ("r", "refresh the page counts"),
                )),
    ScreenEntry("diaries", "diaries", "DiariesScreen", "Diaries",
                "agents' private diaries on this node, and their onboarding", palette=True, key="d", keys=(
                    ("↑ ↓  j k", "pick an agent: its notes show below, newest first"),
                    ("tab", "move between the agents and the notes"),
                    ("r", "read them again"),
                )),
    ScreenEntry("review", "review", "ReviewScreen", "Review",
                "what waits for a person: proposed entries with their reasons, open audits, and triage's standing",
                palette=True, key="v", keys=(
                    ("↑ ↓  j k  g G", "pick an entry or an audit: its reasons and triage's decision show below"),
                    ("a  v", "accept it into use (STANDING) / verify it (HUMAN_VERIFIED)"),
                    ("d  x", "dispute it (held back) / archive it (out of use); each asks for an optional reason"),
                    ("y  n", "an audit: agree (what triage did stands) / disagree (it is undone: asks first)"),
                    ("enter  o", "open the entry's screen"),
                    ("f", "filter the entries by reason"),
                    ("", "the panel above answers “Can triage decide alone?”: per decision type, kappa against "
                         "people's verdicts, how many, acting or backed off, since when"),
                    ("", "a person's: when the app acts as an agent, the store refuses each in one line"),
                )),
    ScreenEntry("outline", "outline", "OutlineScreen", "Outline", keys=(
        ("↑ ↓  j k  g G", "move"),
        ("→ l  /  ← h", "open a level / close it (read when it opens, 500 pages at a time; "
                        "enter on “more…” reads the next 500)"),
        ("enter", "open the page"),
        ("n  f", "new page / new folder (a folder is an empty page)"),
        ("r  m  d", "rename / move (pick the new parent) / trash"),
    )),
    ScreenEntry("page", "page", "PageScreen", "Page", keys=(
        ("e", "edit"),
        ("y", "history"),
        ("c", "comment"),
        ("n", "new page under this one"),
        ("r  m  d", "rename / move / trash"),
        ("u", "restore it, when it is in the trash (t: the whole trash)"),
        ("o", "the space's outline"),
        ("i", "the page's entries, under its body: in use, waiting for a person, out of use (enter opens one)"),
        ("p", "the page's entry policy: open, curated or locked (a person's)"),
        ("f", "fold the standing entries into the body (consolidate: a person's save accepts at once)"),
        ("h", "a generated page: take it over by hand (authored from then on, never rebuilt; a person's)"),
        ("tab", "the side panel: children and “Linked from” (enter opens)"),
        ("j k g G", "scroll"),
        ("links", "followed for http(s), mailto and the app's own page routes; other schemes are inert"),
    )),
    ScreenEntry("entry", "entry", "EntryScreen", "Entry", keys=(
        ("a", "accept it: into use (STANDING); a correction retires what it supersedes"),
        ("v", "verify it: you confirmed it (HUMAN_VERIFIED)"),
        ("d  x", "dispute it (held back until resolved) / archive it (out of use)"),
        ("", "each asks for an optional reason; a person's (an agent archives only its own proposed entry)"),
        ("tab", "the links: its page, what it supersedes or is superseded by (enter opens)"),
        ("j k g G", "scroll"),
    )),
    ScreenEntry("remote_page", "remote_page", "RemotePageScreen", "Page (remote)"),
    ScreenEntry("edit", "edit", "EditScreen", "Edit", keys=(
        ("ctrl+s", "save (asks for an optional note); the save states the revision you began from"),
        ("ctrl+t", "after a refused save: their text and the diff again"),
        ("escape", "leave (asks first when the text is not saved)"),
        ("m  /  i", "refused save: rebase your text onto their revision once merged / also insert "
                    "their text below yours to merge by hand"),
    )),
    ScreenEntry("conflict", "conflict", "ConflictScreen", "Save refused", help_in="edit"),
    ScreenEntry("history", "history", "HistoryScreen", "History", keys=(
        ("↑ ↓  j k", "pick a revision"),
        ("b", "toggle its body / what its save changed (+ green, - red)"),
        ("r", "revert: that revision's body saved as the next one (asks first; a consolidation's save or its revert "
              "is undone by the consolidation's own revert, its entries standing again)"),
    )),
    ScreenEntry("search", "search", "SearchScreen", "Search", "open the search screen", palette=True,
                command="Search the knowledge base",
                key="slash", opens=lambda app: app.open_search(""), keys=(
                    ("", "it searches as you type, when you pause (0.6 s)"),
                    ("enter", "search now (in the box) / open the result (in the list)"),
                    ("f2", "next mode: hybrid, keyword, meaning"),
                    ("f3", "ask the words in the box as a question (the Ask screen)"),
                    ("f1", "this help (the box types ? and /)"),
                    ("↓", "from the box to the results"),
                )),
    ScreenEntry("ask", "ask", "AskScreen", "Ask", "a question answered from the pages, every claim cited",
                palette=True, command="Ask the knowledge base", opens=lambda app: app.open_ask(""), keys=(
                    ("enter", "ask (in the box) / open the source's page (in the list)"),
                    ("f1", "this help (the box types ? and /)"),
                    ("↓", "from the box to the sources"),
                    ("f5", "write the answer again, even when one is cached"),
                    ("[n] links", "a citation opens source n's page"),
                )),
    ScreenEntry("trash", "trash", "TrashScreen", "Trash", "trashed pages: restore, or purge (admin)",
                palette=True, key="t", keys=(
                    ("u", "restore the page"),
                    ("P", "purge it for good — an admin's alone, and it asks first"),
                )),
    ScreenEntry("help", "help", "HelpScreen", "Help", "what each screen is for, and its keys", palette=True,
                key="question_mark", key_display="?", needs_home=False, opens=lambda app: app.open_help()),
    ScreenEntry("welcome", "welcome", "WelcomeScreen", "Welcome", needs_home=False),
)

BY_NAME: dict[str, ScreenEntry] = {entry.name: entry for entry in SCREENS}


def entry(name: str) -> ScreenEntry:
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no screen named {name!r} in the registry (screens/registry.py): "
                       f"one of {', '.join(BY_NAME)}") from None


def is_showing(screen: Any, name: str) -> bool:
    return entry(name).is_showing(screen)


def name_of(screen: Any) -> str | None:
    """The registry's name for `screen`, or None (a dialog, a screen not registered)."""
    for item in SCREENS:
        if item.is_showing(screen):
            return item.name
    return None


def help_section(name: str | None) -> str | None:
    """The entry whose help section covers the screen named `name`."""
    if name is None or name not in BY_NAME:
        return None
    return BY_NAME[name].help_in or name


def binding(name: str, description: str | None = None, *, action: str | None = None, show: bool = True) -> Binding:
    """The key that opens screen `name`, bound to `app.show('<name>')` (or to `action`, a screen's own that
    decides when it may)."""
    item = entry(name)
    if not item.key:
        raise ValueError(f"screen {name!r} has no key of its own in the registry")
    return Binding(item.key, action or f"app.show('{name}')", description or item.title, show=show,
                   key_display=item.key_display)
