"""Starting the app: a first run offers to create a home with the example; `crewlet open REF` and
`crewlet open --search QUERY` open it on a page or on the search screen."""
from __future__ import annotations

import pytest
from textual.widgets import DataTable
from typer.testing import CliRunner

from core.paths import Home
from test_app_support import SIZE, app_for, new_home, open_kb, screen_name, wait_screen, wait_until


async def test_first_run_offers_to_create_a_home_with_the_example(tmp_path):
    home = Home(tmp_path / "fresh")
    assert not home.exists()
    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "WelcomeScreen")
        await pilot.press("enter")  # "Create with the example" has the focus
        await wait_screen(pilot, "SpacesScreen", timeout=30)
        table = app.screen.query_one("#spaces-table", DataTable)
        await wait_until(pilot, lambda: table.row_count > 0)
        counts = {str(table.get_row_at(i)[0]).split()[0]: str(table.get_row_at(i)[3]) for i in range(table.row_count)}
        assert int(counts["ENG"]) > 0 and int(counts["PROD"]) > 0
        assert any("example knowledge base" in n.message for n in app._notifications)
    assert home.exists()


async def test_first_run_can_quit_without_creating_anything(tmp_path):
    home = Home(tmp_path / "fresh")
    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "WelcomeScreen")
        await pilot.press("q")
        await wait_until(pilot, lambda: not app.is_running)
    assert not home.exists()


async def test_start_page_and_start_search(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Deploy Runbook", "deploy\n", actor="alex")
    app = app_for(home, start_page=page.id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: app.screen.page is not None and app.screen.page.id == page.id)
        await pilot.press("escape")
        await wait_screen(pilot, "SpacesScreen")  # back lands on the spaces
    app = app_for(home, start_search="deploy runbook")
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SearchScreen")
        await wait_until(pilot, lambda: app.screen.last is not None)
        assert app.screen.query_one("#search-input").value == "deploy runbook"


async def test_a_page_that_is_not_there_says_so(tmp_path):
    home = new_home(tmp_path)
    app = app_for(home, start_page="ENG/nothing here")
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: "cannot open" in str(app.screen.query_one("#page-title").render()))
        assert screen_name(app) == "PageScreen"


@pytest.fixture
def cli(monkeypatch):
    """The real `crewlet` CLI with run_app replaced by a recorder (nothing is drawn)."""
    from crewlet_tui import cli as cli_mod
    from crewlet_tui import launch

    calls = []
    monkeypatch.setattr(launch, "run_app", lambda home, actor=None, **kw: calls.append((home, actor, kw)))
    return cli_mod.app, calls


def test_cli_open_ref_and_search(tmp_path, cli):
    app, calls = cli
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Deploy Runbook", "deploy\n", actor="alex")
    runner = CliRunner()
    result = runner.invoke(app, ["--home", str(home.root), "--as", "sam", "open", "ENG/deploy runbook"])
    assert result.exit_code == 0, result.output
    assert calls[-1][0].root == home.root and calls[-1][1] == "sam"
    assert calls[-1][2] == {"start_page": page.id, "start_search": None}

    result = runner.invoke(app, ["--home", str(home.root), "open", "--search", "roll back"])
    assert result.exit_code == 0, result.output
    assert calls[-1][2] == {"start_page": None, "start_search": "roll back"}

    result = runner.invoke(app, ["--home", str(home.root), "open", "ENG/no such page"])
    assert result.exit_code == 1 and len(calls) == 2
    result = runner.invoke(app, ["--home", str(home.root), "open"])
    assert result.exit_code == 2
    result = runner.invoke(app, ["--home", str(tmp_path / "nowhere"), "open", "x"])
    assert result.exit_code == 1


def test_cli_without_a_subcommand_runs_the_app(tmp_path, cli):
    app, calls = cli
    result = CliRunner().invoke(app, ["--home", str(tmp_path / "h")])
    assert result.exit_code == 0, result.output
    assert calls and calls[-1][0].root == (tmp_path / "h").resolve()


async def test_a_home_that_cannot_be_opened_exits_with_the_reason(tmp_path):
    home = new_home(tmp_path)
    home.config_file.write_text("operator = 12\n", encoding="utf-8")
    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: not app.is_running)
    assert app.return_code == 1


async def test_an_actor_without_the_knowledge_app_or_unknown_is_refused_at_open(tmp_path):
    from core import config as config_mod

    data = config_mod.example_config()
    data["actors"]["kim"] = {"kind": "person", "admin": False, "knowledge": False}
    home = new_home(tmp_path, config=data)
    for actor in ("kim", "nobody"):
        app = app_for(home, actor)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: not app.is_running)
        assert app.return_code == 1, actor


async def test_the_app_takes_the_home_its_launch_opened(tmp_path):
    """`crewlet` opens the home (and lists its spaces) before the app loads; the app shows that session's
    rows at once, and lists nothing a second time for them."""
    from crewlet_tui.opening import Opening

    home = new_home(tmp_path)
    with open_kb(home) as kb:
        kb.create_page("ENG", "Deploy Runbook", "deploy\n", actor="alex")
    opening = Opening(home)
    assert opening.error is None and opening.spaces
    listed = []
    kb = opening.session.kb
    real_spaces = kb.spaces
    kb.spaces = lambda *a, **k: listed.append(1) or real_spaces(*a, **k)   # type: ignore[method-assign]
    app = app_for(home, opening=opening)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        table = app.screen.query_one("#spaces-table", DataTable)
        await wait_until(pilot, lambda: table.row_count > 0)
        assert app.session is opening.session
        assert listed == []                       # the launch's rows were shown, not listed again
        assert {str(table.get_row_at(i)[0]).split()[0] for i in range(table.row_count)} >= {"ENG", "HOME"}


async def test_a_home_that_failed_to_open_at_launch_is_told(tmp_path):
    from crewlet_tui.opening import Opening

    home = new_home(tmp_path)
    home.config_file.write_text("this is = not [valid toml\n", encoding="utf-8")
    opening = Opening(home)
    assert opening.error is not None
    app = app_for(home, opening=opening)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: not app.is_running)
    assert app.return_code == 1
