"""A space as an outline: its top, one level at a time (see widgets.page_tree)."""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Static

from core.pages.model import Page

from ..sanitize import clean_line
from ..widgets.page_tree import PageTree
from .page_actions import ask_move, ask_rename, ask_trash
from .base import COMMON_BINDINGS, CrewletScreen
from .modals import NewPageModal


class OutlineScreen(CrewletScreen):
    CSS_PATH = "outline.tcss"
    BINDINGS = [
        Binding("n", "new_page", "New"),
        Binding("f", "new_folder", "Folder"),
        Binding("r", "rename", "Rename"),
        Binding("m", "move", "Move"),
        Binding("d", "trash", "Trash"),
        Binding("R", "reload", "Reload", show=False),
        *COMMON_BINDINGS,
    ]

    def __init__(self, container: str) -> None:
        super().__init__(classes="outline-screen")
        self.container = container
        self.sub_title = clean_line(container)

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        with Vertical(classes="main"):
            yield Static(id="outline-title", classes="screen-title")
            yield PageTree(self.kb, self.container, actor=self.session.handle, id="outline-tree")
            yield Static(Text("enter opens · → / l expands · ← / h collapses · j k g G move", style="dim"),
                         classes="hint")
        yield from self.compose_footer()

    def on_mount(self) -> None:
        space = self.session.node.company.declared_containers().get(self.container)
        title = Text(clean_line(self.container), style="bold")
        if space is not None:
            title.append(f" — {clean_line(space.name)}")
            if space.purpose:
                title.append(f"  {clean_line(space.purpose)}", style="dim")
        else:
            title.append("  (no space declares this container)", style="yellow")
        self.query_one("#outline-title", Static).update(title)
        self.query_one(PageTree).focus()

    @property
    def page_tree(self) -> PageTree:
        return self.query_one(PageTree)

    @on(PageTree.PageChosen)
    def _open(self, event: PageTree.PageChosen) -> None:
        event.stop()
        if event.page is not None:
            self.crewlet.open_page(event.page.id)

    # -- changing the outline --------------------------------------------------------------------
    def refresh_rows(self) -> None:
        self.action_reload()

    def action_reload(self) -> None:
        self.page_tree.reload()

    def _after_change(self, page: Any = None, verb: str = "") -> None:
        if verb and page is not None:
            self.notify(f"{verb} {clean_line(getattr(page, 'title', ''))}", markup=False)
        for warning in getattr(page, "warnings", []) or []:
            self.notify(clean_line(str(warning.get("message") or warning)), severity="warning", markup=False)
        self.page_tree.reload()

    def action_new_page(self, folder: bool = False) -> None:
        parent = self.page_tree.highlighted_page

        def created(answer: dict[str, Any] | None) -> None:
            if not answer:
                return
            chosen: Page | None = answer["parent"]
            if answer["folder"]:
                self.call_in_background(self.kb.create_page, self.container, answer["title"], "",
                                        actor=self.session.handle, parent=chosen.id if chosen else None,
                                        what="created", on_done=self._folder_created,
                                        on_gone=self._folder_created_words, writes=True)
            else:
                self.crewlet.open_new_page(self.container, answer["title"], chosen)

        self.app.push_screen(NewPageModal(self.container, parent, folder=folder), created)

    def action_new_folder(self) -> None:
        self.action_new_page(folder=True)

    def _folder_created(self, page: Page) -> None:
        self._after_change(page, "created folder")

    def action_rename(self) -> None:
        page = self.page_tree.highlighted_page
        if page is not None:
            ask_rename(self, page, what="renamed", on_done=self._renamed, on_gone=self._renamed_words)

    def _renamed(self, page: Page) -> None:
        self._after_change(page, "renamed to")

    def action_move(self) -> None:
        page = self.page_tree.highlighted_page
        if page is not None:
            ask_move(self, page, what="moved", on_done=self._moved, on_gone=self._moved_words)

    def _moved(self, page: Page) -> None:
        self._after_change(page, "moved")

    def action_trash(self) -> None:
        page = self.page_tree.highlighted_page
        if page is not None:
            ask_trash(self, page, what="trashed", on_done=self._trashed, on_gone=self._trashed_words)

    def _trashed(self, page: Page) -> None:
        self._after_change(page, "trashed")

    # what an answer says when it lands after the outline was left (the app notifies it)
    def _folder_created_words(self, page: Page) -> str:
        return f"created folder {page.ref}"

    def _renamed_words(self, page: Page) -> str:
        return f"renamed to {page.ref}"

    def _moved_words(self, page: Page) -> str:
        return f"moved {page.ref}"

    def _trashed_words(self, page: Page) -> str:
        return f"{page.ref} is in the trash"
