"""A page's history: every revision with author, time, kind and note; any revision's body; the line diff of what a
save changed against the revision before it (+ green, - red); and `r`, revert to the revision picked (asked first,
done by core/bank/page_revert.py in a worker, said on the screen)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Static

from core.pages.model import Page, Revision

from ..fmt import diff_text, when_ago
from ..sanitize import clean_line, clean_text
from .base import COMMON_BINDINGS, CrewletScreen
from .modals import ConfirmModal

if TYPE_CHECKING:
    from core.bank.page_revert import Reverted
    from core.pages.service import KnowledgeBase


def revision_detail(kb: KnowledgeBase, page_id: str, n: int, show: str, actor: str | None) -> tuple[int, str, Any]:
    if show == "body":
        return n, show, kb.revision(page_id, n, actor=actor)
    return n, show, kb.diff(page_id, n, actor=actor)


class HistoryScreen(CrewletScreen):
    CSS_PATH = "history.tcss"
    BINDINGS = [
        Binding("b", "toggle_body", "Body/diff"),
        Binding("r", "revert", "Revert"),
        Binding("j", "cursor('down')", "Down", show=False),
        Binding("k", "cursor('up')", "Up", show=False),
        Binding("g", "cursor('top')", "Newest", show=False),
        Binding("G", "cursor('bottom')", "Oldest", show=False),
        *COMMON_BINDINGS,
    ]

    def __init__(self, page: Page) -> None:
        super().__init__(classes="history-screen")
        self.page = page
        self.revisions: list[Revision] = []
        self.show = "diff"
        self.current: int | None = None
        self.sub_title = "history"

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        with Vertical(classes="main"):
            yield Static(Text.assemble(("History of ", "bold"), (clean_line(self.page.ref), "bold"),
                                       (f"  ({self.page.id})", "dim")), classes="screen-title")
            yield DataTable(id="history-table", cursor_type="row", zebra_stripes=True)
            yield Static(id="revert-said")
            yield Static(id="detail-title", classes="section-title")
            with VerticalScroll(id="history-detail"):
                yield Static(id="detail-text")
        yield from self.compose_footer()

    def on_mount(self) -> None:
        table = self.query_one("#history-table", DataTable)
        table.add_column("rev", key="rev")
        table.add_column("kind", key="kind")
        table.add_column("author", key="author")
        table.add_column("at", key="at")
        table.add_column("note", key="note")
        table.focus()
        self.call_in_background(self.kb.history, self.page.id, actor=self.session.handle, what="history",
                                on_done=self._history_listed)

    def _history_listed(self, revisions: list[Revision]) -> None:
        self.revisions = revisions
        table = self.query_one("#history-table", DataTable)
        table.clear()
        clock = self.crewlet.clock
        for r in revisions:
            table.add_row(Text(str(r.revision), justify="right"), Text(r.kind),
                          Text(clean_line(r.author), style="bold"), Text(when_ago(r.at, clock)),
                          Text(clean_line(r.message) if r.message else "—", style="" if r.message else "dim"),
                          key=str(r.revision))
        if revisions:
            table.move_cursor(row=0)
            self._show(revisions[0].revision)

    @on(DataTable.RowHighlighted, "#history-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is not None and event.row_key.value:
            self._show(int(event.row_key.value))

    def _show(self, n: int) -> None:
        self.current = n
        what = "body" if self.show == "body" else "what this save changed"
        self.query_one("#detail-title", Static).update(
            Text(f"Revision {n}: {what}  (b: {'diff' if self.show == 'body' else 'body'})", style="bold"))
        self.call_in_background(revision_detail, self.kb, self.page.id, n, self.show, self.session.handle,
                                what="detail", on_done=self._detail_read)

    def _detail_read(self, answer: tuple[int, str, Any]) -> None:
        n, show, value = answer
        if n != self.current or show != self.show:
            return
        text = self.query_one("#detail-text", Static)
        if show == "body":
            rev: Revision = value
            text.update(Text(clean_text(rev.body)) if rev.body.strip() else Text("(empty: a folder)", style="dim"))
        else:
            text.update(diff_text(value))

    def action_toggle_body(self) -> None:
        self.show = "diff" if self.show == "body" else "body"
        if self.current is not None:
            self._show(self.current)

    def action_revert(self) -> None:
        n = self.current
        if n is None or not self.revisions:
            return
        latest = self.revisions[0].revision
        if n == latest:
            self.notify(f"revision {n} is the current one: pick an earlier revision to revert to", markup=False)
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                from core.bank.page_revert import revert_page   # the engine's bank, loaded when first used

                # against the newest revision listed: a page saved since is refused, never undone unseen
                self.call_in_background(revert_page, self.session.bank, self.page.id, n, actor=self.session.handle,
                                        base_revision=latest, what=f"revert to revision {n}",
                                        on_done=self._reverted, writes=True)

        self.app.push_screen(ConfirmModal(f"Revert to revision {n}?",
                                          f"Revision {n}'s body of “{self.page.title}” is saved as revision "
                                          f"{latest + 1}; the history keeps every revision.", yes="Revert"),
                             confirmed)

    def _reverted(self, done: Reverted) -> None:
        extra = {"revert": f": consolidation {done.proposal_id} reverted, {len(done.standing)} entries standing again",
                 "undo_revert": f": consolidation {done.proposal_id} back, {len(done.consolidated)} entries folded "
                                "in again"}.get(done.via, "")
        said = f"Reverted to revision {done.reverted_to}: saved as revision {done.revision}{extra}"
        self.page = done.page
        self.query_one("#revert-said", Static).update(Text(clean_line(said), style="bold green"))
        self.call_in_background(self.kb.history, self.page.id, actor=self.session.handle, what="history",
                                on_done=self._history_listed)

    def action_cursor(self, where: str) -> None:
        table = self.query_one("#history-table", DataTable)
        if where == "down":
            table.action_cursor_down()
        elif where == "up":
            table.action_cursor_up()
        elif where == "top":
            table.move_cursor(row=0)
        else:
            table.move_cursor(row=max(0, table.row_count - 1))
