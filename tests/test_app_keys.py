"""What a new user trips on in the app's keys (issue 33), each through Pilot at 80x24: q and ctrl+c quit
from a page, the page's footer holds every key it has (m, o, tab, t), the palette offers one help, a home
created empty says where spaces come from, and a save that still holds merge markers asks first."""
from __future__ import annotations

from textual.command import CommandList
from textual.widgets._footer import FooterKey

from test_app_support import (app_for, new_home, open_editor, open_kb, rendered_text, wait_rendered, wait_screen,
                              wait_until)

SMALL = (80, 24)


async def _on_page(pilot, app, ref: str) -> None:
    await wait_screen(pilot, "SpacesScreen")
    app.open_page(ref)
    await wait_screen(pilot, "PageScreen")
    await wait_until(pilot, lambda: app.screen.page is not None, what="the page")


def _page(tmp_path, trashed: bool = False):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Runbook", "steps\n", actor="alex")
        if trashed:
            kb.trash_page(page.id, actor="alex")
    return home, page


async def test_q_on_a_page_quits(tmp_path):
    home, page = _page(tmp_path)
    app = app_for(home, "alex")
    async with app.run_test(size=SMALL) as pilot:
        await _on_page(pilot, app, page.id)
        await pilot.press("q")
        await wait_until(pilot, lambda: app._exit, what="the app to quit")


async def test_ctrl_c_on_a_page_quits(tmp_path):
    home, page = _page(tmp_path)
    app = app_for(home, "alex")
    async with app.run_test(size=SMALL) as pilot:
        await _on_page(pilot, app, page.id)
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: app._exit, what="the app to quit")


async def test_ctrl_c_with_unsaved_text_asks_before_quitting(tmp_path):
    home, page = _page(tmp_path)
    app = app_for(home, "alex")
    async with app.run_test(size=SMALL) as pilot:
        editing = await open_editor(pilot, app, page.id)
        editing.editor.text = "unsaved words\n"
        await pilot.press("f1")               # the help over the editor: ctrl+c quits there — asking first
        await wait_screen(pilot, "HelpScreen")
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: app.screen.id == "quit-unsaved", what="the quit-unsaved question")
        assert not app._exit


async def test_ctrl_c_in_a_dialog_quits_as_from_the_screen_beneath(tmp_path):
    """A yes/no dialog and a dialog with a text field, each over a page: ctrl+c quits (before: nothing at all)."""
    from crewlet_tui.screens.modals import ConfirmModal, InputModal

    home, page = _page(tmp_path)
    for dialog in (lambda: ConfirmModal("Trash it?", "It goes to the trash."),
                   lambda: InputModal("Rename", "New title", value="Runbook")):
        app = app_for(home, "alex")
        async with app.run_test(size=SMALL) as pilot:
            await _on_page(pilot, app, page.id)
            app.push_screen(dialog())
            await wait_until(pilot, lambda: app.screen.is_modal, what="the dialog")
            await pilot.press("ctrl+c")
            await wait_until(pilot, lambda: app._exit, what="the app to quit from the dialog")


async def test_ctrl_c_again_at_the_unsaved_text_question_quits(tmp_path):
    """ctrl+c asks about unsaved text; a second ctrl+c there is the answer "quit" (as a terminal's second
    interrupt is), not the same question stacked again."""
    home, page = _page(tmp_path)
    app = app_for(home, "alex")
    async with app.run_test(size=SMALL) as pilot:
        editing = await open_editor(pilot, app, page.id)
        editing.editor.text = "unsaved words\n"
        await pilot.press("ctrl+q")
        await wait_until(pilot, lambda: app.screen.id == "quit-unsaved", what="the quit-unsaved question")
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: app._exit, what="the app to quit")


def _footer_keys(app) -> dict[str, FooterKey]:
    return {k.description: k for k in app.screen.query(FooterKey) if k.display}


async def test_the_page_footer_holds_every_key_of_the_page_at_80x24(tmp_path):
    home, page = _page(tmp_path)
    app = app_for(home, "alex")
    async with app.run_test(size=SMALL) as pilot:
        await _on_page(pilot, app, page.id)
        wanted = {"Edit", "History", "Comment", "New", "Rename", "Move", "Trash", "Outline", "Side panel",
                  "Trash list", "Back", "Search", "Help"}
        await wait_until(pilot, lambda: wanted <= set(_footer_keys(app)), what=f"{wanted} in the footer")
        footer = app.screen.query_one("KeysFooter")
        text = rendered_text(app)
        for description, key in _footer_keys(app).items():
            region = key.region
            assert footer.region.contains_region(region), f"{description} {region} outside {footer.region}"
            assert description in text
        # tab moves to the side panel, as the footer says
        await pilot.press("tab")
        assert app.screen.focused is not None and app.screen.focused.id in ("page-side", "page-related")


