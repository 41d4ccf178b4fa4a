"""`crewlet page revert REF REVISION` and the history screen's `r` (core/bank/page_revert.py) on real homes: a plain
save reverted; a generated page's refresh reverted (its earlier sections come back, by the body's digest, with a real
chat server on 127.0.0.1 as the model); a consolidation's accepted save reverted through `page revert` puts its
entries back STANDING, and reverting that revert folds them in again; a revert that would jump over a consolidation
refused; the one-line refusals (no such revision, the current one, a trashed page); and the app's history screen."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from chat_server import ChatServer
from conftest import config_with, new_home
from test_app_support import app_for, wait_rendered, wait_screen, wait_until
from test_generated_pages import HOUR_MS, T0, Setup, _built, _edits, _iso, _pass
from textual.widgets import DataTable, Static
from typer.testing import CliRunner

from core.bank.consolidation import Consolidation
from core.bank.entries import EntryBank
from core.bank.page_revert import revert_page
from core.errors import NotFound, Refused
from core.node import Node
from core.pages.entry_model import CONSOLIDATED, STANDING
from core.paths import Home
from crewlet_tui.cli import app as cli_app

OLD = "# Caching\n\nThe session cache sits in front of the database."
NEW = OLD + "\n\nIt holds an entry for ten minutes, keyed by the tenant id."


def _cli(home: Home):
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(cli_app, ["--home", str(home.root), *args],
                             env={"CREWLET_HOME": None, "CREWLET_AS": None, "COLUMNS": "200"})
    return run


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert text and "\n" not in text
    return text


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return new_home(tmp_path / "home")


def test_a_plain_save_is_reverted_as_a_new_revision_and_the_refusals_are_one_line(home):
    with Node.open(home) as node, EntryBank(node) as bank:
        kb = bank.kb
        page = kb.create_page("ENG", "Runbook", "one\n", actor="alex").id
        kb.save_page(page, "two\n", base_revision=1, actor="alex")
        kb.save_page(page, "three\n", base_revision=2, actor="sam")
        done = revert_page(bank, "ENG/Runbook", 1, actor="alex")
        assert (done.via, done.reverted_to, done.revision) == ("save", 1, 4)
        now = kb.get_page(page, actor="alex", record_read=False)
        assert (now.body, now.revision) == ("one\n", 4)
        top = kb.history(page)[0]
        assert (top.revision, top.kind, top.message, top.author) == (4, "save", "revert to revision 1", "alex")
        assert kb.revision(page, 3).body == "three\n"          # nothing of the history lost

        with pytest.raises(NotFound) as exc:
            revert_page(bank, page, 9, actor="alex")
        assert "no revision 9" in _one_line(exc)
        with pytest.raises(NotFound) as exc:
            revert_page(bank, page, 0, actor="alex")
        assert "no revision 0" in _one_line(exc)
        with pytest.raises(Refused) as exc:
            revert_page(bank, page, 4, actor="alex")
        assert "current revision" in _one_line(exc)
        with pytest.raises(Refused) as exc:
            revert_page(bank, page, 1, actor="alex")            # revision 1's body is the page's now
        assert "already" in _one_line(exc)
        with pytest.raises(Refused) as exc:                     # saved since the writer last looked: stale
            revert_page(bank, page, 2, actor="alex", base_revision=3)
        assert "at revision 4, not 3" in _one_line(exc) and exc.value.code == "stale_revision"
        kb.trash_page(page, actor="alex")
        seq = node.applied_seq()
        with pytest.raises(Refused) as exc:
            revert_page(bank, page, 2, actor="alex")
        assert "trash" in _one_line(exc)
        assert node.applied_seq() == seq                       # refused before anything was appended
        kb.restore_page(page, actor="alex")

    run = _cli(home)
    ok = run("page", "revert", "ENG/Runbook", "3", "--json")
    assert ok.exit_code == 0, ok.output
    data = json.loads(ok.stdout)
    assert (data["via"], data["reverted_to"], data["revision"]) == ("save", 3, 5)
    said = run("page", "revert", "ENG/Runbook", "2")
    assert said.exit_code == 0 and "reverted to revision 2" in said.stdout
    stale = run("page", "revert", "ENG/Runbook", "1", "--base-rev", "5")
    assert stale.exit_code == 1 and "saved since" in stale.stderr and len(stale.stderr.strip().splitlines()) == 1
    for args in (("ENG/Runbook", "99"), ("ENG/Runbook", "8"), ("ENG/Nothing", "1")):
        refused = run("page", "revert", *args)
        assert refused.exit_code == 1 and len(refused.stderr.strip().splitlines()) == 1, (args, refused.output)
    assert run("page", "revert", "ENG/Runbook", "two").exit_code == 2


@pytest.fixture
def chat():
    with ChatServer() as server:
        yield server


def test_a_generated_page_s_refresh_reverted_brings_its_earlier_sections_back(tmp_path, chat, monkeypatch):
    config = config_with(providers={"llm": {"base_url": chat.url, "model": "page-model", "timeout_s": 20}})
    with Node.open(new_home(tmp_path / "home", config)) as node:
        s = Setup(node)
        _built(node, chat, s, monkeypatch)
        built, built_body = s.stored(), s.row()["body"]
        with EntryBank(node) as bank:
            bank.edit(s.e[1], body="A deploy takes about twenty minutes.", actor="alex")
        monkeypatch.setenv("CREWLET_NOW", _iso(T0 + 7 * HOUR_MS))
        chat.script = [_edits({"op": "replace", "section": built[1]["id"], "text": "Twenty minutes.",
                               "entries": [s.e[1]]})]
        _pass(node)
        assert s.row()["revision"] == 3 and s.stored() != built
        with EntryBank(node) as bank:
            done = revert_page(bank, s.page, 2, actor="alex")
        assert done.via == "save" and s.row()["revision"] == 4 and s.row()["body"] == built_body
        assert s.stored() == built                      # the sections of the body brought back, by its digest
        assert s.kb.history(s.page)[0].message == "revert to revision 2"


def test_a_consolidation_reverted_through_page_revert_stands_its_entries_again_and_folds_them_back(home):
    with Node.open(home) as node, EntryBank(node) as bank:
        page = bank.kb.create_page("ENG", "Caching", OLD, actor="alex").id
        ids = [bank.add(page, body, actor="alex", distinct=True).id for body in (
            "The session cache holds an entry for ten minutes.", "Session cache keys carry the tenant id.")]
        assert [bank.show(i).status for i in ids] == [STANDING] * 2
        prop = Consolidation(bank).consolidate_now(page, NEW, ids, actor="alex")
        assert (prop.state, prop.applied_revision) == ("ACCEPTED", 2)
        assert [bank.show(i).status for i in ids] == [CONSOLIDATED] * 2

    run = _cli(home)
    agent = run("--as", "eng-bot", "page", "revert", "ENG/Caching", "1")     # a consolidation's revert: a person's
    assert agent.exit_code == 1 and "person's" in agent.stderr and len(agent.stderr.strip().splitlines()) == 1
    back = run("page", "revert", "ENG/Caching", "1", "--json")
    assert back.exit_code == 0, back.output
    data = json.loads(back.stdout)
    assert (data["via"], data["proposal_id"], sorted(data["standing"]), data["revision"]) == (
        "revert", prop.id, sorted(ids), 3)
    with Node.open(home) as node, EntryBank(node) as bank:
        assert bank.kb.get_page(page, actor="alex", record_read=False).body == OLD
        assert [bank.show(i).status for i in ids] == [STANDING] * 2          # in use beside the page again
        assert Consolidation(bank).show(prop.id).state == "REVERTED"
        assert bank.kb.history(page)[0].kind == "revert"

    again = run("page", "revert", "ENG/Caching", "2")                    # the revert reverted: folded again
    assert again.exit_code == 0 and "folded in again" in again.stdout, again.output
    with Node.open(home) as node, EntryBank(node) as bank:
        assert bank.kb.get_page(page, actor="alex", record_read=False).body == NEW
        assert [bank.show(i).status for i in ids] == [CONSOLIDATED] * 2
        assert Consolidation(bank).show(prop.id).state == "ACCEPTED"

        # a plain save since the consolidation: reverting to before it would leave its entries folded away
        bank.kb.save_page(page, NEW + "\n\nMore.", base_revision=4, actor="alex")
        seq = node.applied_seq()
        with pytest.raises(Refused) as exc:
            revert_page(bank, page, 1, actor="alex")
        assert "consolidation" in _one_line(exc) and node.applied_seq() == seq
        assert [bank.show(i).status for i in ids] == [CONSOLIDATED] * 2
        revert_page(bank, page, 4, actor="alex")                         # a plain revert after it is a save
        assert bank.kb.get_page(page, actor="alex", record_read=False).revision == 6


def test_a_consolidated_body_is_not_brought_back_beside_its_standing_entries(home):
    with Node.open(home) as node, EntryBank(node) as bank:
        page = bank.kb.create_page("ENG", "Caching", OLD, actor="alex").id
        ids = [bank.add(page, "The session cache holds an entry for ten minutes.", actor="alex", distinct=True).id]
        c = Consolidation(bank)
        prop = c.consolidate_now(page, NEW, ids, actor="alex")          # revision 2
        c.decide(prop.id, "revert", actor="alex")                       # revision 3: OLD, the entry STANDING
        bank.kb.save_page(page, OLD + "\n\nEdited.", base_revision=3, actor="alex")     # revision 4
        with pytest.raises(Refused) as exc:
            revert_page(bank, page, 2, actor="alex")                    # NEW, beside its standing entry: twice
        assert "twice" in _one_line(exc)
        assert bank.show(ids[0]).status == STANDING


async def test_the_history_screen_reverts_the_picked_revision_once_asked(home):
    with Node.open(home) as node, EntryBank(node) as bank:
        page = bank.kb.create_page("ENG", "Runbook", "one\n", actor="alex").id
        bank.kb.save_page(page, "two\n", base_revision=1, actor="alex")

    app = app_for(home)
    async with app.run_test(size=(140, 44)) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_page(page)
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: app.screen.view is not None)
        await pilot.press("y")
        await wait_screen(pilot, "HistoryScreen")
        screen = app.screen
        table = screen.query_one("#history-table", DataTable)
        await wait_until(pilot, lambda: table.row_count == 2)
        await wait_rendered(pilot, "Revert")     # the key, in the footer
        await pilot.press("r")          # the current revision: nothing to revert, said
        await wait_until(pilot, lambda: any("current one" in str(n.message) for n in app._notifications))
        await pilot.press("j")
        await wait_until(pilot, lambda: screen.current == 1)
        await pilot.press("r")
        await wait_screen(pilot, "ConfirmModal")
        await pilot.press("escape")     # not asked twice: cancelled, nothing written
        await wait_screen(pilot, "HistoryScreen")
        await pilot.press("r")
        await wait_screen(pilot, "ConfirmModal")
        await pilot.press("y")
        await wait_screen(pilot, "HistoryScreen")
        said = screen.query_one("#revert-said", Static)
        await wait_until(pilot, lambda: "Reverted to revision 1: saved as revision 3" in str(said.render()))
        await wait_until(pilot, lambda: table.row_count == 3)
        await pilot.press("G")          # revision 1 again: its body is the page's now, refused in one line, said
        await wait_until(pilot, lambda: screen.current == 1)
        await pilot.press("r")
        await wait_screen(pilot, "ConfirmModal")
        await pilot.press("y")
        await wait_until(pilot, lambda: any("already" in str(n.message) for n in app._notifications),
                         what="the refusal")
        screen.kb.save_page(page, "three\n", base_revision=3, actor="sam")    # saved elsewhere, unseen here
        await pilot.press("k")
        await wait_until(pilot, lambda: screen.current == 2)
        await pilot.press("r")
        await wait_screen(pilot, "ConfirmModal")
        await pilot.press("y")
        await wait_until(pilot, lambda: any("saved since" in str(n.message) for n in app._notifications),
                         what="the stale refusal")
        assert screen.kb.get_page(page, actor="alex", record_read=False).body == "three\n"   # sam's save stands
        await pilot.press("escape")     # the page beneath shows the page as it is now
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: app.screen.view is not None and app.screen.view.page.revision == 4)
        assert app.screen.view.page.body == "three\n"
    with Node.open(home) as node:
        row = node.conn.execute("SELECT body, revision FROM pages WHERE id = ?", (page,)).fetchone()
        assert (row["body"], row["revision"]) == ("three\n", 4)
        assert node.conn.execute("SELECT message FROM revisions WHERE page_id = ? AND revision = 3",
                                 (page,)).fetchone()[0] == "revert to revision 1"
