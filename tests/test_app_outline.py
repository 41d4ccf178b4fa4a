"""The app's spaces screen and outline: counts, undeclared containers apart, lazy levels, windows of 500."""
from __future__ import annotations

import threading

from rich.text import Text
from textual.widgets import DataTable

from core import config as config_mod
from test_app_support import (SIZE, app_for, bulk_pages, new_home, open_kb, screen_name, wait_screen,
                              wait_until)


def _plain(cell: object) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


async def test_spaces_lists_declared_spaces_with_counts_and_undeclared_apart(tmp_path):
    data = config_mod.example_config()
    data["spaces"]["OPS"] = {"name": "Operations", "purpose": "Keeps the lights on"}
    home = new_home(tmp_path, config=data)
    with open_kb(home) as kb:
        kb.create_page("ENG", "Deploy Runbook", "# Deploy\n", actor="alex")
        kb.create_page("ENG", "Rollback", "# Rollback\n", actor="alex")
        kb.create_page("OPS", "Pager", "on call\n", actor="alex")
    del data["spaces"]["OPS"]  # OPS still holds a page, but no space declares it any more
    config_mod.write(home.config_file, data)

    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        await wait_until(pilot, lambda: app.screen.query_one("#spaces-table", DataTable).row_count > 0)
        table = app.screen.query_one("#spaces-table", DataTable)
        rows = {_plain(table.get_row_at(i)[0]).split()[0]: [_plain(c) for c in table.get_row_at(i)]
                for i in range(table.row_count)}
        assert rows["ENG"][1] == "Engineering" and rows["ENG"][3] == "2"
        assert "OPS" not in rows
        other = app.screen.query_one("#undeclared-table", DataTable)
        assert other.display and other.row_count == 1
        assert [_plain(c) for c in other.get_row_at(0)] == ["OPS", "1"]

        await pilot.press("g", "enter")  # ENG is first
        await wait_screen(pilot, "OutlineScreen")
        assert app.screen.container == "ENG"


async def test_outline_reads_each_level_when_it_opens(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        runbook = kb.create_page("ENG", "Deploy Runbook", "# Deploy\n", actor="alex")
        kb.create_page("ENG", "Rollback", "# Rollback\n", actor="alex", parent=runbook.id)
        kb.create_page("ENG", "Canary", "# Canary\n", actor="alex", parent=runbook.id)
        lonely = kb.create_page("ENG", "Archive", "", actor="alex")  # a folder whose one child is trashed
        gone = kb.create_page("ENG", "Old notes", "x", actor="alex", parent=lonely.id)
        kb.trash_page(gone.id, actor="alex")
        kb.create_page("ENG", "Zeta", "leaf", actor="alex")

    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_outline("ENG")
        await wait_screen(pilot, "OutlineScreen")
        tree = app.screen.page_tree
        await wait_until(pilot, lambda: tree.first_window_shown)
        top = tree.level_nodes()
        labels = [n.label.plain for n in top]
        assert labels == ["▣ Archive", "≡ Deploy Runbook  (2)", "≡ Zeta"]
        archive, runbook_row, zeta = top
        # child counts come from the listing: a folder whose only child is trashed offers no expander
        assert archive.data.page.is_folder and archive.data.page.child_count == 0
        assert not archive.allow_expand and not zeta.allow_expand
        assert runbook_row.allow_expand and not runbook_row.children  # nothing read until it opens

        # opening a row shows "loading…" while its level is read, then the level
        gate = threading.Event()
        real = tree.kb.list_pages

        def slow_list_pages(*args, **kwargs):
            gate.wait(30)  # released by the test once it has seen "loading…", however slow the machine
            return real(*args, **kwargs)

        tree.kb = type("SlowKB", (), {"list_pages": staticmethod(slow_list_pages)})()
        await pilot.press("j")  # onto Deploy Runbook
        assert tree.cursor_node is runbook_row
        await pilot.press("l")
        await wait_until(pilot, lambda: [c.data.kind for c in runbook_row.children] == ["loading"])
        assert runbook_row.children[0].label.plain == "loading…"
        gate.set()
        await wait_until(pilot, lambda: [c.label.plain for c in runbook_row.children] == ["≡ Canary", "≡ Rollback"])
        tree.kb = type("KB", (), {"list_pages": staticmethod(real)})()

        # vim keys: l moves into an open level, h back out and closes, G/g ends
        await pilot.press("l")
        assert tree.cursor_node.label.plain == "≡ Canary"
        await pilot.press("h")
        assert tree.cursor_node is runbook_row
        await pilot.press("h")
        assert not runbook_row.is_expanded
        await pilot.press("G")
        assert tree.cursor_node is zeta
        await pilot.press("g")
        assert tree.cursor_node is archive
        await pilot.press("k", "j", "j")
        assert tree.cursor_node is zeta
        await pilot.press("enter")
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: app.screen.page is not None and app.screen.page.title == "Zeta")


