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
