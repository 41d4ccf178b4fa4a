"""The trash: trashed pages with who trashed them and when, restore, and — for an admin — purge.

A trashed page is purged after thirty days; a purge by hand is an admin's alone (nothing undoes it),
so the purge key is neither shown nor allowed for anybody else, and it always asks first.
"""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from core.pages.model import Page
from core.pages.service import TRASH_TERM_MS

from ..fmt import when, when_ago
from ..sanitize import clean_line
from .base import COMMON_BINDINGS, CrewletScreen
from .modals import ConfirmModal


class TrashScreen(CrewletScreen):
    CSS_PATH = "trash.tcss"
    BINDINGS = [
        Binding("u", "restore", "Restore"),
        Binding("P", "purge", "Purge (admin)"),
        Binding("r", "refresh", "Refresh"),
        Binding("j", "cursor('down')", "Down", show=False),
        Binding("k", "cursor('up')", "Up", show=False),
        *COMMON_BINDINGS,
    ]

    def __init__(self) -> None:
        super().__init__(classes="trash-screen")
        self.pages: list[Page] = []
        self.sub_title = "trash"

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        with Vertical(classes="main"):
            yield Static(id="trash-title", classes="screen-title")
            yield DataTable(id="trash-table", cursor_type="row", zebra_stripes=True)
        yield from self.compose_footer()

    def on_mount(self) -> None:
        table = self.query_one("#trash-table", DataTable)
        table.add_columns("page", "trashed by", "trashed", "purged after")
        table.focus()
        self.action_refresh()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "purge":
            return self.session.is_admin
        return True

    def refresh_rows(self) -> None:
        self.action_refresh()

    def action_refresh(self) -> None:
        self.call_in_background(self.kb.trash, actor=self.session.handle, what="trash", on_done=self._trash_listed)

    def _trash_listed(self, pages: list[Page]) -> None:
        self.pages = pages
        table = self.query_one("#trash-table", DataTable)
        table.clear()
        clock = self.crewlet.clock
        for p in pages:
            table.add_row(Text(f"{clean_line(p.container)}/{clean_line(p.title)}"),
                          Text(clean_line(p.trashed_by or "—"), style="bold"),
                          Text(when_ago(p.trashed_at, clock)),
                          Text(when((p.trashed_at or 0) + TRASH_TERM_MS)[:10], style="dim"), key=p.id)
        title = Text(f"Trash — {len(pages)} page{'s' if len(pages) != 1 else ''}", style="bold")
        title.append("  u restores" + (" · P purges for good (admin)" if self.session.is_admin else
                                       " · purging is an admin's") + " · emptied after 30 days", style="dim")
        self.query_one("#trash-title", Static).update(title)

    def _selected(self) -> Page | None:
        table = self.query_one("#trash-table", DataTable)
        if not table.row_count:
            return None
        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return next((p for p in self.pages if p.id == row_key.value), None)

    def action_restore(self) -> None:
        page = self._selected()
        if page is not None:
            self.call_in_background(self.kb.restore_page, page.id, actor=self.session.handle, what="restored",
                                    on_done=self._restored, on_gone=self._restored_words, writes=True)

    def _restored(self, page: Page) -> None:
        self.notify(f"restored {clean_line(page.ref)}", markup=False)
        self.action_refresh()

    def action_purge(self) -> None:
        page = self._selected()
        if page is None:
            return
        if not self.session.is_admin:  # the binding is hidden too; the engine would refuse anyway
            self.notify("purging is an admin's alone — a purge cannot be undone", severity="warning")
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.call_in_background(self.kb.purge_page, page.id, actor=self.session.handle,
                                        reason=f"purged from the app by {self.session.handle}", what="purged",
                                        on_done=self._purged, on_gone=self._purged_words, writes=True)

        self.app.push_screen(ConfirmModal("Purge for good?", f"{page.container}/{page.title} and its revisions and "
                                          "comments are deleted. Nothing undoes a purge.", yes="Purge",
                                          no="Keep it", danger=True, id="confirm-purge"), confirmed)

    def _restored_words(self, page: Page) -> str:
        return f"restored {page.ref}"

    def _purged_words(self, answer: dict[str, Any]) -> str:
        return f"purged {answer['container']}/{answer['title']}"

    def _purged(self, answer: dict[str, Any]) -> None:
        self.notify(f"purged {clean_line(answer['container'])}/{clean_line(answer['title'])}", markup=False)
        self.action_refresh()

    def action_cursor(self, where: str) -> None:
        table = self.query_one("#trash-table", DataTable)
        table.action_cursor_down() if where == "down" else table.action_cursor_up()
