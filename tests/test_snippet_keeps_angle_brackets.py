"""A snippet never changes what a command says: `<previous version>` in the example Rollback page's
command is a placeholder, not an HTML tag, and `search` (its process), the app (Pilot, 80×24) and
`search_knowledge` (a real MCP client) show it as the page does. Only a tag naming an HTML element is markup."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp_client import call, connect, crewlet
from test_app_support import app_for, build_index, new_home, open_kb, wait_screen, wait_until
from textual.widgets import OptionList

from core.text.markdown import plain_text

pytestmark = pytest.mark.anyio

COMMAND = "nimbus deploy --env production --version <previous version>"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    root = tmp_path_factory.mktemp("angles") / "home"
    assert crewlet(root, "init", "--example").returncode == 0
    return root


@pytest.mark.parametrize("body, kept", [
    ("```\nnimbus deploy --version <previous version>\n```", "--version <previous version>"),
    ("Run `cp <src> <dst>` first.", "cp <src> <dst>"),
    ("A `<div>` in code is what the listing says.", "<div> in code"),
    ("Outside code a placeholder <previous version> is text too.", "placeholder <previous version> is"),
    ("Generics: List<String> and Map<K, V>.", "List<String> and Map<K, V>."),
])
def test_angle_brackets_that_are_not_html_are_text(body, kept):
    assert kept in plain_text(body)


def test_real_html_tags_are_still_markup():
    assert plain_text('A <b>bold</b> <span class="x">word</span><br/> here') == "A bold word here"
    # an empty fence closes on the next line: the HTML after it is outside code, and markup
    assert plain_text('```{.textual path="x.py"}\n```\n\n<div>\nshown\n</div>\n\n```\nkept <b>\n```') == "shown kept <b>"


def test_cli_search_snippet_keeps_the_placeholder(example):
    res = crewlet(example, "search", "rollback previous version", "--json")
    assert res.returncode == 0, res.stderr
    hits = {h["title"]: h for h in json.loads(res.stdout)["hits"]}
    assert COMMAND in hits["Rollback"]["snippet"]


async def test_search_knowledge_snippet_keeps_the_placeholder(example):
    async with connect(example, "eng-bot") as client:
        text, data = await call(client, "search_knowledge", query="rollback previous version")
    assert COMMAND in text, text


async def test_the_apps_search_result_keeps_the_placeholder(tmp_path):
    """The app at 80×24, its search screen (Pilot): the hit's snippet shows the command as the page says it."""
    home = new_home(tmp_path)
    body = (Path(__file__).resolve().parent.parent / "core/examples/company/ENG/Rollback.md").read_text()
    with open_kb(home) as kb:
        kb.create_page("ENG", "Rollback", body, actor="alex")
    build_index(home)
    app = app_for(home, start_search="rollback previous version")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_screen(pilot, "SearchScreen")
        screen = app.screen
        await wait_until(pilot, lambda: screen.last is not None and screen.last.hits, timeout=120)
        assert COMMAND in screen.last.hits[0].snippet
        shown = str(screen.query_one("#search-results", OptionList).get_option_at_index(0).prompt)
        assert "<previous version>" in shown, shown
