"""The declared spaces with their page counts; containers that hold pages but that no space declares
are shown apart (reachable by address and search, but nobody created them on purpose)."""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.render import measure
from textual.containers import Vertical
from textual.widgets import DataTable, Static
from textual.widgets.data_table import ColumnKey

from ..sanitize import clean_line
from . import registry
from .base import CrewletScreen


class SpacesScreen(CrewletScreen):
    BINDINGS = [
        Binding("enter", "open_space", "Open", show=False),
        Binding("j", "cursor('down')", "Down", show=False),
        Binding("k", "cursor('up')", "Up", show=False),
        Binding("g", "cursor('top')", "First", show=False),
        Binding("G", "cursor('bottom')", "Last", show=False),
        registry.binding("trash"),
        registry.binding("diaries"),
        registry.binding("review"),
        Binding("r", "refresh", "Refresh"),
        Binding("q", "app.quit", "Quit"),
        registry.binding("search"),
        registry.binding("help"),
    ]

    def __init__(self, rows: list[dict[str, Any]] | None = None) -> None:
        super().__init__(id="spaces")
        self.rows: list[dict[str, Any]] = []
        self.first_rows = rows     # listed while the app loaded (crewlet's launch): shown at once
        self.sub_title = "spaces"

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        with Vertical(classes="main"):
            yield Static(Text("Spaces", style="bold"), classes="screen-title")
            yield DataTable(id="spaces-table", cursor_type="row", zebra_stripes=True)
            yield Static(id="undeclared-title", classes="section-title")
            # the undeclared containers' table is mounted below it when there are any (most homes: never)
        yield from self.compose_footer()

    def on_mount(self) -> None:
        table = self.query_one("#spaces-table", DataTable)
        table.add_column("space", key="space")
        table.add_column("name", key="name")
        table.add_column("lead", key="lead")
        table.add_column("pages", key="pages")
        table.add_column("purpose", key="purpose")
        table.focus()
        if self.first_rows is not None:
            self._spaces_listed(self.first_rows)   # and the resume that follows this first mount lists nothing again
        else:
            self.action_refresh()

    def refresh_rows(self) -> None:
        self.action_refresh()

    def action_refresh(self) -> None:
        self.call_in_background(self.kb.spaces, actor=self.session.handle, what="spaces", on_done=self._spaces_listed)

    def on_screen_resume(self) -> None:
        if self.first_rows is not None:   # the first resume, right after the rows listed at launch
            self.first_rows = None
            return
        if self.rows:  # counts change as pages are created and trashed elsewhere in the app
            self.action_refresh()

    def _spaces_listed(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        table = self.query_one("#spaces-table", DataTable)
        undeclared = [r for r in rows if not r["declared"]]
        other = self._undeclared_table(create=bool(undeclared))
        keep = table.cursor_row
        table.clear()
        purpose = table.columns[ColumnKey("purpose")]
        purpose.auto_width = False
        purpose.width = self._purpose_room(rows)
        if other is not None:
            other.clear()
        for r in rows:
            if r["declared"]:
                key = Text(clean_line(r["key"]), style="bold")
                if r["reserved"]:
                    key.append(" reserved", style="dim italic")
                table.add_row(key, Text(clean_line(r["name"])), Text(clean_line(r["lead"] or "—")),
                              Text(f"{r['pages']:,}", justify="right"), Text(clean_line(r["purpose"]), style="dim", overflow="ellipsis", no_wrap=True),
                              key=r["key"])
            elif other is not None:
                other.add_row(Text(clean_line(r["key"]), style="yellow"), Text(f"{r['pages']:,}", justify="right"),
                              key=r["key"])
        title = self.query_one("#undeclared-title", Static)
        if undeclared:
            title.update(Text("Containers that hold pages but no space declares "
                              "(declare them in company.toml to write there)", style="yellow"))
        elif not any(r["declared"] and not r["reserved"] for r in rows):
            # a home created empty has only the reserved spaces: say where a space of its own comes from
            title.update(Text("No spaces of your own yet: a space is declared in company.toml, as a "
                              "[spaces.KEY] table with a name and a lead — "
                              f"{clean_line(str(self.crewlet.home.config_file))}", style="yellow"))
        else:
            title.update("")
        if other is not None:
            other.display = bool(undeclared)
        self._fit_columns(table)
        if table.row_count:
            table.move_cursor(row=min(max(keep, 0), table.row_count - 1))
        shown = getattr(self.app, "first_screen_shown", None)   # the app's background work waits for this paint
        if shown is not None:
            self.app.call_after_refresh(shown)

    def _undeclared_table(self, create: bool) -> DataTable | None:
        """The undeclared containers' table; mounted (under its title) the first time there are some."""
        found = self.query("#undeclared-table")
        if found:
            return found.first(DataTable)
        if not create:
            return None
        other: DataTable = DataTable(id="undeclared-table", cursor_type="row")
        other.add_columns("container", "pages")
        self.query_one(".main").mount(other)
        return other

    def _fit_columns(self, table: DataTable) -> None:
        """Each column but purpose (sized above) as wide as its widest cell, set now. The table measures
        new cells itself when it next idles, and a width found then is not painted into the header it
        has already drawn (its line cache) until something resizes the table."""
        console = self.app.console
        for key, column in table.columns.items():
            if key.value == "purpose":
                continue
            column.width = max([measure(console, column.label, 1),
                                *(measure(console, cell, 1) for cell in table.get_column(key))])
            column.auto_width = False

    def _purpose_room(self, rows: list[dict[str, Any]]) -> int:
        """The purpose column takes what the other columns leave (so nothing scrolls sideways)."""
        declared = [r for r in rows if r["declared"]]
        widths = [max([len("space")] + [len(r["key"]) + (9 if r["reserved"] else 0) for r in declared]),
                  max([len("name")] + [len(r["name"]) for r in declared]),
                  max([len("lead")] + [len(r["lead"] or "—") for r in declared]),
                  max([len("pages")] + [len(f"{r['pages']:,}") for r in declared])]
        used = sum(widths) + 2 * 5  # each column has a cell of padding either side
        return max(12, self.app.size.width - 2 - used - 1)

    def _space_key(self) -> str | None:
        focused = self.focused
        table = focused if isinstance(focused, DataTable) else self.query_one("#spaces-table", DataTable)
        if not table.row_count:
            return None
        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return str(row_key.value) if row_key is not None else None

    def action_open_space(self) -> None:
        key = self._space_key()
        if key:
            self.crewlet.open_outline(key)

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key is not None and event.row_key.value:
            self.crewlet.open_outline(str(event.row_key.value))

    def action_cursor(self, where: str) -> None:
        table = self.focused if isinstance(self.focused, DataTable) else self.query_one("#spaces-table", DataTable)
        if where == "down":
            table.action_cursor_down()
        elif where == "up":
            table.action_cursor_up()
        elif where == "top":
            table.move_cursor(row=0)
        elif where == "bottom":
            table.move_cursor(row=max(0, table.row_count - 1))
