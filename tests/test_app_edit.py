"""Editing: saves state their base revision; a stale save shows both texts and keeps the person's;
leaving (or quitting) with unsaved text asks first; new pages are written in the editor."""
from __future__ import annotations

from textual.widgets import Static

from test_app_support import open_editor, SIZE, app_for, new_home, open_kb, screen_name, wait_screen, wait_until




async def _save(pilot, app, note=""):
    await pilot.press("ctrl+s")
    await wait_until(pilot, lambda: app.screen.id == "save-note", what="the note dialog")
    if note:
        await pilot.press(*note)
    await pilot.press("enter")


async def test_save_states_the_revision_it_edited_with_the_writers_note(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Runbook", "# Runbook\n\nstep one\n", actor="alex")

    app = app_for(home, "sam")
    async with app.run_test(size=SIZE) as pilot:
        editor_screen = await open_editor(pilot, app, page.id)
        assert editor_screen.base_revision == 1
        editor_screen.editor.text = "# Runbook\n\nstep one\nstep two\n"
        await _save(pilot, app, "add step two")
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: app.screen.page is not None and app.screen.page.revision == 2)
        assert "step two" in app.screen.page.body
    with open_kb(home) as kb:
        newest = kb.history(page.id)[0]
        assert (newest.revision, newest.author, newest.message) == (2, "sam", "add step two")


async def test_a_stale_save_shows_both_texts_keeps_mine_and_saves_after_merging(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Runbook", "line one\nline two\n", actor="alex")

    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        editing = await open_editor(pilot, app, page.id)
        mine = "line one\nline two\nmy new line\n"
        editing.editor.text = mine

        # another writer saves in between
        with open_kb(home) as other:
            other.save_page(page.id, "line one (theirs)\nline two\n", base_revision=1, actor="sam", message="theirs")

        await _save(pilot, app, "mine")
        await wait_screen(pilot, "ConflictScreen")
        conflict = app.screen
        yours = str(conflict.query_one("#yours-text", Static).render())
        theirs = str(conflict.query_one("#theirs-text", Static).render())
        diff = conflict.query_one("#diff-text", Static).render()
        assert yours == mine and theirs == "line one (theirs)\nline two\n"
        assert "-line one (theirs)" in str(diff) and "+line one" in str(diff) and "+my new line" in str(diff)
        styles = {str(span.style) for span in diff.spans}
        assert {"ansi_green", "ansi_red"} <= styles or {"green", "red"} <= styles
        head = str(conflict.query_one("#conflict-head", Static).render())
        assert "sam saved revision 2" in head and "rescued/" in head
        with open_kb(home) as kb:
            assert kb.resolve(page.id).revision == 2  # nothing of mine was written over theirs

        # escape goes back to the editor as it was (nothing lost, still based on revision 1)
        await pilot.press("escape")
        await wait_screen(pilot, "EditScreen")
        assert app.screen is editing and editing.editor.text == mine and editing.base_revision == 1

        # ctrl+t shows their changes again; m: "I merged" rebases my text onto revision 2
        await pilot.press("ctrl+t")
        await wait_screen(pilot, "ConflictScreen")
        await pilot.press("m")
        await wait_screen(pilot, "EditScreen")
        assert editing.base_revision == 2 and editing.editor.text == mine
        assert "Rebased onto revision 2" in str(editing.query_one("#edit-notice", Static).render())
        editing.editor.text = "line one (theirs)\nline two\nmy new line\n"  # the merge
        await _save(pilot, app, "merged")
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: app.screen.page is not None and app.screen.page.revision == 3)

    with open_kb(home) as kb:
        final = kb.resolve(page.id)
        assert final.revision == 3 and final.body == "line one (theirs)\nline two\nmy new line\n"
        assert [r.message for r in kb.history(page.id)] == ["merged", "theirs", None]
        assert list(home.rescue_dir.iterdir())  # the refused text was also kept on disk


async def test_insert_theirs_below_mine_to_merge_by_hand(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Notes", "base\n", actor="alex")
    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        editing = await open_editor(pilot, app, page.id)
        editing.editor.text = "mine\n"
        with open_kb(home) as other:
            other.save_page(page.id, "theirs\n", base_revision=1, actor="sam")
        await _save(pilot, app)
        await wait_screen(pilot, "ConflictScreen")
        await pilot.press("i")
        await wait_screen(pilot, "EditScreen")
        assert editing.base_revision == 2
        assert editing.editor.text.startswith("mine\n") and "theirs" in editing.editor.text
        assert "<<<<<<< revision 2 by sam" in editing.editor.text


async def test_leaving_with_unsaved_text_asks_first(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Draft", "original\n", actor="alex")

    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        editing = await open_editor(pilot, app, page.id)
        await pilot.press("escape")  # nothing typed: leaves at once
        await wait_screen(pilot, "PageScreen")

        await pilot.press("e")
        await wait_screen(pilot, "EditScreen")
        editing = app.screen
        await pilot.press(*"typed")
        assert editing.dirty
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen.id == "leave-unsaved")
        await pilot.press("n")  # keep editing
        await wait_screen(pilot, "EditScreen")
        assert app.screen is editing and "typed" in editing.editor.text

        # quitting asks too
        await pilot.press("ctrl+q")
        await wait_until(pilot, lambda: app.screen.id == "quit-unsaved")
        await pilot.press("escape")
        await wait_screen(pilot, "EditScreen")
        assert app.is_running and "typed" in editing.editor.text

        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen.id == "leave-unsaved")
        await pilot.press("y")
        await wait_screen(pilot, "PageScreen")
    with open_kb(home) as kb:
        assert kb.resolve(page.id).body == "original\n"


async def test_quit_with_unsaved_text_quits_once_confirmed(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Draft", "original\n", actor="alex")
    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        editing = await open_editor(pilot, app, page.id)
        editing.editor.text = "changed"
        await pilot.press("ctrl+q")
        await wait_until(pilot, lambda: app.screen.id == "quit-unsaved")
        await pilot.press("y")
        await wait_until(pilot, lambda: not app.is_running)


async def test_new_page_is_written_in_the_editor_and_created_on_save(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        parent = kb.create_page("ENG", "Guides", "", actor="alex")

    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_page(parent.id)
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: app.screen.view is not None)
        await pilot.press("n")
        await wait_until(pilot, lambda: app.screen.id == "new-page")
        await pilot.press(*"Release checklist")
        await pilot.press("enter")
        await wait_screen(pilot, "EditScreen")
        assert app.screen.new is not None and app.screen.new.parent.id == parent.id
        app.screen.editor.text = "# Release checklist\n\n- tag\n- announce\n"
        await _save(pilot, app, "first draft")
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: app.screen.page is not None and app.screen.page.title == "Release checklist")
        assert screen_name(app) == "PageScreen"
    with open_kb(home) as kb:
        made = kb.resolve("ENG/release checklist")
        assert made.parent_id == parent.id and "- announce" in made.body
        assert kb.history(made.id)[0].message == "first draft"


async def test_a_refused_write_is_shown_and_the_text_kept(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("SKILLS", "Tool skill", "do things\n", actor="alex")
    app = app_for(home, "sam")  # not an admin: a skill page is configuration
    async with app.run_test(size=SIZE) as pilot:
        editing = await open_editor(pilot, app, page.id)
        editing.editor.text = "do other things\n"
        await _save(pilot, app)
        await wait_screen(pilot, "EditScreen")
        await wait_until(pilot, lambda: not editing.saving)
        assert editing.editor.text == "do other things\n" and editing.dirty
        assert any("may not save" in n.message for n in app._notifications)
