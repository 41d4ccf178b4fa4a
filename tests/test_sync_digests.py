"""Nodes that applied the same records hold the same content — and say so when they do not (issue 19, part 6).

Reproduction: a hand-edited but valid snapshot was adopted silently and its divergence never flagged. Now
every node publishes its content digest with the positions it stands for (`crewlet sync status`, and the
apply duty once caught up); `sync status` names the nodes that disagree at the same positions; and adopting
checks a snapshot's digest against what it says it was taken as, and against any node that published a
digest at the snapshot's very position."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import new_home
from typer.testing import CliRunner

from core.config import load_node
from core.paths import Home
from crewlet_tui.cli import app

ENV = {"CREWLET_HOME": None, "CREWLET_AS": None, "COLUMNS": "250"}


def cli(root: Path, *args: str):
    return CliRunner().invoke(app, ["--home", str(root), *args], env=ENV)


def ok(res) -> str:
    assert res.exit_code == 0, (res.stdout, res.stderr)
    return res.stdout


@pytest.fixture
def fleet(tmp_path):
    a = new_home(tmp_path / "A")
    shared = tmp_path / "shared"
    ok(cli(a.root, "sync", "join", str(shared)))
    ok(cli(tmp_path / "B", "sync", "join", str(shared), "--operator", "sam"))
    ok(cli(a.root, "page", "create", "ENG", "Shared Page"))
    ok(cli(tmp_path / "B", "spaces"))                                   # B applies it
    return Home(a.root), Home(tmp_path / "B"), shared


def tamper(db: Path, *, digest_too: bool = False) -> None:
    conn = sqlite3.connect(db)
    conn.execute("UPDATE pages SET body = 'changed by hand' WHERE title = 'Shared Page'")
    if digest_too:
        conn.execute("UPDATE crewlet_snapshot SET value = 'f' || substr(value, 2) WHERE key = 'content_digest'")
    conn.commit()
    conn.close()


def node_id(home: Home) -> str:
    return load_node(home.node_file).node_id


def test_sync_status_names_the_nodes_whose_content_disagrees_at_the_same_position(fleet):
    a, b, shared = fleet
    out = json.loads(ok(cli(a.root, "sync", "status", "--json")))
    assert out["digests_disagree"] == []
    out = json.loads(ok(cli(b.root, "sync", "status", "--json")))
    assert out["digests_disagree"] == [] and out["digests_agree"] == 1
    tamper(b.db_file)                                       # B's rows changed behind the log's back
    res = cli(b.root, "sync", "status", "--json")           # B says its (new) digest at the same position
    [d] = json.loads(res.stdout)["digests_disagree"]
    assert set(d["digests"]) == {node_id(a), node_id(b)}
    res = cli(a.root, "sync", "status")
    assert res.exit_code == 0 and "disagree" in res.stdout and node_id(b) in res.stdout and node_id(a) in res.stdout
    assert "disagree" in res.stderr


def test_adopt_refuses_a_snapshot_changed_after_it_was_taken(fleet, tmp_path):
    a, b, shared = fleet
    snap = tmp_path / "snap.db"
    ok(cli(a.root, "sync", "snapshot", str(snap)))
    tamper(snap)
    res = cli(b.root, "sync", "adopt", str(snap), "--yes")
    assert res.exit_code == 1 and "changed after it was taken" in res.stderr


def test_adopt_refuses_a_snapshot_whose_content_is_not_what_a_node_at_its_position_holds(fleet, tmp_path):
    """A careful hand edit that rewrites the stored digest too: the peers' published digests still tell."""
    a, b, shared = fleet
    ok(cli(a.root, "sync", "status"))                        # A publishes its digest at this position
    snap = tmp_path / "snap.db"
    ok(cli(a.root, "sync", "snapshot", str(snap)))
    conn = sqlite3.connect(snap)
    conn.execute("UPDATE pages SET body = 'changed by hand' WHERE title = 'Shared Page'")
    conn.commit()
    conn.close()
    from core.store import connect
    from core.store.digest import content_digest

    c = connect(snap, migrate_schema=False)
    forged = content_digest(c).content
    c.execute("UPDATE crewlet_snapshot SET value = ? WHERE key = 'content_digest'", (forged,))
    c.close()
    res = cli(b.root, "sync", "adopt", str(snap), "--yes")
    assert res.exit_code == 1 and "does not hold what the log made" in res.stderr and node_id(a) in res.stderr


