"""History (revisions, bodies, coloured diffs), search (its outcome states), the trash (restore, purge
for admins only), the help screen, and the background indexer's status line."""
from __future__ import annotations

import threading

from rich.text import Text
from textual.command import CommandList
from textual.widgets import DataTable, OptionList, Static

from core.search.native import NativeSearcher
from core.search.seam import NOT_SEARCHABLE_YET, Query
from crewlet_tui.screens.search import APP_INDEX_STATE
from crewlet_tui.widgets.status import IndexState

from test_app_support import (SIZE, app_for, build_index, new_home, open_kb, screen_name, wait_rendered,
                              wait_screen, wait_until)


def _cells(table: DataTable, row: int) -> list[str]:
    return [c.plain if isinstance(c, Text) else str(c) for c in table.get_row_at(row)]


async def test_history_lists_revisions_and_shows_bodies_and_coloured_diffs(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        page = kb.create_page("ENG", "Runbook", "one\ntwo\n", actor="alex", message="first")
        kb.save_page(page.id, "one\n2\nthree\n", base_revision=1, actor="sam", message="numbers")
        kb.rename_page(page.id, "Run book", actor="alex")

    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_page(page.id)
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: app.screen.view is not None)
        await pilot.press("y")
        await wait_screen(pilot, "HistoryScreen")
        screen = app.screen
        table = screen.query_one("#history-table", DataTable)
        await wait_until(pilot, lambda: table.row_count == 3)
        rows = [_cells(table, i) for i in range(3)]
        assert [r[0] for r in rows] == ["3", "2", "1"]
        assert [r[1] for r in rows] == ["rename", "save", "create"]
        assert [r[2] for r in rows] == ["alex", "sam", "alex"]
        assert [r[4] for r in rows] == ["—", "numbers", "first"]
        assert all("ago" in r[3] for r in rows)

        await pilot.press("j")  # revision 2: what that save changed, coloured
        detail = screen.query_one("#detail-text", Static)
        await wait_until(pilot, lambda: "+2" in str(detail.render()))
        diff = detail.render()
        lines = str(diff).splitlines()
        assert "-two" in lines and "+2" in lines and "+three" in lines
        colours = {str(s.style) for s in diff.spans}
        assert {"ansi_green", "ansi_red"} <= colours or {"green", "red"} <= colours

        await pilot.press("b")  # the body of revision 2
        await wait_until(pilot, lambda: str(detail.render()) == "one\n2\nthree\n")
        await pilot.press("j")  # revision 1's body
        await wait_until(pilot, lambda: str(detail.render()) == "one\ntwo\n")
        await pilot.press("b", "g")  # the rename's change: its title
        await wait_until(pilot, lambda: "title: 'Runbook' → 'Run book'" in str(detail.render()))


async def test_search_says_not_searchable_yet_then_nothing_matched_then_hits(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        kb.create_page("ENG", "Deploy Runbook", "How to deploy the service to production.\n", actor="alex")
        kb.create_page("ENG", "Rollback", "Roll back a bad deploy.\n", actor="alex")

    app = app_for(home, start_search="deploy")
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SearchScreen")
        screen = app.screen
        outcome = screen.query_one("#search-outcome", Static)
        results = screen.query_one("#search-results", OptionList)
        await wait_until(pilot, lambda: screen.last is not None)
        assert str(outcome.render()).startswith("Not searchable yet")
        assert "ask a colleague" in str(outcome.render())
        assert not results.display and results.option_count == 0
        assert "searching this copy" in str(screen.query_one("#search-copy", Static).render())

        build_index(home)  # the first build finishes (the app's own indexer is off in this test)
        screen.last = None
        screen.run_search("zyzzyva")
        await wait_until(pilot, lambda: screen.last is not None)
        shown = str(outcome.render())
        assert shown.startswith("Nothing matched") and "ranked by words" in shown
        assert "2 pages indexed, up to date" in str(screen.query_one("#search-copy", Static).render())

        screen.last = None
        screen.run_search("deploy")
        await wait_until(pilot, lambda: screen.last is not None and screen.last.hits)
        shown = str(outcome.render())
        assert results.display and shown.startswith("2 results")
        assert "ranked by words (by words and meaning was asked)" in shown and "no page has a vector" in shown
        assert "no_embeddings" not in shown and "degraded" not in shown      # words, never internal codes
        first = str(results.get_option_at_index(0).prompt)
        assert "ENG" in first

        # the mode switch: semantic ("Meaning") cannot be served here, and the screen says so
        assert "Meaning" in str(screen.query_one("#mode-semantic").label)
        await pilot.press("f2", "f2")
        await wait_until(pilot, lambda: screen.mode == "semantic" and screen.last is not None
                         and screen.last.outcome.served_mode is None)
        assert str(outcome.render()).startswith("Nothing searched")
        assert "searching by meaning was asked" in str(outcome.render())
        await pilot.press("f2")
        await wait_until(pilot, lambda: screen.mode == "hybrid" and screen.last.hits)

        # opening a result opens the page
        results.focus()
        results.highlighted = 0
        await pilot.press("enter")
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: app.screen.page is not None)
        assert app.screen.page.container == "ENG"


