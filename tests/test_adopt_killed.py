"""`crewlet sync adopt` killed at every step (issue 34): a real `crewlet` process is SIGKILLed before each file
operation of the database swap in turn, and the next open of the home must find every agent's diary and every
other node-local row it held — the swap finished (or never begun), never a fresh database made where the adopted
one belongs. Reproduction: killed after the old database was moved aside, the next command made an empty database
and replayed the log into it with exit 0; the diaries were only in `crewlet.db.before-adopt-*`."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT, new_home
from typer.testing import CliRunner

from core import config as config_mod
from core.agents.diary import Diary
from core.node import Node
from core.paths import Home
from core.store import connect
from core.store.replace import note_path
from core.sync.snapshot import NODE_LOCAL_TABLES, REBUILT_NODE_LOCAL, carried_tables
from crewlet_tui.cli import app

ENV = {"CREWLET_HOME": None, "CREWLET_AS": None, "COLUMNS": "200"}
PROC_ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
PROC_ENV.pop("CREWLET_HOME", None)
PROC_ENV.pop("CREWLET_AS", None)

# Runs the real `crewlet` entry point, counting every file operation (rename, unlink, fsync, copy, tree removal)
# made inside TARGET (module:function — the database swap: a snapshot installed, a repair's rebuild), plus one step
# once it returns, and SIGKILLs itself before step KILL_AT. The steps counted are written to STEPS_FILE when the
# run is not killed.
KILLING_CLI = textwrap.dedent("""
    import importlib, os, shutil, signal, sys
    kill_at, steps_file, target, *argv = sys.argv[1:]
    kill_at = int(kill_at)
    from crewlet_tui.cli import main
    module_name, attr = target.split(":")
    module = importlib.import_module(module_name)

    seen, inside = [0], [False]

    def step():
        if inside[0]:
            seen[0] += 1
            if seen[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

    def counted(fn):
        def run(*args, **kwargs):
            step()
            return fn(*args, **kwargs)
        return run

    for name in ("replace", "rename", "unlink", "fsync", "link"):
        setattr(os, name, counted(getattr(os, name)))
    shutil.rmtree, shutil.copyfile = counted(shutil.rmtree), counted(shutil.copyfile)
    swapping = getattr(module, attr)

    def counting(*args, **kwargs):
        inside[0] = True
        try:
            return swapping(*args, **kwargs)
        finally:
            step()              # the swap done, what follows it not done yet
            inside[0] = False

    setattr(module, attr, counting)
    sys.argv = ["crewlet", *argv]
    try:
        main()
    finally:
        with open(steps_file, "w") as fh:
            fh.write(str(seen[0]))
""")


def cli(root: Path, *args: str):
    return CliRunner().invoke(app, ["--home", str(root), *args], env=ENV)


def ok(res) -> str:
    assert res.exit_code == 0, (res.stdout, res.stderr)
    return res.stdout


def node_local_rows(db: Path) -> dict[str, list[tuple]]:
    conn = connect(db, readonly=True)
    try:
        return {t: sorted(tuple(r) for r in conn.execute(f"SELECT * FROM {t}")) for t in carried_tables()}
    finally:
        conn.close()


def diary_counts(db: Path) -> dict[str, int]:
    conn = connect(db, readonly=True)
    try:
        return dict(conn.execute("SELECT agent, notes FROM agent_diary_versions WHERE notes > 0").fetchall())
    finally:
        conn.close()


@pytest.fixture
def fleet(tmp_path):
    """Node A and node B of one shared directory; B holds diaries of two agents, an embedding hold and a cached
    answer — rows on no log — and A has written a page B's snapshot-to-be has not."""
    data = config_mod.example_config()
    data["actors"]["ops-bot"] = {"kind": "agent", "space": "OPS"}
    data["providers"] = {"embeddings": {"provider": "none"}}
    a = new_home(tmp_path / "A", data)
    shared = tmp_path / "shared"
    ok(cli(a.root, "sync", "join", str(shared)))
    ok(cli(tmp_path / "B", "sync", "join", str(shared), "--operator", "sam"))
    b = Home(tmp_path / "B")
    with Node.open(b) as node:
        for i in range(3):
            Diary(node).remember(f"eng-bot keeps fact {i} on node B", actor="eng-bot")
        Diary(node).remember("ops-bot keeps this on node B", actor="ops-bot")
        gone = Diary(node).remember("a note forgotten before the adoption", actor="ops-bot").note
        Diary(node).forget(gone.id, actor="ops-bot")
        node.conn.execute("INSERT INTO embed_holds VALUES ('p1', 1, 'fp', 1, 2, 10, 'refused by the provider')")
        node.conn.execute("INSERT INTO answer_cache VALUES ('k1', 1, 0, '{}', 1, 1)")
    ok(cli(a.root, "page", "create", "ENG", "Written Before The Snapshot"))
    snap = tmp_path / "a.snapshot"
    ok(cli(a.root, "sync", "snapshot", str(snap)))
    return a, b, snap


def test_every_node_local_table_is_carried_or_derived_again():
    """The list adoption carries is the snapshot's list of node-local tables, less the ones rebuilt from rows:
    a table added to the list is carried unless it is named as rebuilt."""
    assert set(carried_tables()) | set(REBUILT_NODE_LOCAL) == set(NODE_LOCAL_TABLES)
    assert {"agent_diary", "embed_holds", "answer_cache"} <= set(carried_tables())


@pytest.mark.timeout(600)
def test_adopt_killed_at_each_step_keeps_every_diary_and_node_local_row(fleet, tmp_path):
    a, b, snap = fleet
    before = node_local_rows(b.db_file)
    counts = diary_counts(b.db_file)
    assert len(before["agent_diary"]) == 4 and before["embed_holds"] and before["answer_cache"]
    template = tmp_path / "B.template"
    shutil.copytree(b.root, template)
    steps_file = tmp_path / "steps"
    argv = ["--home", str(b.root), "sync", "adopt", str(snap), "--yes"]
    kill_at, killed = 1, 0
    while True:
        steps_file.unlink(missing_ok=True)
        proc = subprocess.run([sys.executable, "-c", KILLING_CLI, str(kill_at), str(steps_file),
                               "core.sync.snapshot:install", *argv], env=PROC_ENV,
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != -signal.SIGKILL:
            assert proc.returncode == 0, proc.stderr
            steps = int(steps_file.read_text())
            assert steps == kill_at - 1, (steps, kill_at)    # every step was a kill point
            break
        killed += 1
        # the next command on the home: it finishes the swap (or finds it never begun) before anything else
        res = cli(b.root, "page", "show", "ENG/written before the snapshot")
        assert res.exit_code == 0, (kill_at, res.stdout, res.stderr)
        assert not note_path(b.db_file).exists(), kill_at
        assert node_local_rows(b.db_file) == before, kill_at
        assert diary_counts(b.db_file) == counts, kill_at
        with Node.open(b) as node:
            assert Diary(node).notes("eng-bot", actor="alex").total == 3, kill_at
        asides = sorted(p.name for p in b.root.glob("crewlet.db.before-adopt-*") if not p.name.endswith(("-wal", "-shm")))
        assert len(asides) <= 1, (kill_at, asides)
        # and adopting again goes through with the rows it carries
        out = json.loads(ok(cli(b.root, "sync", "adopt", str(snap), "--yes", "--json")))
        assert out["database_kept_as"]
        assert node_local_rows(b.db_file) == before and diary_counts(b.db_file) == counts, kill_at
        assert not (b.root / "crewlet.db.adopting").exists()
        shutil.rmtree(b.root)
        shutil.copytree(template, b.root)
        kill_at += 1
    assert killed >= 8, killed      # the copy, the index, the note, the renames, the carry, the note removed
    assert node_local_rows(b.db_file) == before and diary_counts(b.db_file) == counts


@pytest.mark.timeout(600)
def test_a_repair_rebuilding_the_database_killed_at_each_step_keeps_the_diaries(tmp_path):
    """The same swap when `crewlet log repair` rebuilds a node's database from the repaired log (node B applied a
    record the shared log then lost): killed at each step, the next open finds B's diary."""
    from test_log_repair import HEADER_SIZE, flip, middle_page_create

    from core.pages.service import KnowledgeBase

    data = config_mod.example_config()
    data["providers"] = {"embeddings": {"provider": "none"}}
    a = new_home(tmp_path / "A", data)
    shared = tmp_path / "shared"
    ok(cli(a.root, "sync", "join", str(shared)))
    ok(cli(tmp_path / "B", "sync", "join", str(shared), "--operator", "sam"))
    b = Home(tmp_path / "B")
    with Node.open(b) as node:
        for i in range(3):
            Diary(node).remember(f"the repair keeps note {i}", actor="eng-bot")
        for i in range(12):
            KnowledgeBase(node).create_page("ENG", f"From B {i}", f"written on B, {i}\n")
    peer_file = next(p for p in (shared / "nodes").glob("*.json") if json.loads(p.read_text())["home"] == str(b.root))
    peer_file.write_text(json.dumps(json.loads(peer_file.read_text()) | {"host": "another-machine"}))
    start, _, _ = middle_page_create(shared / "pages.log")
    flip(shared / "pages.log", start + HEADER_SIZE + 40)
    ok(cli(a.root, "log", "repair", "--yes"))
    notes = sorted(tuple(r) for r in node_local_rows(b.db_file)["agent_diary"])
    assert len(notes) == 3
    template = tmp_path / "B.template"
    shutil.copytree(b.root, template)
    steps_file = tmp_path / "steps"
    kill_at = killed = 0
    while True:
        kill_at += 1
        steps_file.unlink(missing_ok=True)
        proc = subprocess.run([sys.executable, "-c", KILLING_CLI, str(kill_at), str(steps_file), "core.repair:_rebuild",
                               "--home", str(b.root), "log", "repair", "--yes"], env=PROC_ENV,
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != -signal.SIGKILL:
            assert proc.returncode == 0, proc.stderr
            assert int(steps_file.read_text()) == kill_at - 1
            break
        killed += 1
        res = cli(b.root, "pages", "ENG")          # the next command finishes the swap, or finds it never began
        assert res.exit_code == 0 or "damaged" in res.stderr, (kill_at, res.stderr)
        assert not note_path(b.db_file).exists(), kill_at
        assert sorted(tuple(r) for r in node_local_rows(b.db_file)["agent_diary"]) == notes, kill_at
        out = json.loads(ok(cli(b.root, "log", "repair", "--yes", "--json")))   # and the repair goes through
        assert sorted(tuple(r) for r in node_local_rows(b.db_file)["agent_diary"]) == notes, (kill_at, out)
        shutil.rmtree(b.root)
        shutil.copytree(template, b.root)
    assert killed >= 6, killed
    assert sorted(tuple(r) for r in node_local_rows(b.db_file)["agent_diary"]) == notes


def test_a_home_that_joins_a_shared_directory_starting_its_database_over_keeps_its_diaries(tmp_path):
    """The third command that starts a database over: a fresh home joining a shared directory replays the shared
    log into a new file, through the same swap, and its agents' notes come along."""
    data = config_mod.example_config()
    data["providers"] = {"embeddings": {"provider": "none"}}
    a = new_home(tmp_path / "A", data)
    shared = tmp_path / "shared"
    ok(cli(a.root, "sync", "join", str(shared)))
    ok(cli(a.root, "page", "create", "ENG", "On The Shared Log"))
    c = new_home(tmp_path / "C", data)
    with Node.open(c) as node:
        kept = [Diary(node).remember(f"C's agent keeps fact {i}", actor="eng-bot").note for i in range(2)]
    out = json.loads(ok(cli(c.root, "sync", "join", str(shared), "--json")))
    assert out["joined"] == "joined" and any("crewlet.db.before-join" in k for k in out["kept_aside"])
    with Node.open(Home(c.root)) as node:
        assert [(n.id, n.text) for n in Diary(node).notes("eng-bot", actor="alex").notes] == \
            [(n.id, n.text) for n in reversed(kept)]
        assert node.conn.execute("SELECT count(*) FROM pages WHERE title = 'On The Shared Log'").fetchone()[0] == 1
    assert not note_path(c.db_file).exists() and not list(c.root.glob("crewlet.db.joining*"))
