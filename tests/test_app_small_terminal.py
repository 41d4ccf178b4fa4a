"""Every screen at 80x24 (and at 120x36): usable, its keys in the footer, nothing drawn over them, the
status line whole. One Pilot test per screen and size, on the bundled example knowledge base.

What "fits" means here, measured on the widgets Textual laid out (not on a picture of them):
- every key the footer shows lies inside the footer (a key past its right edge is a key nobody sees),
  no two overlap, and the command palette's key is not drawn over them;
- the keys a person needs on that screen are among them (Back, Search, Help, and the screen's own);
- each part of the status line shows its whole text (a narrow terminal gets the short forms);
- a dialog, and each of its buttons, lies inside the terminal.
"""
from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import Button, Static
from textual.widgets._footer import FooterKey

from core.importer import import_directory
from core.paths import examples_dir
from crewlet_tui.widgets.status import IndexState, MeaningState
from test_app_support import app_for, new_home, open_kb, rendered_text, screen_name, wait_screen, wait_until

SIZES = [(80, 24), (120, 36)]

# the keys each screen must show, by description (what a person reads), and those it must not
NEEDED: dict[str, set[str]] = {
    "welcome": {"Create with the example", "Create empty", "Quit"},
    "spaces": {"Trash", "Quit", "Search", "Help"},
    "outline": {"New", "Folder", "Rename", "Move", "Trash", "Back", "Search", "Help"},
    "page": {"Edit", "History", "Comment", "New", "Rename", "Move", "Trash", "Outline", "Entries", "Policy",
             "Side panel", "Trash list", "Back", "Search", "Help"},
    "trashed-page": {"Restore", "History", "Outline", "Side panel", "Trash list", "Back", "Search", "Help"},
    "edit": {"Save", "Back", "Help"},
    "conflict": {"Merged: keep mine", "Add theirs below", "Back to editor", "Help"},
    "history": {"Body/diff", "Back", "Search", "Help"},
    "search": {"Mode", "Back", "Help"},
    "ask": {"Ask again", "Back", "Help"},
    "trash": {"Restore", "Purge (admin)", "Back", "Search", "Help"},
    # a dialog's footer says what the dialog takes (the keys of the screen beneath wait)
    "help": {"Close"},
    "move": {"Cancel"},
    "new-page": {"Cancel"},
    "confirm": {"Cancel"},
}
NOT_SHOWN: dict[str, set[str]] = {
    "page": {"Restore"},
    "trashed-page": {"Edit", "Trash", "Comment", "New", "Rename"},
    "search": {"Search"},          # the box types a slash: "/ Search" there would be a key that does not work
    "ask": {"Search"},             # the same box, and a question ends in "?"
    **{d: {"Edit", "History", "Trash", "Back"} for d in ("help", "move", "new-page", "confirm")},
}
# what each screen shows of the example, so "usable" is more than a footer
SHOWS: dict[str, tuple[str, ...]] = {
    "welcome": ("Welcome to crewlet", "Create with the example"),
    "spaces": ("Spaces", "ENG", "Engineering"),
    "outline": ("ENG", "Deploy Runbook", "Onboarding"),
    "page": ("Deploy Runbook", "How a change reaches production"),
    "trashed-page": ("Rollback", "In the trash", "u restores it"),
    "edit": ("Editing ENG/Deploy Runbook",),
    "conflict": ("Not saved", "Your text (not saved yet)", "Revision 2 by sam"),
    "history": ("History of ENG/Deploy Runbook", "create"),
    "search": ("searching this copy", "429 backoff in the GitLab client", "↓ the results"),
    "ask": ("No model is configured", "Sources", "[1] Deploy Runbook"),
    "trash": ("Trash", "ENG/Rollback"),
    "help": ("crewlet — keys", "escape"),
    "move": ("Move",),
    "new-page": ("New page",),
    "confirm": ("Move to the trash?",),
}
DIALOGS = {"help", "move", "new-page", "confirm"}
SCREENS = list(SHOWS)


def example_home(tmp_path) -> Any:
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        import_directory(kb, examples_dir(), actor="alex")
    return home


