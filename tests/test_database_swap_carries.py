"""A home's database replaced by another file (core/store/replace.py) carries this node's own rows — without losing
one — and a repair's rebuild, which replaces it, carries what an adoption carries and refuses while another process
has the home open (review follow-ups to issue 34).

Reproductions:
- two databases carried into one (a swap finished after an open made a database where the old one had been):
  each file numbers its diary notes from 1, and `INSERT OR IGNORE` by that number dropped the second file's note 1;
- a repair's rebuild carried only the diaries: the embedding duty's holds went (every refused page offered to the
  provider again), unlike an adoption, which carries them;
- a repair's rebuild swapped the database under the app: the app went on writing into the file kept aside."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import new_home
from test_adopt_killed import PROC_ENV
from test_log_repair import _flip_seq, cli, ok

from core import config as config_mod
from core.agents.diary import Diary
from core.node import Node
from core.pages.service import KnowledgeBase
from core.paths import Home
from core.store import connect
from core.store import replace as replace_db
from core.store.digest import CARRIED_LOCAL, STALE_AFTER_REBUILD


def _company() -> dict:
    data = config_mod.example_config()
    data["providers"] = {"embeddings": {"provider": "none"}}       # notes kept without a vector
    return data


def _notes(db: Path) -> list[tuple[str, str]]:
    conn = connect(db, readonly=True)
    try:
        return sorted((r[0], r[1]) for r in conn.execute("SELECT agent, text FROM agent_diary"))
    finally:
        conn.close()


def test_two_databases_carried_into_one_keep_every_diary_note_whatever_their_numbers(tmp_path):
    home = new_home(tmp_path / "home", _company())
    with Node.open(home) as node:
        for i in range(3):
            Diary(node).remember(f"fact {i} kept before the swap", actor="eng-bot")
    before = _notes(home.db_file)
    db = home.db_file
    # a swap written down, the old database moved aside, and then a database made where it had been (an open that
    # did not finish the swap) holding a note of its own — numbered 1, like the old file's first note
    incoming = db.with_name(db.name + ".rebuilding")
    connect(incoming).close()
    aside = db.with_name(db.name + ".before-test")
    replace_db.write_note(replace_db.note_path(db), {"incoming": incoming.name, "aside": aside.name,
                                                     "carry": ["agent_diary"]})
    replace_db._move_with_sides(db, aside)
    made = connect(db)
    made.execute("INSERT INTO agent_diary (agent, text, created_at) VALUES ('ops-bot', 'written after', 1)")
    assert made.execute("SELECT id FROM agent_diary").fetchone()[0] == 1
    made.close()
    with Node.open(Home(home.root)) as node:            # finishes the swap: both files carried into the new one
        assert node.conn.execute("SELECT count(*) FROM agent_diary").fetchone()[0] == 4
    assert _notes(db) == sorted([*before, ("ops-bot", "written after")])
    # finishing again (a kill after the carry, before the note went) carries nothing twice
    assert replace_db.carry_rows(aside, db, ["agent_diary"]) == {"agent_diary": 0}
    assert len(_notes(db)) == 4
    with Node.open(Home(home.root)) as node:
        counts = dict(node.conn.execute("SELECT agent, notes FROM agent_diary_versions").fetchall())
    assert counts == {"eng-bot": 3, "ops-bot": 1}


def _needs_rebuild(tmp_path: Path) -> Home:
    """A home whose database holds a record the log lost and no database can give back (a first repair kept the
    database as it was): the second repair rebuilds it. Its own rows: diaries, an embedding hold, a cached answer."""
    home = new_home(tmp_path / "home", _company())
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        alpha = kb.create_page("ENG", "Alpha", "alpha body", actor="alex")
        kb.save_page(alpha.id, "alpha v2", base_revision=1, actor="alex")
        kb.create_page("ENG", "Beta", "", actor="alex")
        Diary(node).remember("a fact only this node keeps", actor="eng-bot")
        node.conn.execute("INSERT INTO embed_holds VALUES ('p1', 1, 'fp', 1, 2, 10, 'refused by the provider')")
        node.conn.execute("INSERT INTO answer_cache VALUES ('k1', 1, 0, '{}', 1, 1)")
        create_seq = node.conn.execute("SELECT seq FROM applied_ops WHERE type = 'page.create' AND result LIKE ?",
                                       (f"%{alpha.id}%",)).fetchone()[0]
        node.conn.execute("DELETE FROM revisions WHERE page_id = ? AND revision = 1", (alpha.id,))
    _flip_seq(home.log_file, create_seq)
    first = cli(home.root, "log", "repair", "--yes")
    assert first.exit_code == 1 and "this database is kept as it is" in first.stdout
    return Home(home.root)


def test_a_repair_rebuild_carries_every_node_local_table_an_adoption_does_but_stale_answers(tmp_path):
    assert set(CARRIED_LOCAL) - set(STALE_AFTER_REBUILD) >= {"agent_diary", "embed_holds"}
    home = _needs_rebuild(tmp_path)
    out = ok(cli(home.root, "log", "repair", "--yes", "--json"))
    assert '"rebuilt": true' in out
    with Node.open(home) as node:
        assert [tuple(r) for r in node.conn.execute("SELECT agent, text FROM agent_diary")] == [
            ("eng-bot", "a fact only this node keeps")]
        assert [tuple(r) for r in node.conn.execute("SELECT source_id, reason FROM embed_holds")] == [
            ("p1", "refused by the provider")]
        # kept at positions the rebuilt database stands at without the lost page: started over, not served stale
        assert node.conn.execute("SELECT count(*) FROM answer_cache").fetchone()[0] == 0


HOLD_OPEN = ("import sqlite3, sys\n"
             "conn = sqlite3.connect(sys.argv[1])\n"
             "conn.execute('SELECT count(*) FROM pages').fetchone()\n"
             "print('open', flush=True)\n"
             "sys.stdin.readline()\n")


def test_a_repair_rebuild_is_refused_while_another_process_has_the_home_open(tmp_path):
    home = _needs_rebuild(tmp_path)
    log_before, db_before = home.log_file.read_bytes(), home.db_file.read_bytes()
    holder = subprocess.Popen([sys.executable, "-c", HOLD_OPEN, str(home.db_file)], env=PROC_ENV,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        res = cli(home.root, "log", "repair", "--yes")
        assert res.exit_code == 1
        [line] = res.stderr.strip().splitlines()
        assert f"process {holder.pid}" in line and "has" in line and "open" in line and "nothing was changed" in line
    finally:
        holder.stdin.write("done\n")
        holder.stdin.flush()
        holder.wait(60)
    assert home.log_file.read_bytes() == log_before and home.db_file.read_bytes() == db_before
    assert '"rebuilt": true' in ok(cli(home.root, "log", "repair", "--yes", "--json"))


def test_a_repair_rebuild_is_refused_while_the_app_runs_on_the_home_naming_it(tmp_path):
    from core.leases import Lease

    home = _needs_rebuild(tmp_path)
    lease = Lease(home.node_lease_dir, "keyword-index", "someone", "crewlet app (pid 1)")
    lease.acquire()
    res = cli(home.root, "log", "repair", "--yes")
    assert res.exit_code == 1 and res.stderr.count("\n") == 1
    assert "crewlet app (pid 1) has" in res.stderr and "quit the app" in res.stderr
    lease.release()
    assert '"rebuilt": true' in ok(cli(home.root, "log", "repair", "--yes", "--json"))


@pytest.mark.parametrize("table", sorted(STALE_AFTER_REBUILD))
def test_what_a_rebuild_starts_over_is_a_node_local_table_and_says_why(table):
    assert table in CARRIED_LOCAL and len(STALE_AFTER_REBUILD[table]) > 40


def test_an_adoption_is_refused_while_another_process_has_the_database_open(tmp_path):
    """`sync adopt` swaps the database too: a process holding it (here a script; `crewlet mcp` alike) is named, as
    the app and a worker are by their leases. Before, only leases were asked: the swap went on under it."""
    a = new_home(tmp_path / "A", _company())
    shared = tmp_path / "shared"
    ok(cli(a.root, "sync", "join", str(shared)))
    ok(cli(tmp_path / "B", "sync", "join", str(shared)))
    b = Home(tmp_path / "B")
    snap = tmp_path / "a.snapshot"
    ok(cli(a.root, "sync", "snapshot", str(snap)))
    holder = subprocess.Popen([sys.executable, "-c", HOLD_OPEN, str(b.db_file)], env=PROC_ENV,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        res = cli(b.root, "sync", "adopt", str(snap), "--yes")
        assert res.exit_code == 1 and f"process {holder.pid}" in res.stderr and res.stderr.count("\n") == 1
    finally:
        holder.stdin.write("done\n")
        holder.stdin.flush()
        holder.wait(60)
    ok(cli(b.root, "sync", "adopt", str(snap), "--yes"))
