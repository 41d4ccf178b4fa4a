"""The app never crashes on a slow save (issue 19, part 4).

Reproduction: edit a page, press ctrl+s while another process holds the log's lock, press F1 (help), release
the lock, press Escape — the app exited with InvalidStateError (6 of 6 tries): the save's answer arrived while
the help screen covered the editor, and the editor's `dismiss` popped the help screen instead of itself, so
the next Escape dismissed it a second time. A screen that is covered (or already gone) when its background
work answers must finish where it stands. A Pilot test per screen that awaits a worker's answer."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_app_support import SIZE, app_for, new_home, open_editor, open_kb, screen_name, wait_screen, wait_until

ROOT = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, PYTHONPATH=str(ROOT))

HOLDER = """
import sys
from core.log import FileLog
with FileLog(sys.argv[1]) as flog, flog.locked():
    print("held", flush=True)
    sys.stdin.readline()
"""


class LockHolder:
    """Another process holding the pages log's writers' lock until `release()`: a gate the test opens."""

    def __init__(self, log: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(log)], env=ENV, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "held"

    def release(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write("\n")
            self.proc.stdin.flush()
        self.proc.wait(30)


@pytest.fixture
def holder(tmp_path):
    made: list[LockHolder] = []

    def hold(log: Path) -> LockHolder:
        made.append(LockHolder(log))
        return made[-1]

    yield hold
    for h in made:
        h.release()


def revision(home, page_id: str) -> int:
    with open_kb(home) as kb:
        return kb.resolve(page_id).revision


async def test_a_save_that_lands_while_help_covers_the_editor_then_escape_does_not_crash(tmp_path, holder):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Slow Save", "first\n", actor="alex")
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        editing = await open_editor(pilot, app, page.id)
        editing.editor.text = "second\n"
        lock = holder(home.log_file)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen.id == "save-note", what="the note prompt")
        await pilot.press("enter")                       # the save starts, and waits for the lock
        await wait_until(pilot, lambda: editing.saving, what="the save to start")
        await pilot.press("f1")
        await wait_screen(pilot, "HelpScreen")
        lock.release()
        await wait_until(pilot, lambda: not editing.saving, what="the save to answer")
        assert revision(home, page.id) == 2
        # help still covers the editor: the answer did not pop it
        assert screen_name(app) == "HelpScreen" and editing in app.screen_stack
        await pilot.press("escape")                      # help closes: the saved editor gives way to the page
        await wait_screen(pilot, "PageScreen")
        assert editing not in app.screen_stack
        await pilot.press("escape")
        await wait_screen(pilot, "SpacesScreen")
    assert app.return_code in (None, 0)


async def test_an_editor_left_while_its_save_waits_is_not_dismissed_twice(tmp_path, holder):
    """Escape (and "leave, losing it") while the save waits for the lock: the editor is gone when its answer
    arrives, and the answer must not pop the screen below it."""
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Left Behind", "first\n", actor="alex")
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        editing = await open_editor(pilot, app, page.id)
        editing.editor.text = "second\n"
        lock = holder(home.log_file)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen.id == "save-note", what="the note prompt")
        await pilot.press("enter")
        await wait_until(pilot, lambda: editing.saving, what="the save to start")
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen.id == "leave-unsaved", what="the leave-unsaved confirm")
        await pilot.press("y")
        await wait_screen(pilot, "PageScreen")
        below = app.screen
        lock.release()
        await wait_until(pilot, lambda: revision(home, page.id) == 2, what="the save to land")
        # the editor is gone: the app says the answer, and pops nothing
        await wait_until(pilot, lambda: any("saved revision 2" in n.message for n in app._notifications),
                         what="the late answer to be said")
        assert app.screen is below
        await pilot.press("escape")
        await wait_screen(pilot, "SpacesScreen")
    assert app.return_code in (None, 0)


async def test_a_new_page_created_while_help_covers_the_editor_opens_once_help_closes(tmp_path, holder):
    home = new_home(tmp_path)
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_new_page("ENG", "Fresh Page", None)
        await wait_screen(pilot, "EditScreen")
        editing = app.screen
        editing.editor.text = "hello\n"
        lock = holder(home.log_file)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen.id == "save-note", what="the note prompt")
        await pilot.press("enter")
        await wait_until(pilot, lambda: editing.saving, what="the create to start")
        await pilot.press("f1")
        await wait_screen(pilot, "HelpScreen")
        lock.release()
        await wait_until(pilot, lambda: not editing.saving, what="the create to answer")
        assert screen_name(app) == "HelpScreen"
        await pilot.press("escape")
        await wait_screen(pilot, "PageScreen")
        assert app.screen.page is not None and app.screen.page.title == "Fresh Page"
        assert editing not in app.screen_stack
    assert app.return_code in (None, 0)


async def test_a_stale_save_answered_while_help_covers_the_editor_shows_the_conflict_once_help_closes(tmp_path,
                                                                                                     holder):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Contested", "first\n", actor="alex")
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        editing = await open_editor(pilot, app, page.id)
        editing.editor.text = "mine\n"
        with open_kb(home) as kb:
            kb.save_page(page.id, "theirs\n", base_revision=1, actor="sam")
        lock = holder(home.log_file)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen.id == "save-note", what="the note prompt")
        await pilot.press("enter")
        await wait_until(pilot, lambda: editing.saving, what="the save to start")
        await pilot.press("f1")
        await wait_screen(pilot, "HelpScreen")
        lock.release()
        await wait_until(pilot, lambda: editing.conflict is not None, what="the refusal")
        assert screen_name(app) == "HelpScreen"          # nothing pushed over help
        await pilot.press("escape")
        await wait_screen(pilot, "ConflictScreen")
        await pilot.press("escape")
        await wait_screen(pilot, "EditScreen")
        assert app.screen is editing and editing.editor.text == "mine\n"
    assert app.return_code in (None, 0)


async def _leave_while_it_waits(pilot, app, home, holder, start, *, leave_to: str, said: str) -> None:
    """Start a write (`start`) while another process holds the log's lock, leave the screen, release the lock:
    the answer is said by the app and the screen below stays."""
    lock = holder(home.log_file)
    await start()
    await pilot.press("escape")
    await wait_screen(pilot, leave_to)
    below = app.screen
    lock.release()
    await wait_until(pilot, lambda: any(said in n.message for n in app._notifications), what=f"{said!r} to be said")
    assert app.screen is below


async def test_a_comment_that_lands_after_its_page_was_left_is_said_and_pops_nothing(tmp_path, holder):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Discussed", "text\n", actor="alex")
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_page(page.id)
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: app.screen.view is not None)

        async def comment() -> None:
            await pilot.press("c")
            await wait_until(pilot, lambda: screen_name(app) == "InputModal", what="the comment prompt")
            await pilot.press(*"late words", "enter")
            await wait_screen(pilot, "PageScreen")

        await _leave_while_it_waits(pilot, app, home, holder, comment, leave_to="SpacesScreen",
                                    said="comment added on ENG/Discussed")
    assert app.return_code in (None, 0)


async def test_a_rename_that_lands_while_help_covers_the_page_shows_once_help_closes(tmp_path, holder):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Old Name", "text\n", actor="alex")
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_page(page.id)
        await wait_screen(pilot, "PageScreen")
        shown = app.screen
        await wait_until(pilot, lambda: shown.view is not None)
        lock = holder(home.log_file)
        await pilot.press("r")
        await wait_until(pilot, lambda: screen_name(app) == "InputModal", what="the rename prompt")
        app.screen.query_one("Input").value = "New Name"
        await pilot.press("enter")
        await wait_screen(pilot, "PageScreen")
        await pilot.press("question_mark")
        await wait_screen(pilot, "HelpScreen")
        lock.release()
        await wait_until(pilot, lambda: any("ENG/New Name: done" in n.message for n in app._notifications),
                         what="the rename's answer")
        await pilot.press("escape")
        await wait_screen(pilot, "PageScreen")
        assert app.screen is shown
        await wait_until(pilot, lambda: shown.page is not None and shown.page.title == "New Name",
                         what="the page to show its new name")
    assert app.return_code in (None, 0)


async def test_a_restore_that_lands_after_the_trash_was_left_is_said_and_pops_nothing(tmp_path, holder):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Binned", "text\n", actor="alex")
        kb.trash_page(page.id, actor="alex")
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.show("trash")
        await wait_screen(pilot, "TrashScreen")
        await wait_until(pilot, lambda: app.screen.pages, what="the trash to list the page")

        async def restore() -> None:
            await pilot.press("u")

        await _leave_while_it_waits(pilot, app, home, holder, restore, leave_to="SpacesScreen",
                                    said="restored ENG/Binned")
    assert app.return_code in (None, 0)


async def test_a_rename_that_lands_after_the_outline_was_left_is_said_and_pops_nothing(tmp_path, holder):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        kb.create_page("ENG", "Outlined", "text\n", actor="alex")
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_outline("ENG")
        await wait_screen(pilot, "OutlineScreen")
        outline = app.screen
        await wait_until(pilot, lambda: outline.page_tree.highlighted_page is not None, what="the outline's rows")

        async def rename() -> None:
            await pilot.press("r")
            await wait_until(pilot, lambda: screen_name(app) == "InputModal", what="the rename prompt")
            app.screen.query_one("Input").value = "Renamed Later"
            await pilot.press("enter")
            await wait_screen(pilot, "OutlineScreen")

        await _leave_while_it_waits(pilot, app, home, holder, rename, leave_to="SpacesScreen",
                                    said="renamed to ENG/Renamed Later")
    assert app.return_code in (None, 0)


async def test_a_save_waiting_for_the_lock_says_who_holds_it(tmp_path, holder, monkeypatch):
    from core.log import filelog

    monkeypatch.setattr(filelog, "LOCK_NOTICE_S", 0.05)
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Waiting", "first\n", actor="alex")
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        editing = await open_editor(pilot, app, page.id)
        editing.editor.text = "second\n"
        lock = holder(home.log_file)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen.id == "save-note", what="the note prompt")
        await pilot.press("enter")
        await wait_until(pilot, lambda: any("waiting for the lock" in n.message and f"pid {lock.proc.pid}" in n.message
                                            for n in app._notifications), what="the wait to be said")
        lock.release()
        await wait_screen(pilot, "PageScreen")
    assert revision(home, page.id) == 2