async def test_a_trashed_pages_footer_offers_the_whole_trash(tmp_path):
    home, page = _page(tmp_path, trashed=True)
    app = app_for(home, "alex")
    async with app.run_test(size=SMALL) as pilot:
        await _on_page(pilot, app, page.id)
        await wait_until(pilot, lambda: {"Restore", "Trash list", "Outline"} <= set(_footer_keys(app)),
                         what="u and t in the footer")
        footer = app.screen.query_one("KeysFooter")
        assert all(footer.region.contains_region(k.region) for k in _footer_keys(app).values())
        await pilot.press("t")
        await wait_screen(pilot, "TrashScreen")


async def test_the_palette_offers_one_help(tmp_path):
    app = app_for(new_home(tmp_path), "alex")
    async with app.run_test(size=SMALL) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        await pilot.press("ctrl+p")
        await wait_screen(pilot, "CommandPalette")
        commands = app.screen.query_one(CommandList)

        def names() -> list[str]:
            return [str(commands.get_option_at_index(i).prompt).split("\n")[0] for i in range(commands.option_count)]

        await wait_until(pilot, lambda: any(n.startswith("Help") for n in names()), what="the palette's commands")
        shown = names()
        assert not any(n.startswith("Keys") for n in shown), shown
        assert sum(n.startswith("Help") for n in shown) == 1, shown


async def test_a_home_created_empty_says_spaces_are_declared_in_company_toml(tmp_path):
    app = app_for(tmp_path / "fresh", "admin")
    async with app.run_test(size=SMALL) as pilot:
        await wait_screen(pilot, "WelcomeScreen")
        await pilot.press("e")                     # Create empty
        await wait_screen(pilot, "SpacesScreen", timeout=30)
        text = await wait_rendered(pilot, "HOME", "SKILLS", "company.toml")
        assert "declared in company.toml" in text


async def test_a_home_with_spaces_of_its_own_says_nothing_of_company_toml(tmp_path):
    app = app_for(new_home(tmp_path), "alex")
    async with app.run_test(size=SMALL) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        await wait_rendered(pilot, "ENG")
        assert "No spaces of your own" not in rendered_text(app)


async def _conflict_then_insert_theirs(pilot, app, home, page):
    editing = await open_editor(pilot, app, page.id)
    editing.editor.text = "mine\n"
    with open_kb(home) as other:
        other.save_page(page.id, "theirs\n", base_revision=1, actor="sam")
    await pilot.press("ctrl+s")
    await wait_until(pilot, lambda: app.screen.id == "save-note", what="the save note")
    await pilot.press("enter")
    await wait_screen(pilot, "ConflictScreen")
    await pilot.press("i")                          # add theirs below, between markers
    await wait_screen(pilot, "EditScreen")
    assert "<<<<<<<" in editing.editor.text
    return editing


async def test_saving_text_that_still_holds_merge_markers_asks_first(tmp_path):
    home, page = _page(tmp_path)
    app = app_for(home, "alex")
    async with app.run_test(size=SMALL) as pilot:
        editing = await _conflict_then_insert_theirs(pilot, app, home, page)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen.id == "save-markers", what="the merge-markers question")
        assert "Line 3" in rendered_text(app)
        await pilot.press("n")                       # keep merging: nothing saved
        await wait_screen(pilot, "EditScreen")
        assert app.screen is editing
        with open_kb(home) as kb:
            assert kb.resolve(page.id).body == "theirs\n"
        # merged by hand: the markers gone, the save asks only for its note
        editing.editor.text = "mine\ntheirs\n"
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen.id == "save-note", what="the save note")
        await pilot.press("enter")
        await wait_screen(pilot, "PageScreen")
    with open_kb(home) as kb:
        assert kb.resolve(page.id).body == "mine\ntheirs\n"


async def test_saving_with_the_markers_when_the_person_says_so(tmp_path):
    home, page = _page(tmp_path)
    app = app_for(home, "alex")
    async with app.run_test(size=SMALL) as pilot:
        await _conflict_then_insert_theirs(pilot, app, home, page)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen.id == "save-markers", what="the merge-markers question")
        await pilot.press("y")
        await wait_until(pilot, lambda: app.screen.id == "save-note", what="the save note")
        await pilot.press("enter")
        await wait_screen(pilot, "PageScreen")
    with open_kb(home) as kb:
        assert "<<<<<<< revision 2 by sam" in kb.resolve(page.id).body


async def test_ctrl_c_in_the_editor_copies_a_selection_and_otherwise_says_how_to_quit(tmp_path):
    home, page = _page(tmp_path)
    app = app_for(home, "alex")
    async with app.run_test(size=SMALL) as pilot:
        editing = await open_editor(pilot, app, page.id)
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: any("ctrl+q quits" in n.message for n in app._notifications),
                         what="ctrl+c to say how to quit")
        assert app.screen is editing and not app._exit
        editing.editor.select_all()
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: app.clipboard == "steps\n", what="the selection copied")