async def test_outline_windows_of_500_with_more(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        bulk_pages(kb, "PROD", 1020)

    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_outline("PROD")
        await wait_screen(pilot, "OutlineScreen")
        tree = app.screen.page_tree
        await wait_until(pilot, lambda: tree.first_window_shown)
        rows = tree.level_nodes()
        assert len(rows) == 501 and rows[-1].data.kind == "more"
        assert "500 of 1,020 pages shown" in rows[-1].label.plain
        assert rows[0].label.plain == "≡ Page 00000" and rows[499].label.plain == "≡ Page 00499"

        await pilot.press("G", "enter")  # the "more…" row reads the next window from the cursor
        await wait_until(pilot, lambda: len(tree.level_nodes()) == 1001 and tree.level_nodes()[-1].data.kind == "more")
        assert tree.level_nodes()[500].label.plain == "≡ Page 00500"
        assert "1,000 of 1,020" in tree.level_nodes()[-1].label.plain
        await pilot.press("G", "enter")
        await wait_until(pilot, lambda: len(tree.level_nodes()) == 1020)
        assert tree.level_nodes()[-1].label.plain == "≡ Page 01019"
        assert all(n.data.kind == "page" for n in tree.level_nodes())


async def test_outline_creates_a_folder_renames_moves_and_trashes(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        kb.create_page("ENG", "Alpha", "alpha", actor="alex")
        kb.create_page("ENG", "Beta", "beta", actor="alex")

    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_outline("ENG")
        await wait_screen(pilot, "OutlineScreen")
        tree = app.screen.page_tree
        await wait_until(pilot, lambda: tree.first_window_shown)

        # a new folder at the top (the highlighted page is offered as parent; untick it)
        await pilot.press("f")
        await wait_until(pilot, lambda: app.screen.id == "new-page")
        await pilot.press(*"Guides")
        app.screen.query_one("#under").value = False
        await pilot.press("enter")
        await wait_screen(pilot, "OutlineScreen")
        await wait_until(pilot, lambda: [n.label.plain for n in tree.level_nodes()] == ["≡ Alpha", "≡ Beta", "▣ Guides"])

        # rename Alpha
        await pilot.press("g", "r")
        await wait_until(pilot, lambda: app.screen.id == "ask")
        app.screen.query_one("Input").value = "Alpha Guide"
        await pilot.press("enter")
        await wait_until(pilot, lambda: "≡ Alpha Guide" in [n.label.plain for n in tree.level_nodes()])

        # move Alpha Guide under Guides, picked from the space's outline
        tree.move_cursor(tree.level_nodes()[0])
        await pilot.press("m")
        await wait_until(pilot, lambda: app.screen.id == "move-page")
        picker = app.screen.query_one("#move-tree")
        await wait_until(pilot, lambda: picker.first_window_shown)
        assert [n.label.plain for n in picker.level_nodes()][0].startswith("⤒ the top of ENG")
        assert "≡ Alpha Guide" not in [n.label.plain for n in picker.level_nodes()]  # never under itself
        picker.move_cursor(next(n for n in picker.level_nodes() if n.label.plain == "▣ Guides"))
        await pilot.press("enter")
        await wait_screen(pilot, "OutlineScreen")
        await wait_until(pilot, lambda: [n.label.plain for n in tree.level_nodes()] == ["≡ Beta", "▣ Guides  (1)"])
        with open_kb(home) as kb:
            moved = kb.resolve("ENG/Alpha Guide")
            assert moved.parent_id == kb.resolve("ENG/Guides").id

        # trash Beta (asks first)
        tree.move_cursor(tree.level_nodes()[0])
        await pilot.press("d")
        await wait_until(pilot, lambda: app.screen.id == "confirm")
        await pilot.press("y")
        await wait_until(pilot, lambda: [n.label.plain for n in tree.level_nodes()] == ["▣ Guides  (1)"])
        assert screen_name(app) == "OutlineScreen"


async def test_a_reload_keeps_open_rows_open_and_the_cursor_on_its_page(tmp_path):
    home = new_home(tmp_path)
    with open_kb(home) as kb:
        runbook = kb.create_page("ENG", "Deploy Runbook", "# Deploy\n", actor="alex")
        rollback = kb.create_page("ENG", "Rollback", "# Rollback\n", actor="alex", parent=runbook.id)
        kb.create_page("ENG", "Canary", "# Canary\n", actor="alex", parent=rollback.id)
        kb.create_page("ENG", "Zeta", "leaf", actor="alex")

    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_outline("ENG")
        await wait_screen(pilot, "OutlineScreen")
        tree = app.screen.page_tree
        await wait_until(pilot, lambda: tree.first_window_shown)
        runbook_row = next(n for n in tree.level_nodes() if n.data.page.id == runbook.id)
        runbook_row.expand()
        await wait_until(pilot, lambda: any(c.data.kind == "page" for c in runbook_row.children))
        rollback_row = next(c for c in runbook_row.children if c.data.kind == "page")
        rollback_row.expand()
        await wait_until(pilot, lambda: any(c.data.kind == "page" for c in rollback_row.children))
        tree.move_cursor(rollback_row)
        await pilot.pause()

        with open_kb(home) as kb:  # somebody adds a page: the outline reloads
            kb.create_page("ENG", "Alpha", "first", actor="alex")
        tree.reload()

        def restored() -> bool:
            rows = {n.data.page.id: n for n in tree._walk(tree.root) if n.data and n.data.kind == "page"}
            return (runbook.id in rows and rows[runbook.id].is_expanded and rollback.id in rows
                    and rows[rollback.id].is_expanded and tree.highlighted_page is not None
                    and tree.highlighted_page.id == rollback.id)

        await wait_until(pilot, restored, what="the open rows reopened and the cursor back on Rollback")
        assert [n.label.plain for n in tree.level_nodes()][0] == "≡ Alpha"
