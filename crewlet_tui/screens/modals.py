"""Small dialogs: confirm, ask for one line, a new page, where to move a page."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, Static

from core.pages.model import Page

from ..sanitize import clean_line, clean_text
from ..widgets.page_tree import PageTree
from .base import footer

if TYPE_CHECKING:
    from core.pages.service import KnowledgeBase


class ConfirmModal(ModalScreen[bool]):
    """Yes or no. `danger` colours the yes button red (purge, leaving unsaved text)."""
    CSS_PATH = "dialogs.tcss"

    BINDINGS = [
        Binding("escape", "answer(False)", "Cancel"),
        Binding("y", "answer(True)", "Yes", show=False),
        Binding("n", "answer(False)", "No", show=False),
        # a dialog does not pass keys on to the app: ctrl+c quits from here as from the screen beneath
        Binding("ctrl+c", "interrupt", "Quit", show=False),
    ]

    def __init__(self, title: str, message: str, *, yes: str = "Yes", no: str = "Cancel", danger: bool = False,
                 id: str | None = "confirm", interrupt_answers_yes: bool = False) -> None:
        """`interrupt_answers_yes`: the question is whether to quit, so ctrl+c here is its yes (a terminal's second
        interrupt), not the same question asked again."""
        super().__init__(id=id)
        self.title_text, self.message, self.yes, self.no, self.danger = title, message, yes, no, danger
        self.interrupt_answers_yes = interrupt_answers_yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text(clean_line(self.title_text), style="bold"), classes="dialog-title")
            yield Static(Text(clean_text(self.message)), classes="dialog-body")
            with Horizontal(classes="dialog-buttons"):
                yield Button(self.yes, variant="error" if self.danger else "primary", id="yes")
                yield Button(self.no, id="no")
        yield footer()   # the dialog's keys, over the footer of the screen beneath (whose keys wait)

    def on_mount(self) -> None:
        self.query_one("#no" if self.danger else "#yes", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

    async def action_interrupt(self) -> None:
        if self.interrupt_answers_yes:
            self.dismiss(True)
        else:
            await self.app.run_action("help_quit")


class _FormModal(ModalScreen[Any]):
    """A dialog answered by enter in a field or its ok button, and cancelled by escape or cancel."""
    CSS_PATH = "dialogs.tcss"

    BINDINGS = [Binding("escape", "cancel", "Cancel"),
                # as ConfirmModal: ctrl+c quits from a dialog (a field's own ctrl+c copies its selection first)
                Binding("ctrl+c", "app.help_quit", "Quit", show=False)]

    def _answer(self) -> None:
        raise NotImplementedError  # each form says what its answer is

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self._answer()

    @on(Button.Pressed, "#ok")
    def _ok(self) -> None:
        self._answer()

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


class InputModal(_FormModal):
    """Ask for one line (a title, a save's note, a comment). Enter answers, escape cancels (None)."""

    def __init__(self, title: str, prompt: str, *, value: str = "", placeholder: str = "", ok: str = "OK",
                 allow_empty: bool = False, id: str | None = "ask") -> None:
        super().__init__(id=id)
        self.title_text, self.prompt, self.value = title, prompt, value
        self.placeholder, self.ok, self.allow_empty = placeholder, ok, allow_empty

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text(clean_line(self.title_text), style="bold"), classes="dialog-title")
            yield Static(Text(clean_text(self.prompt)), classes="dialog-body")
            yield Input(value=self.value, placeholder=self.placeholder, id="answer",
                        select_on_focus=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button(self.ok, variant="primary", id="ok")
                yield Button("Cancel", id="cancel")
        yield footer()

    def on_mount(self) -> None:
        field = self.query_one(Input)
        field.cursor_blink = getattr(self.app, "cursor_blink", True)
        field.focus()

    def _answer(self) -> None:
        value = self.query_one(Input).value
        if not value.strip() and not self.allow_empty:
            self.notify("this needs some text (escape cancels)", severity="warning")
            return
        self.dismiss(value)


class NewPageModal(_FormModal):
    """A title, whether it is a folder (an empty page), and where it goes: the top of the space or
    under the page the person is on."""

    def __init__(self, container: str, parent: Page | None, *, folder: bool = False) -> None:
        super().__init__(id="new-page")
        self.container, self.parent_page, self.folder = container, parent, folder

    def compose(self) -> ComposeResult:
        where = (f"under “{clean_line(self.parent_page.title)}”" if self.parent_page else "at the top of the space")
        with Vertical(classes="dialog"):
            yield Static(Text(f"New {'folder' if self.folder else 'page'} in {clean_line(self.container)}", style="bold"),
                         classes="dialog-title")
            yield Label("Title (it is the page's address, unique in the space)")
            yield Input(placeholder="e.g. Deploy Runbook", id="title")
            yield Checkbox("a folder: an empty page that groups pages", value=self.folder, id="folder")
            if self.parent_page is not None:
                yield Checkbox(Text(f"file it {where}"), value=True, id="under")
            else:
                yield Static(Text(f"It goes {where}.", style="dim"))
            with Horizontal(classes="dialog-buttons"):
                yield Button("Create", variant="primary", id="ok")
                yield Button("Cancel", id="cancel")
        yield footer()

    def on_mount(self) -> None:
        field = self.query_one("#title", Input)
        field.cursor_blink = getattr(self.app, "cursor_blink", True)
        field.focus()

    def _answer(self) -> None:
        title = self.query_one("#title", Input).value
        if not title.strip():
            self.notify("a page needs a title", severity="warning")
            return
        under = self.query("#under")
        parent = self.parent_page if (self.parent_page is not None and under and under.first(Checkbox).value) else None
        self.dismiss({"title": title, "folder": self.query_one("#folder", Checkbox).value,
                      "parent": parent})


class MoveModal(ModalScreen[dict[str, Any] | None]):
    """Pick a new parent from the space's outline, or its top. The page itself (and so everything
    under it) is left out of the list, since a page cannot be filed beneath itself."""
    CSS_PATH = "dialogs.tcss"

    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("ctrl+c", "app.help_quit", "Quit", show=False)]

    def __init__(self, kb: KnowledgeBase, page: Page, actor: str | None = None) -> None:
        super().__init__(id="move-page")
        self.kb, self.page, self.actor = kb, page, actor

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog dialog-tall"):
            yield Static(Text(f"Move “{clean_line(self.page.title)}” — pick its new parent", style="bold"),
                         classes="dialog-title")
            yield Static(Text("enter picks the highlighted row · → opens a level · escape cancels", style="dim"))
            yield PageTree(self.kb, self.page.container, actor=self.actor, pick_mode=True, exclude_id=self.page.id,
                           id="move-tree")
        yield footer()

    def on_mount(self) -> None:
        self.query_one(PageTree).focus()

    @on(PageTree.PageChosen)
    def _chosen(self, event: PageTree.PageChosen) -> None:
        event.stop()
        self.dismiss({"parent": event.page})

    def action_cancel(self) -> None:
        self.dismiss(None)
