"""The app's Diaries screen: every agent with its onboarding and note count, one agent's notes newest first;
reached by a key on the spaces screen and from the command palette; an agent sees only its own."""
from __future__ import annotations

from rich.text import Text
from textual.command import CommandList
from textual.widgets import DataTable, Static

from core import config as config_mod
from core.agents.diary import Diary
from core.node import Node

from test_app_support import SIZE, app_for, new_home, wait_screen, wait_until


def config() -> dict:
    data = config_mod.example_config()
    data["actors"]["ops-bot"] = {"kind": "agent", "space": "OPS"}
    data["providers"] = {"embeddings": {"provider": "none"}}      # no model: the notes are recency's alone
    return data


def seeded(tmp_path):
    home = new_home(tmp_path, config=config())
    with Node.open(home) as node:
        diary = Diary(node)
        for text in ("ENG deploys need the VPN", "The CI cache clears on Sundays", "Alex likes short PRs"):
            diary.remember(text, actor="eng-bot")
        diary.remember("The pager rotates on Mondays", actor="ops-bot")
    return home


def cells(table: DataTable, row: int) -> list[str]:
    return [c.plain if isinstance(c, Text) else str(c) for c in table.get_row_at(row)]


async def test_the_diaries_screen_lists_agents_and_one_agent_s_notes_newest_first(tmp_path):
    home = seeded(tmp_path)
    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        await pilot.press("d")
        await wait_screen(pilot, "DiariesScreen")
        screen = app.screen
        agents = screen.query_one("#agents-table", DataTable)
        notes = screen.query_one("#notes-table", DataTable)
        await wait_until(pilot, lambda: agents.row_count == 2 and notes.row_count == 3, what="both tables")
        assert [cells(agents, i)[0] for i in range(2)] == ["eng-bot", "ops-bot"]
        assert cells(agents, 0)[1:4] == ["ENG", "nothing to read", "3"]
        assert [cells(notes, i)[2] for i in range(3)] == ["Alex likes short PRs", "The CI cache clears on Sundays",
                                                          "ENG deploys need the VPN"]
        title = str(screen.query_one("#notes-title", Static).render())
        assert "eng-bot's diary" in title and "recency alone" in title
        await pilot.press("j")                               # the next agent: its notes replace the first's
        await wait_until(pilot, lambda: notes.row_count == 1 and "pager" in cells(notes, 0)[2], what="ops-bot's notes")
        await pilot.press("tab")
        assert notes.has_focus
        await pilot.press("escape")
        await wait_screen(pilot, "SpacesScreen")


async def test_the_palette_opens_the_diaries_and_an_agent_sees_only_its_own(tmp_path):
    home = seeded(tmp_path)
    app = app_for(home, "ops-bot")
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        await pilot.press("ctrl+p")
        await wait_screen(pilot, "CommandPalette")
        await pilot.press(*"Diaries")
        commands = app.screen.query_one(CommandList)
        await wait_until(pilot, lambda: any("Diaries" in str(commands.get_option_at_index(i).prompt)
                                            for i in range(commands.option_count)), what="the Diaries command")
        index = next(i for i in range(commands.option_count) if "Diaries" in str(commands.get_option_at_index(i).prompt))
        commands.highlighted = index
        await pilot.press("enter")
        await wait_screen(pilot, "DiariesScreen")
        agents = app.screen.query_one("#agents-table", DataTable)
        notes = app.screen.query_one("#notes-table", DataTable)
        await wait_until(pilot, lambda: agents.row_count == 1 and notes.row_count == 1, what="its own row")
        assert cells(agents, 0)[0] == "ops-bot" and "pager" in cells(notes, 0)[2]


async def test_the_diaries_screen_says_when_no_agent_is_configured(tmp_path):
    data = config_mod.example_config()
    del data["actors"]["eng-bot"]
    home = new_home(tmp_path, config=data)
    app = app_for(home)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        await pilot.press("d")
        await wait_screen(pilot, "DiariesScreen")
        title = app.screen.query_one("#notes-title", Static)
        await wait_until(pilot, lambda: "No agents are configured" in str(title.render()), what="the empty state")
