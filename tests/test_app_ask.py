"""The app's Ask screen, driven by Pilot against a real chat server on 127.0.0.1: reached from the search
screen (f3) and the command palette, the answer streaming in while the app stays responsive, the verdict
of the citation check, numbered sources that open their pages, and the answer with no model configured."""
from __future__ import annotations

import threading
from typing import Any

import pytest
from chat_server import ChatServer, Reply
from textual.command import CommandList
from textual.widgets import Input, OptionList, Static

from core import config as config_mod
from core.paths import Home

from test_app_support import SIZE, app_for, build_index, new_home, open_kb, wait_screen, wait_until

RUNBOOK = """How a change reaches production.

## Rolling back

Roll back first, investigate second: run `nimbus rollback --to previous` and watch the error rate.
"""


def with_llm(home: Home, **settings: Any) -> None:
    data = dict(config_mod.load(home.config_file).raw, providers={"llm": settings})
    config_mod.write(home.config_file, data)


@pytest.fixture
def server():
    with ChatServer() as s:
        yield s


def asked_home(tmp_path, server: ChatServer | None) -> tuple[Home, dict[str, str]]:
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        ids = {"runbook": kb.create_page("ENG", "Deploy Runbook", RUNBOOK, actor="alex").id,
               "rollback": kb.create_page("ENG", "Rollback", "Anyone on call may roll back a deploy.",
                                          actor="alex").id}
    build_index(home)
    if server is not None:
        with_llm(home, base_url=server.url, model="test-model", timeout_s=30)
    return home, ids


def status(app: Any) -> str:
    return str(app.screen.query_one("#ask-status", Static).render())


async def test_the_answer_streams_in_while_the_app_stays_responsive_then_is_checked_and_links_its_sources(
        tmp_path, server):
    home, ids = asked_home(tmp_path, server)
    gate = threading.Event()
    server.script = [Reply("Roll back first [1]. Anyone on call may do it [2].",
                           pieces=["Roll back first [1].", " Anyone on call may do it [2]."], pause_after_first=gate)]
    app = app_for(home, start_search="roll back a deploy")
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SearchScreen")
        await wait_until(pilot, lambda: app.screen.last is not None)
        await pilot.press("f3")                                   # the search's words, asked
        await wait_screen(pilot, "AskScreen")
        screen = app.screen
        try:
            # the first piece is shown while the rest is held back by the server
            await wait_until(pilot, lambda: screen.streamed == "Roll back first [1].", what="the first piece")
            assert "writing" in status(app)
            # …and the app answers keys meanwhile: the question box takes typing
            await pilot.press("ctrl+l", "end", *" now")
            field = screen.query_one("#ask-input", Input)
            await wait_until(pilot, lambda: field.value == "roll back a deploy now", what="typing while it writes")
            assert screen.answer is None
        finally:
            gate.set()
        await wait_until(pilot, lambda: screen.answer is not None, what="the whole answer")
        answer = screen.answer
        assert answer.status == "answered" and answer.checked and answer.text.endswith("may do it [2].")
        assert "✓ checked" in status(app)
        order = [s.page_id for s in answer.sources]
        assert sorted(order) == sorted([ids["runbook"], ids["rollback"]])
        # the citations became links to their sources
        markdown = screen.query_one("#ask-answer")
        assert "[\\[1\\]](#source-1)" in markdown.source and "[\\[2\\]](#source-2)" in markdown.source
        sources = screen.query_one("#ask-sources", OptionList)
        assert sources.option_count == 2
        assert str(sources.get_option_at_index(0).prompt).startswith(f"[1] {answer.sources[0].title}")
        screen.open_source(2)                                       # what a click on [2] does
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: app.screen.page is not None and app.screen.page.id == order[1])
        await pilot.press("escape")
        await wait_screen(pilot, "AskScreen")
        await pilot.press("ctrl+l", "down")                         # from the box to the sources; enter opens
        await wait_until(pilot, lambda: sources.has_focus)
        await pilot.press("enter")
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: app.screen.page is not None and app.screen.page.id == order[0])
    assert server.requests == 1


