"""Agents' diaries on this node: every agent with its space, onboarding state and note count, and the
highlighted agent's notes, newest first; below them, "Does knowledge help?" (the agent runs' two arms). Read-only: an agent writes its own diary through `crewlet mcp`,
and nobody writes another's. A person sees every agent; an agent (the app run `--as` one) only itself."""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from ..fmt import ago, when
from ..sanitize import clean_line
from ..widgets.knowledge_helps import KnowledgeHelps
from .base import COMMON_BINDINGS, CrewletScreen

NOTES_SHOWN = 500         # one agent's newest notes a screen lists (the CLI's --before pages further)
ONBOARDING_WORDS = {"onboarded": "onboarded", "to_read": "not onboarded", "onboarding_elsewhere": "onboarding now",
                    "nothing_to_read": "nothing to read"}


class DiariesScreen(CrewletScreen):
    CSS_PATH = "diaries.tcss"
    BINDINGS = [
        Binding("tab", "switch", "Agents/notes"),
        Binding("r", "refresh", "Refresh"),
        Binding("j", "cursor('down')", "Down", show=False),
        Binding("k", "cursor('up')", "Up", show=False),
        *COMMON_BINDINGS,
    ]

    def __init__(self) -> None:
        super().__init__(classes="diaries-screen")
        self.sub_title = "diaries"
        self.agents: list[Any] = []
        self.shown_agent: str | None = None
        self._diary: Any = None

    @property
    def diary(self) -> Any:
        if self._diary is None:
            from core.agents.diary import Diary

            self._diary = Diary(self.session.node)
        return self._diary

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        with Vertical(classes="main"):
            yield Static(id="diaries-title", classes="screen-title")
            yield DataTable(id="agents-table", cursor_type="row", zebra_stripes=True)
            yield Static(id="notes-title", classes="section-title")
            yield DataTable(id="notes-table", cursor_type="row", zebra_stripes=True)
            yield KnowledgeHelps(id="knowledge-helps")
        yield from self.compose_footer()

    def on_mount(self) -> None:
        agents = self.query_one("#agents-table", DataTable)
        agents.add_columns("agent", "space", "onboarding", "notes", "last note")
        self.query_one("#notes-table", DataTable).add_columns("id", "written", "note")
        agents.focus()
        self.action_refresh()

    def refresh_rows(self) -> None:
        self.action_refresh()

    def action_refresh(self) -> None:
        self.call_in_background(self._agents, what="agents", on_done=self._agents_listed)
        self.call_in_background(self._helps, what="agent runs", on_done=self._helps_read, on_fail=self._helps_failed)

    def _helps(self) -> Any:
        """Does knowledge help? The agent runs' two arms (core/bank/helps.py), read off this node's rows."""
        from core.bank.entries import EntryBank
        from core.bank.helps import helps
        from core.bank.runs import RunBank

        node = self.session.node
        with EntryBank(node) as bank:
            runs = RunBank(bank)
            return helps(runs.finished_runs(), runs.started_count(), node.company.bank.holdout_rate)

    def _helps_read(self, report: Any) -> None:
        self.query_one("#knowledge-helps", KnowledgeHelps).show(report)

    def _helps_failed(self, error: BaseException) -> None:
        from .base import error_text

        self.query_one("#knowledge-helps", KnowledgeHelps).failed(error_text(error))

    def _agents(self) -> list[Any]:
        from core.agents.overview import agents
        from core.knowledge import onboarding_pages

        session = self.session
        lines = agents(session.node, self.diary, page_of=onboarding_pages(session.node, lambda: session.searcher))
        who = self.session.who()
        if who is not None and who.is_agent:          # an agent sees its own diary only
            lines = [line for line in lines if line.handle == who.handle]
        return lines

    def _agents_listed(self, lines: list[Any]) -> None:
        self.agents = lines
        table = self.query_one("#agents-table", DataTable)
        keep = table.cursor_row
        table.clear()
        clock = self.crewlet.clock
        for line in lines:
            ob = line.onboarding
            state = ONBOARDING_WORDS.get(ob.state, ob.state) + (" (chain changed)" if ob.stale else "")
            table.add_row(Text(clean_line(line.handle), style="bold"), Text(clean_line(line.space or "—")),
                          Text(state, style="green" if ob.state == "onboarded" else "yellow" if ob.state == "to_read"
                               else ""),
                          Text(f"{line.notes:,}", justify="right"),
                          Text(ago(line.last_note_at, clock) or when(line.last_note_at)),
                          key=line.handle)
        notes = sum(line.notes for line in lines)
        title = Text(f"Diaries — {len(lines)} agent{'s' if len(lines) != 1 else ''}, {notes:,} note"
                     f"{'s' if notes != 1 else ''}", style="bold")
        title.append("  each agent's own, kept on this node · written through crewlet mcp", style="dim")
        self.query_one("#diaries-title", Static).update(title)
        if not lines:
            self.query_one("#notes-title", Static).update(Text(
                "No agents are configured: add [actors.NAME] with kind = \"agent\" to company.toml", style="dim"))
            self.query_one("#notes-table", DataTable).clear()
            return
        table.move_cursor(row=min(max(keep, 0), table.row_count - 1))
        self._show(self._highlighted() or lines[0].handle)

    def _highlighted(self) -> str | None:
        table = self.query_one("#agents-table", DataTable)
        if not table.row_count:
            return None
        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return str(row_key.value) if row_key is not None else None

    @on(DataTable.RowHighlighted, "#agents-table")
    def _agent_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is not None and event.row_key.value and event.row_key.value != self.shown_agent:
            self._show(str(event.row_key.value))

    def _show(self, agent: str) -> None:
        self.shown_agent = agent
        self.call_in_background(self.diary.notes, agent, actor=self.session.handle, limit=NOTES_SHOWN, what="notes",
                                on_done=self._notes_listed, on_fail=self._notes_failed)

    def _notes_listed(self, page: Any) -> None:
        if page.agent != self.shown_agent:
            return
        table = self.query_one("#notes-table", DataTable)
        table.clear()
        clock = self.crewlet.clock
        for n in page.notes:
            text = Text(clean_line(n.text))
            if page.space is not None and n.space != page.space:
                text.append("  not embedded", style="dim italic")
            # how long ago, short, so the note keeps the width at 80 columns (the date is `crewlet diary`'s)
            table.add_row(Text(str(n.id), style="dim"), Text(ago(n.created_at, clock) or when(n.created_at)), text,
                          key=str(n.id))
        shown = (f"the {len(page.notes):,} newest of {page.total:,} notes" if page.total > len(page.notes)
                 else f"{page.total:,} note{'s' if page.total != 1 else ''}, newest first")
        title = Text(f"{clean_line(page.agent)}'s diary — {shown}", style="bold")
        if page.space is None:
            title.append("  no embeddings provider: recalled by recency alone", style="dim")
        elif page.embedded < page.total:
            title.append(f"  {page.total - page.embedded:,} not embedded yet", style="dim")
        self.query_one("#notes-title", Static).update(title)

    def _notes_failed(self, error: BaseException) -> None:
        from .base import error_text

        self.query_one("#notes-table", DataTable).clear()
        self.query_one("#notes-title", Static).update(Text(error_text(error), style="red"))

    def action_switch(self) -> None:
        agents, notes = self.query_one("#agents-table", DataTable), self.query_one("#notes-table", DataTable)
        (notes if agents.has_focus else agents).focus()

    def action_cursor(self, where: str) -> None:
        table = self.focused if isinstance(self.focused, DataTable) else self.query_one("#agents-table", DataTable)
        table.action_cursor_down() if where == "down" else table.action_cursor_up()