HANG_GUARD_S = 600.0    # a wait's bound that only stops a hang: the tests wait for events, not for the clock


async def test_background_indexer_makes_search_work_and_shows_progress(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        kb.create_page("ENG", "Deploy Runbook", "deploy carefully\n", actor="alex")
    app = app_for(home, start_indexer=True, start_search="deploy")
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SearchScreen", timeout=HANG_GUARD_S)
        screen = app.screen
        # whether the first search ran before the first build or after, the screen ends on the hit. Each wait
        # is for the event (the build reported, the search answered); its bound only keeps a broken build from
        # hanging the suite, and is no timing: a busy machine may take minutes to load the model beside it
        await wait_until(pilot, lambda: screen.last is not None and screen.last.hits, timeout=HANG_GUARD_S)
        await wait_until(pilot, lambda: app.index_state.phase == "current", timeout=HANG_GUARD_S)
        await wait_rendered(pilot, "index up to date", timeout=HANG_GUARD_S)
        assert app.index_passes >= 1

        # a write in the app wakes the indexer at once (not after the 30 s interval)
        with open_kb(home) as kb:
            kb.create_page("ENG", "Canary", "canary deploys first\n", actor="alex")
        passes = app.index_passes
        app.poke_indexer()
        await wait_until(pilot, lambda: app.index_passes > passes, timeout=HANG_GUARD_S)
        screen.last = None
        screen.run_search("canary")
        await wait_until(pilot, lambda: screen.last is not None and screen.last.hits, timeout=HANG_GUARD_S)


class LateSearcher:
    """The real searcher, whose first answer was decided before the first index build (taken when the
    app opened the home, before its indexer ran) and is delivered only once the test releases it —
    after the app has heard the index turn current: the order a busy machine can produce."""

    def __init__(self, node, text: str) -> None:
        self.inner = NativeSearcher(node)
        self.early = self.inner.search(Query(text))
        assert self.early.outcome.degraded == NOT_SEARCHABLE_YET
        self.release = threading.Event()
        self.calls = 0

    def search(self, query):
        self.calls += 1
        if self.calls == 1:
            assert self.release.wait(60), "the test never released the late answer"
            return self.early
        return self.inner.search(query)

    def close(self) -> None:
        self.inner.close()


async def test_a_not_searchable_answer_arriving_after_the_index_turned_current_is_asked_again(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        kb.create_page("ENG", "Deploy Runbook", "deploy carefully\n", actor="alex")
    searchers: list[LateSearcher] = []

    def factory(node):
        searchers.append(LateSearcher(node, "deploy"))
        return searchers[-1]

    # no periodic pass (the interval is an hour): only the fix can ask again, not a later index pass
    app = app_for(home, start_indexer=True, start_search="deploy", searcher_factory=factory, index_interval=3600)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SearchScreen")
        screen = app.screen
        await wait_until(pilot, lambda: getattr(app, APP_INDEX_STATE).phase == "current", timeout=30)
        await wait_until(pilot, lambda: searchers[0].calls == 1)
        assert screen.last is None                                # the first answer is still on its way
        passes = app.index_passes
        searchers[0].release.set()
        await wait_until(pilot, lambda: screen.last is not None and screen.last.hits, timeout=30,
                         what="the search asked again once the late 'not searchable yet' arrived")
        assert searchers[0].calls == 2 and app.index_passes == passes
        assert "Deploy Runbook" in str(screen.query_one("#search-results", OptionList).get_option_at_index(0).prompt)


async def test_a_not_searchable_answer_already_shown_is_asked_again_when_the_index_turns_current(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        kb.create_page("ENG", "Deploy Runbook", "deploy carefully\n", actor="alex")
    app = app_for(home, start_search="deploy")   # the app's own indexer off: the test plays its part
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SearchScreen")
        screen = app.screen
        await wait_until(pilot, lambda: screen.last is not None)
        assert screen.last.outcome.degraded == NOT_SEARCHABLE_YET
        build_index(home)
        setattr(app, APP_INDEX_STATE, IndexState("indexing", 1, 2))   # progress alone asks nothing again
        await pilot.pause(0.05)
        assert screen.last.outcome.degraded == NOT_SEARCHABLE_YET
        setattr(app, APP_INDEX_STATE, IndexState("current", 1, 1, 1, 1))
        await wait_until(pilot, lambda: screen.last.hits, timeout=30)


async def test_command_palette_searches(tmp_path):
    home = new_home(tmp_path)
    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        await pilot.press("ctrl+p")
        await wait_screen(pilot, "CommandPalette")
        await pilot.press(*"rollback")
        commands = app.screen.query_one(CommandList)
        # the palette gathers hits in the background: press enter once the search hit is the one highlighted
        await wait_until(pilot, lambda: commands.highlighted == 0
                         and "rollback" in str(commands.get_option_at_index(0).prompt), what="the palette's hit")
        await pilot.press("enter")
        await wait_screen(pilot, "SearchScreen")
        await wait_until(pilot, lambda: app.screen.last is not None)
        assert app.screen.last_text == "rollback"


async def test_trash_restores_and_only_an_admin_purges(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        keep = kb.create_page("ENG", "Keep me", "k", actor="sam")
        drop = kb.create_page("ENG", "Drop me", "d", actor="sam")
        kb.trash_page(keep.id, actor="sam")
        kb.trash_page(drop.id, actor="sam")

    # sam is no admin: the purge key is neither shown nor allowed
    app = app_for(home, "sam")
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        await pilot.press("t")
        await wait_screen(pilot, "TrashScreen")
        screen = app.screen
        table = screen.query_one("#trash-table", DataTable)
        await wait_until(pilot, lambda: table.row_count == 2)
        rows = [_cells(table, i) for i in range(2)]
        assert {r[0] for r in rows} == {"ENG/Keep me", "ENG/Drop me"} and {r[1] for r in rows} == {"sam"}
        assert not any(b.binding.action == "purge" and b.enabled for b in screen.active_bindings.values())
        assert "Purge" not in await wait_rendered(pilot, "Restore", "Refresh")   # the footer, drawn: no purge in it
        await pilot.press("P")
        await pilot.pause(0.1)
        assert screen_name(app) == "TrashScreen"  # no confirm: nothing to purge with

        table.move_cursor(row=next(i for i, r in enumerate(rows) if r[0] == "ENG/Keep me"))
        await pilot.press("u")
        await wait_until(pilot, lambda: table.row_count == 1)
    with open_kb(home) as kb:
        assert kb.resolve(keep.id).trashed_at is None

    # alex is: purge asks first, then purges
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.show("trash")
        await wait_screen(pilot, "TrashScreen")
        screen = app.screen
        table = screen.query_one("#trash-table", DataTable)
        await wait_until(pilot, lambda: table.row_count == 1)
        assert any(b.binding.action == "purge" and b.enabled for b in screen.active_bindings.values())
        await wait_rendered(pilot, "Purge (admin)")
        await pilot.press("P")
        await wait_until(pilot, lambda: app.screen.id == "confirm-purge")
        await pilot.press("escape")  # changed my mind
        await wait_screen(pilot, "TrashScreen")
        assert table.row_count == 1
        await pilot.press("P")
        await wait_until(pilot, lambda: app.screen.id == "confirm-purge")
        await pilot.press("y")
        await wait_until(pilot, lambda: screen_name(app) == "TrashScreen" and table.row_count == 0)
    with open_kb(home) as kb:
        assert kb.trash() == []


async def test_help_screen_lists_the_keys_of_the_screen_you_came_from(tmp_path):
    home = new_home(tmp_path)
    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_outline("ENG")
        await wait_screen(pilot, "OutlineScreen")
        await pilot.press("question_mark")
        await wait_screen(pilot, "HelpScreen")
        await wait_rendered(pilot, "Outline  (this screen)", "new page / new folder")
        await pilot.press("escape")
        await wait_screen(pilot, "OutlineScreen")
        # the footer shows the screen's keys with their descriptions
        await wait_rendered(pilot, "New", "Folder", "Rename", "Move", "Trash", "Search", "Help")