async def test_a_reply_citing_a_missing_source_is_marked_unchecked(tmp_path, server):
    home, _ = asked_home(tmp_path, server)
    server.script = [Reply("Roll back first [1]. The CFO signs it off [7].")]
    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_ask("how do we roll back a deploy?")
        await wait_screen(pilot, "AskScreen")
        await wait_until(pilot, lambda: app.screen.answer is not None)
        assert "⚠ unchecked: it cites [7], but only 2 sources were given" in status(app)
        source = app.screen.query_one("#ask-answer").source
        assert "[\\[1\\]](#source-1)" in source and "[7]" in source and "#source-7" not in source


async def test_a_failure_is_a_line_with_the_sources_and_ask_again_writes_afresh(tmp_path, server):
    home, _ = asked_home(tmp_path, server)
    server.script = [Reply(status=500), Reply("Roll back first [1].")]
    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_ask("how do we roll back a deploy?")
        await wait_screen(pilot, "AskScreen")
        screen = app.screen
        await wait_until(pilot, lambda: screen.answer is not None)
        assert status(app).startswith("No answer. ") and "HTTP 500" in status(app)
        assert screen.query_one("#ask-sources", OptionList).option_count == 2
        first = screen.answer
        await pilot.press("f5")
        await wait_until(pilot, lambda: screen.answer is not None and screen.answer is not first)
        assert "✓ checked" in status(app) and server.requests == 2
        assert not screen.has_class("-sources-only") and screen.query_one("#ask-answer-scroll").display


async def test_with_no_model_the_screen_shows_the_passages_and_how_to_configure_one(tmp_path):
    home, _ = asked_home(tmp_path, None)
    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_ask("how do we roll back a deploy?")
        await wait_screen(pilot, "AskScreen")
        await wait_until(pilot, lambda: app.screen.answer is not None)
        assert status(app).startswith("No model is configured") and "[providers.llm]" in status(app)
        assert app.screen.has_class("-sources-only")               # nothing written: the sources take the room
        assert not app.screen.query_one("#ask-answer-scroll").display
        listed = app.screen.query_one("#ask-sources", OptionList)
        prompts = [str(listed.get_option_at_index(i).prompt) for i in (0, 1)]
        runbook = next(p for p in prompts if "Deploy Runbook" in p)
        assert "nimbus rollback --to previous" in runbook


async def test_the_command_palette_asks_what_is_typed(tmp_path, server):
    home, _ = asked_home(tmp_path, server)
    server.default = Reply("Roll back first [1].")
    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        await pilot.press("ctrl+p")
        await wait_screen(pilot, "CommandPalette")
        await pilot.press(*"roll back")
        commands = app.screen.query_one(CommandList)
        def ask_hit() -> int | None:
            return next((i for i in range(commands.option_count)
                         if str(commands.get_option_at_index(i).prompt).startswith("Ask “roll back”")), None)

        await wait_until(pilot, lambda: ask_hit() is not None, what="the palette's Ask hit")
        index = ask_hit()
        commands.highlighted = index
        await pilot.press("enter")
        await wait_screen(pilot, "AskScreen")
        await wait_until(pilot, lambda: app.screen.answer is not None)
        assert app.screen.question == "roll back" and app.screen.answer.checked


async def test_a_question_types_its_question_mark_and_slash_into_the_box(tmp_path):
    home, _ = asked_home(tmp_path, None)
    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_ask()
        await wait_screen(pilot, "AskScreen")
        field = app.screen.query_one("#ask-input", Input)
        await pilot.press(*"what is /health?")
        await wait_until(pilot, lambda: field.value == "what is /health?", what="the question typed whole")
        assert type(app.screen).__name__ == "AskScreen"
