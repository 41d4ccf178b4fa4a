"""Large pages in the app (issue 34): a 5.5 MB page of 100,000 short lines and a 5 MB page of 250 long ones
open, scroll, show help and take keys in the editor — the viewer draws them as plain text row by row
(widgets/plain_body.py), the editor is a plain TextArea whose cost per key does not grow with the text
(widgets/quick_text_area.py). The times are measured by bench/large_pages.py against a normal page;
these tests check the behaviour, never a time."""
from __future__ import annotations

import pytest
from textual.document._document import Document
from textual.document._wrapped_document import WrappedDocument
from textual.widgets import Markdown

from bench.large_pages import LIMITS, long_lines_body, short_lines_body
from conftest import config_with
from core.sections.pages import DEFAULT_PAGE_BODY_BYTES
from crewlet_tui.widgets.page_view import LARGE_BODY, is_large
from crewlet_tui.widgets.plain_body import PlainBody
from crewlet_tui.widgets.quick_text_area import QuickTextArea, _QuickWrap
from test_app_support import (app_for, new_home, open_kb, rendered_text, wait_rendered, wait_screen,
                              wait_until)

SMALL = (80, 24)
SHAPES = {"short lines": short_lines_body, "long lines": long_lines_body,
          # the largest page the default [limits] lets anybody save: short lines up to 1 MiB
          "default bound": lambda: short_lines_body(DEFAULT_PAGE_BODY_BYTES // 55 - 1)}


def home_for(tmp_path, body: str):  # type: ignore[no-untyped-def]
    """A home whose [limits] take `body` (the 5 MB shapes need a company that raised the 1 MiB default)."""
    config = None if len(body.encode()) <= DEFAULT_PAGE_BODY_BYTES else config_with(limits=LIMITS)
    return new_home(tmp_path, config=config)


@pytest.mark.parametrize("width", [0, 1, 10, 40, 80])
def test_the_quick_wrap_lays_out_a_text_exactly_as_textual_does(width):
    text = ("short\n\n\tindented\nx\ty\n" + "y" * 200 + "\n" + "wide 漢字" * 30 + "\n" + "a b " * 60
            + "\n\nend")
    theirs = WrappedDocument(Document(text), tab_width=4)
    theirs.wrap(width, 4)
    ours = _QuickWrap(Document(text), tab_width=4)
    ours.wrap(width, 4)
    for field in ("_wrap_offsets", "_offset_to_line_info", "_line_index_to_offsets", "_tab_width_cache"):
        assert getattr(ours, field) == getattr(theirs, field), field
    assert ours.height == theirs.height


@pytest.mark.parametrize("shape", SHAPES)
async def test_a_large_page_opens_scrolls_and_shows_help(tmp_path, shape):
    body = SHAPES[shape]()
    assert is_large(body)
    home = home_for(tmp_path, body)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Big", body, actor="alex")
    app = app_for(home, "alex")
    async with app.run_test(size=SMALL) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_page(page.id)
        await wait_screen(pilot, "PageScreen", timeout=120)
        screen = app.screen
        await wait_until(pilot, lambda: screen.view is not None, timeout=120, what="the page")
        plain = screen.query_one(PlainBody)
        assert plain.display and not screen.query_one("#page-body", Markdown).display
        assert plain.line_count == body.count("\n") + 1
        text = await wait_rendered(pilot, "A large page", "plain text")
        assert f"{len(body):,} characters" in text
        main = screen.query_one("#page-main")
        main.focus()
        before = main.scroll_y
        await pilot.press("pagedown")
        await wait_until(pilot, lambda: main.scroll_y > before, what="PageDown to scroll")
        await pilot.press("question_mark")
        await wait_screen(pilot, "HelpScreen", timeout=60)
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen)


async def test_a_normal_page_is_still_rendered_as_markdown(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Normal", "# Heading\n\n" + "text " * (LARGE_BODY // 10), actor="alex")
    app = app_for(home, "alex")
    async with app.run_test(size=SMALL) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_page(page.id)
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: app.screen.view is not None)
        assert app.screen.query_one("#page-body", Markdown).display
        assert not app.screen.query_one(PlainBody).display or app.screen.query_one(PlainBody).line_count == 0
        assert "A large page" not in rendered_text(app)


@pytest.mark.parametrize("shape", SHAPES)
async def test_a_large_page_opens_in_the_editor_takes_keys_and_saves(tmp_path, shape):
    body = SHAPES[shape]()
    home = home_for(tmp_path, body)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Big", body, actor="alex")
    app = app_for(home, "alex")
    async with app.run_test(size=SMALL) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_page(page.id)
        await wait_screen(pilot, "PageScreen", timeout=120)
        await wait_until(pilot, lambda: app.screen.view is not None, timeout=120)
        await pilot.press("e")
        await wait_screen(pilot, "EditScreen", timeout=120)
        editing = app.screen
        assert isinstance(editing.editor, QuickTextArea) and editing.plain
        await wait_until(pilot, lambda: editing.editor.document.line_count == body.count("\n") + 1, timeout=120,
                         what="the text loaded")
        await wait_rendered(pilot, "A large page", "without Markdown highlighting")
        await pilot.press(*"Hi ")
        await pilot.press("pagedown", "end", "!")
        assert editing.editor.text.startswith("Hi ")
        assert editing.editor.text.count("!") == body.count("!") + 1
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen.id == "save-note", what="the save note")
        await pilot.press("enter")
        await wait_screen(pilot, "PageScreen", timeout=120)
    with open_kb(home) as kb:
        saved = kb.resolve(page.id).body
    assert saved.startswith("Hi ") and len(saved) == len(body) + 4


def test_the_quick_editor_edits_plain_text_only():
    area = QuickTextArea()
    with pytest.raises(ValueError, match="plain text"):
        area._set_document("x", "markdown")


async def test_a_refused_save_of_a_large_page_shows_both_texts(tmp_path):
    body = short_lines_body()
    home = home_for(tmp_path, body)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Big", body, actor="alex")
    app = app_for(home, "alex")
    async with app.run_test(size=SMALL) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_page(page.id)
        await wait_screen(pilot, "PageScreen", timeout=120)
        await wait_until(pilot, lambda: app.screen.view is not None, timeout=120)
        await pilot.press("e")
        await wait_screen(pilot, "EditScreen", timeout=120)
        editing = app.screen
        await wait_until(pilot, lambda: editing.editor.document.line_count > 1, timeout=120)
        await pilot.press(*"mine ")
        with open_kb(home) as other:
            other.save_page(page.id, "theirs\n" + body, base_revision=1, actor="sam")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen.id == "save-note", what="the save note")
        await pilot.press("enter")
        await wait_screen(pilot, "ConflictScreen", timeout=120)
        yours = app.screen.query_one("#yours-text", PlainBody)
        theirs = app.screen.query_one("#theirs-text", PlainBody)
        assert yours.line_count == theirs.line_count - 1 == body.count("\n") + 1
        await pilot.press("m")                       # merged: keep mine, on their revision
        await wait_screen(pilot, "EditScreen")
        assert editing.base_revision == 2 and editing.editor.text.startswith("mine ")