async def go(pilot: Any, name: str) -> None:
    """From the spaces screen to `name`, as a person would get there (keys where a key does it)."""
    app = pilot.app
    await wait_screen(pilot, "SpacesScreen")
    kb = app.session.kb
    if name == "spaces":
        await wait_until(pilot, lambda: app.screen.query_one("#spaces-table").row_count > 0)
        return
    if name == "outline":
        app.open_outline("ENG")
        await wait_screen(pilot, "OutlineScreen")
        await wait_until(pilot, lambda: app.screen.page_tree.first_window_shown)
        return
    if name == "trash":
        kb.trash_page("ENG/Rollback", actor="alex")
        await pilot.press("t")
        await wait_screen(pilot, "TrashScreen")
        await wait_until(pilot, lambda: app.screen.pages)
        return
    if name == "search":
        from test_app_support import build_index

        build_index(app.home)
        await pilot.press("slash")
        await wait_screen(pilot, "SearchScreen")
        await pilot.press(*"429 backoff")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.screen.last is not None and app.screen.last.hits)
        return
    if name == "ask":
        from test_app_support import build_index

        build_index(app.home)
        app.open_ask("how do we deploy a change?")
        await wait_screen(pilot, "AskScreen")
        await wait_until(pilot, lambda: app.screen.answer is not None)
        return
    ref = "ENG/Deploy Runbook"
    if name == "trashed-page":
        ref = kb.trash_page("ENG/Rollback", actor="alex").id
    app.open_page(ref)
    await wait_screen(pilot, "PageScreen")
    await wait_until(pilot, lambda: app.screen.page is not None)
    if name in ("page", "trashed-page"):
        return
    keys = {"help": "question_mark", "move": "m", "new-page": "n", "confirm": "d", "history": "y", "edit": "e",
            "conflict": "e"}
    await pilot.press(keys[name])
    if name == "history":
        await wait_screen(pilot, "HistoryScreen")
        await wait_until(pilot, lambda: app.screen.revisions)
        return
    if name in ("edit", "conflict"):
        await wait_screen(pilot, "EditScreen")
        if name == "conflict":
            page = kb.resolve(ref, actor="alex")
            kb.save_page(page.id, page.body + "\nTheirs.\n", base_revision=page.revision, actor="sam")
            app.screen.editor.insert("Mine. ")
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: app.screen.id == "save-note")
            await pilot.press("enter")
            await wait_screen(pilot, "ConflictScreen")
        return
    await wait_until(pilot, lambda: app.screen.is_modal and app.screen.is_mounted)


def footer_problems(app: Any, name: str, width: int) -> list[str]:
    keys = [k for k in app.screen.query(FooterKey) if k.display]
    problems = []
    if any(k.has_class("-command-palette") for k in keys):
        problems.append("the command palette's key is in the footer")
    # a footer whose keys do not fit on one row takes two (the page's at 80 columns): checked row by row
    spans = sorted((k.virtual_region.y, k.virtual_region.x, k.virtual_region.right, k.description) for k in keys)
    footer_width = keys[0].parent.size.width if keys else width
    for _, x, right, what in spans:
        if right > footer_width:
            problems.append(f"'{what}' is past the footer's right edge ({right} > {footer_width})")
    for (row, _, right, a), (next_row, x, _, b) in zip(spans, spans[1:]):
        if row == next_row and x < right:
            problems.append(f"'{a}' and '{b}' overlap")
    shown = {k.description for k in keys}
    missing = NEEDED.get(name, set()) - shown
    if missing:
        problems.append(f"missing keys {sorted(missing)} (shown: {sorted(shown)})")
    wrong = NOT_SHOWN.get(name, set()) & shown
    if wrong:
        problems.append(f"keys that cannot be used here: {sorted(wrong)}")
    return problems


def status_problems(app: Any) -> list[str]:
    problems = []
    for part in ("#status-who", "#status-index", "#status-meaning"):
        found = app.screen.query(part)
        if not found:
            continue
        static = found.first(Static)
        text = str(static.render())
        if static.region.width < len(text):
            problems.append(f"{part} shows {static.region.width} of '{text}' ({len(text)} cells)")
    return problems


def dialog_problems(app: Any, width: int, height: int) -> list[str]:
    dialog = app.screen.query_one(".dialog")
    problems = []
    if dialog.region.right > width or dialog.region.bottom > height or dialog.region.x < 0 or dialog.region.y < 0:
        problems.append(f"the dialog {dialog.region} is not inside {width}x{height}")
    for button in app.screen.query(Button):
        r = button.region
        if not r.area or r.right > width or r.bottom > height:
            problems.append(f"button '{button.label}' is not on screen: {r}")
    return problems


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("name", SCREENS)
async def test_every_screen_is_usable_with_its_keys_in_the_footer(tmp_path, name, size):
    width, height = size
    if name == "welcome":
        app = app_for(tmp_path / "nothing-here-yet")
    else:
        app = app_for(example_home(tmp_path))
    async with app.run_test(size=size) as pilot:
        if name == "welcome":
            await wait_screen(pilot, "WelcomeScreen")
        else:
            await go(pilot, name)
            # the background worker's words at a 14,435-page home: the widest the status line gets in use
            app.index_state = IndexState("current", 14_435, 14_435, 14_470, 14_470)
            app.meaning_state = MeaningState("current", 14_435, 14_435)
        await pilot.pause(0.1)
        await wait_until(pilot, lambda: all(t in rendered_text(app) for t in SHOWS[name]), what=SHOWS[name])
        problems = footer_problems(app, name, width)
        problems += status_problems(app)
        if name in DIALOGS:
            problems += dialog_problems(app, width, height)
        assert not problems, f"{name} at {width}x{height} ({screen_name(app)}):\n" + "\n".join(problems)