def test_a_sound_snapshot_is_adopted_and_the_nodes_agree(fleet, tmp_path):
    a, b, shared = fleet
    ok(cli(a.root, "sync", "status"))
    snap = tmp_path / "snap.db"
    ok(cli(a.root, "sync", "snapshot", str(snap)))
    ok(cli(b.root, "sync", "adopt", str(snap), "--yes"))
    out = json.loads(ok(cli(b.root, "sync", "status", "--json")))
    assert out["digests_disagree"] == [] and out["digests_agree"] >= 1


# -- the digest off the node's lock, computed once (review finding 8) --------------------------------------------
# The content digest reads every replicated row: seconds on a home of 14k pages. It was computed on the node's
# connection under the node's lock, so while the apply duty published it (inside the app, the worker) every read
# of the app waited (a get_page: 0.3 ms alone, 7,280 ms then); and `sync status --digest` computed it twice.


def test_a_digest_is_computed_without_the_node_s_lock(fleet):
    import threading
    import time

    from core.node import Node
    from core.store.digest import content_digest

    a, _b, _shared = fleet
    with Node.open(a, sync_containers=False) as node:
        done: list[dict] = []
        with node.lock:      # another thread of the app is reading a page: the digest must not wait for it
            worker = threading.Thread(target=lambda: done.append(node.publish_digest(force=True)), daemon=True)
            worker.start()
            deadline = time.monotonic() + 60
            while not done:
                assert time.monotonic() < deadline, "the digest waited for the node's lock"
                worker.join(0.01)
        published = done[0]
        assert published["content"] == content_digest(node.conn).content
        assert published["positions"] == {name: seq for name, (seq, _end) in node.positions().items()}


def test_sync_status_digest_reads_the_rows_once(fleet, monkeypatch):
    """`sync status --digest` published the digest and then computed it again to print it."""
    from core.store import digest as digest_mod

    a, _b, _shared = fleet
    calls = []
    real = digest_mod._digest_rows

    def counting(conn, sql):
        calls.append(sql)
        return real(conn, sql)

    monkeypatch.setattr(digest_mod, "_digest_rows", counting)
    out = json.loads(ok(cli(a.root, "sync", "status", "--digest", "--json")))
    pages_reads = [sql for sql in calls if sql == digest_mod.REPLICATED["pages"]]
    assert len(pages_reads) == 1, f"the pages table was read {len(pages_reads)} times for one digest"
    assert out["digest"]["content"] and out["digest"]["tables"]["pages"]


def forge(snap: Path) -> None:
    """A careful hand edit: a body changed, and the digest the snapshot says it was taken as recomputed."""
    tamper(snap)
    from core.store import connect
    from core.store.digest import content_digest

    c = connect(snap, migrate_schema=False)
    try:
        c.execute("UPDATE crewlet_snapshot SET value = ? WHERE key = 'content_digest'", (content_digest(c).content,))
    finally:
        c.close()


def test_a_forged_snapshot_is_refused_on_a_single_home_whose_database_stands_at_its_position(tmp_path):
    """Issue 34: with no peers to ask, the forged snapshot replaced a database at the same position holding the
    true content. The home's own database is a digest it knows at that position."""
    home = new_home(tmp_path / "single")
    ok(cli(home.root, "page", "create", "ENG", "Shared Page"))
    snap = tmp_path / "snap.db"
    ok(cli(home.root, "sync", "snapshot", str(snap)))
    forge(snap)
    before = home.db_file.read_bytes()
    res = cli(home.root, "sync", "adopt", str(snap), "--yes")
    assert res.exit_code == 1, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not hold what the log made" in lines[0] and "this node's database" in lines[0]
    assert home.db_file.read_bytes() == before and not list(home.root.glob("crewlet.db.before-adopt-*"))
    assert "Shared Page" in ok(cli(home.root, "page", "show", "ENG/shared page"))
    # the true snapshot at the same position is adopted; a forged one the database has moved past is not asked
    # about (that position's digest is no longer known here)
    true = tmp_path / "true.db"
    ok(cli(home.root, "sync", "snapshot", str(true)))
    ok(cli(home.root, "sync", "adopt", str(true), "--yes"))


def test_a_forged_snapshot_is_refused_by_the_node_s_own_database_on_a_shared_directory(fleet, tmp_path):
    """No node published a digest (nobody ran `sync status`): B's own database, at the same position, refuses it."""
    a, b, shared = fleet
    snap = tmp_path / "snap.db"
    ok(cli(a.root, "sync", "snapshot", str(snap)))
    forge(snap)
    res = cli(b.root, "sync", "adopt", str(snap), "--yes")
    assert res.exit_code == 1 and "does not hold what the log made" in res.stderr, (res.stdout, res.stderr)
