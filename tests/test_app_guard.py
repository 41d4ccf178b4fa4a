"""Review regressions in the app: "Spaces" from the command palette never drops unsaved text unasked,
and the page screen reaches the trash list with `t`."""
from __future__ import annotations

from test_app_support import open_editor, SIZE, app_for, new_home, open_kb, screen_name, wait_screen, wait_until




async def test_spaces_from_the_palette_asks_before_leaving_unsaved_text(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Draft", "original\n", actor="alex")

    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        editing = await open_editor(pilot, app, page.id)
        editing.editor.text = "my unsaved words\n"
        await wait_until(pilot, lambda: editing.has_unsaved_text, what="the editor to hold unsaved text")

        app.show("spaces")  # what the command palette's "Spaces" runs
        await wait_until(pilot, lambda: app.screen.id == "leave-unsaved", what="the leave-unsaved confirm")
        assert editing in app.screen_stack  # nothing popped while the question is open

        await pilot.press("n")  # keep editing
        await wait_screen(pilot, "EditScreen")
        assert app.screen is editing and editing.editor.text == "my unsaved words\n"

        app.show("spaces")
        await wait_until(pilot, lambda: app.screen.id == "leave-unsaved", what="the leave-unsaved confirm")
        await pilot.press("y")  # leave, losing it
        await wait_screen(pilot, "SpacesScreen")
        assert editing not in app.screen_stack
    with open_kb(home) as kb:
        assert kb.resolve(page.id).body == "original\n"


async def test_spaces_with_nothing_unsaved_goes_straight_back(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Draft", "original\n", actor="alex")
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await open_editor(pilot, app, page.id)
        app.show("spaces")
        await wait_screen(pilot, "SpacesScreen")


async def test_t_on_a_page_opens_the_trash(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Runbook", "steps\n", actor="alex")
        gone = kb.create_page("ENG", "Old page", "old\n", actor="alex")
        kb.trash_page(gone.id, actor="alex")

    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_page(page.id)
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: app.screen.view is not None)
        await pilot.press("t")
        await wait_screen(pilot, "TrashScreen")
        assert screen_name(app) == "TrashScreen"
