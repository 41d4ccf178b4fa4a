"""What a new user trips on in the app (issue 21), driven by Pilot: a home that is a file, the footer on a
trashed page, toasts that cover nothing being read, and search that says how it runs. Each test failed
before its fix. (Every screen at 80x24 and 120x36 is tests/test_app_small_terminal.py.)"""
from __future__ import annotations

from crewlet_tui.screens.search import Searched
from test_app_support import (SIZE, app_for, new_home, open_kb, rendered_text, screen_name, wait_rendered,
                              wait_screen, wait_until)


def footer_keys(app) -> dict[str, str]:
    """The keys the footer shows now: key display → description (disabled ones included, marked)."""
    from textual.widgets._footer import FooterKey

    return {k.key_display: k.description + (" (disabled)" if k.has_class("-disabled") else "")
            for k in app.screen.query(FooterKey)}


# -- a home that is a file ---------------------------------------------------------------------------

async def test_a_home_that_is_a_file_is_told_and_nothing_offers_to_create_it(tmp_path):
    f = tmp_path / "a-file"
    f.write_text("x")
    app = app_for(f)
    said: list[str] = []
    exit_ = app.exit
    app.exit = lambda *a, **k: (said.append(str(k.get("message"))), exit_(*a, **k))[1]  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: not app.is_running, what="the app to exit")
        assert screen_name(app) != "WelcomeScreen"
    assert app.return_code == 1
    told = " ".join(said)
    assert f"{f} is a file, not a crewlet home" in told and "Errno" not in told
    assert f.read_text() == "x"


# -- the footer on a trashed page ------------------------------------------------------------------------

async def test_a_trashed_page_offers_restore_and_not_edit_or_trash(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Rollback", "Roll back first.\n", actor="alex")
        kb.trash_page(page.id, actor="alex")
    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_page(page.id)
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: app.screen.page is not None)
        await wait_until(pilot, lambda: "Restore" in footer_keys(app).values(), what="u Restore in the footer")
        keys = footer_keys(app)
        assert keys.get("u") == "Restore" and "Edit" not in keys.values() and "Trash" not in keys.values()
        assert "u restores it" in rendered_text(app)              # the banner names a key the footer shows
        await pilot.press("e")                                    # not offered, and not done
        await pilot.pause(0.2)
        assert screen_name(app) == "PageScreen"
        await pilot.press("u")
        await wait_until(pilot, lambda: app.screen.page is not None and not app.screen.page.trashed_at,
                         what="the page restored")
        await wait_until(pilot, lambda: "Edit" in footer_keys(app).values(), what="e Edit back in the footer")
        assert "Restore" not in footer_keys(app).values() and footer_keys(app).get("d") == "Trash"
    with open_kb(home) as kb:
        assert kb.resolve(page.id).trashed_at is None


# -- toasts ----------------------------------------------------------------------------------------------

async def test_a_toast_covers_neither_the_status_line_nor_what_is_being_read(tmp_path):
    from textual.widgets._toast import Toast

    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Deploy Runbook", "How a change reaches production.\n" * 30, actor="alex")
    app = app_for(home)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:   # run_test leaves toasts off unless asked
        await wait_screen(pilot, "SpacesScreen")
        app.open_page(page.id)
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: app.screen.page is not None)
        app.screen.notify("saved revision 2")
        await wait_until(pilot, lambda: app.screen.query(Toast) and app.screen.query_one(Toast).region.area,
                         what="the toast shown")
        toast = app.screen.query_one(Toast).region
        title = app.screen.query_one("TitleBar")
        status = app.screen.query_one("StatusLine").region
        body = app.screen.query_one("#page-main").region
        assert not toast.overlaps(status), (toast, status)
        assert not toast.overlaps(body), (toast, body)            # one line: on the title bar, over nothing
        assert toast.y == title.region.y and toast.height == 1, toast
        assert toast.x >= len(str(title.render())), (toast, str(title.render()))


# -- search as you type ---------------------------------------------------------------------------------------

class GatedSearcher:
    """The real searcher, except that a search for `held` waits until the test opens the gate: a slow
    search still running when the person types on."""

    def __init__(self, node, held: str) -> None:
        import threading

        from core.search.native import NativeSearcher

        self.inner, self.held = NativeSearcher(node), held
        self.gate, self.started = threading.Event(), threading.Event()
        self.asked: list[str] = []

    def search(self, query):
        self.asked.append(query.text)
        if query.text == self.held:
            self.started.set()
            assert self.gate.wait(60), "the test never opened the gate"
        return self.inner.search(query)

    def close(self) -> None:
        self.inner.close()


async def test_search_runs_as_you_type_and_a_newer_search_cancels_the_older(tmp_path):
    from test_app_support import build_index

    home = new_home(tmp_path)
    with open_kb(home) as kb:
        kb.create_page("ENG", "Deploy Runbook", "How to deploy the service.\n", actor="alex")
        kb.create_page("ENG", "Rollback", "Roll back a bad release.\n", actor="alex")
    build_index(home)
    made: list[GatedSearcher] = []
    app = app_for(home, searcher_factory=lambda node: made.append(GatedSearcher(node, "deploy")) or made[-1])
    shown: list[str] = []   # the words of each answer that reached the screen (its Searched message)

    def answered(message: object) -> None:
        if isinstance(message, Searched):
            shown.append(message.query.text)

    async with app.run_test(size=SIZE, message_hook=answered) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        await pilot.press("slash")
        await wait_screen(pilot, "SearchScreen")
        screen = app.screen
        assert "as you type" in screen.query_one("#search-input").placeholder
        await pilot.press(*"deploy")                   # no Enter: the search runs when the typing pauses
        await wait_until(pilot, lambda: made and made[0].started.is_set(), what="the search for 'deploy' running")
        await pilot.press(*["backspace"] * 6, *"rollback")
        await wait_until(pilot, lambda: "rollback" in made[0].asked, what="the search for 'rollback' asked")
        # (a busy machine may also search a prefix of it, typed slower than the pause that runs a search)
        await wait_until(pilot, lambda: shown and shown[-1] == "rollback", what="the answer for 'rollback' shown")
        made[0].gate.set()                              # the older search finishes now: its answer is dropped
        await pilot.pause(0.3)
        assert "deploy" not in shown and shown[-1] == "rollback" and screen.last_text == "rollback"
        assert [h.title for h in screen.last.hits] == ["Rollback"]
        assert "Rollback" in rendered_text(app)
