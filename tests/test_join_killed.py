"""`crewlet sync join` killed at every step (issue 34): a real `crewlet` process is SIGKILLed before each file
operation of the join in turn, and the next command on the home must find it either as it was before the join or
joined — never a home that refuses to open or lost what it held (its pages, its agents' diaries and other node-local
rows, company.toml, its log) — and a second `sync join` must go through.

Reproductions, before the join was written down first (`Home.join_note`, finished or undone by the next open):
- the first node killed after pages.log was copied into the directory but before company.toml: the home was as
  before, but the directory held a log and no company.toml, and every later join of it was refused;
- a fresh home joining a directory that holds a log, killed after node.toml named the directory but before its
  database was started over: the next open held the home's old positions against the shared log (the shared
  pages never arrived; a second join, "already" a node, failed on the damage it found);
- a new node killed after node.toml before its snapshot was installed: the node came up without the snapshot and a
  second join with it was refused ("already a node");
- a home whose log is a prefix of the directory's, killed after node.toml: its own log/ and company.toml stayed
  beside a home that no longer reads them, and no later command removed them;
- the first node's switch onto JetStream killed after the database's positions became stream positions but before
  company.toml said so: the next write said "the log is damaged past record 6" — false damage, writes refused.
"""
from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import new_home
from test_adopt_killed import KILLING_CLI, PROC_ENV, cli, diary_counts, node_local_rows, ok

from core import config as config_mod
from core.agents.diary import Diary
from core.log import FileLog
from core.node import Node
from core.paths import Home
from core.store.replace import note_path


JOIN_NOTE = "node.toml.joining"   # Home.join_note (named here so the test runs against a build without it)


def company() -> dict:
    data = config_mod.example_config()
    data["actors"]["ops-bot"] = {"kind": "agent", "space": "OPS"}
    data["providers"] = {"embeddings": {"provider": "none"}}
    return data


def with_own_rows(home: Home) -> None:
    """Diaries of two agents, an embedding hold and a cached answer: rows on no log, this node's alone."""
    with Node.open(home) as node:
        for i in range(3):
            Diary(node).remember(f"eng-bot keeps fact {i}", actor="eng-bot")
        Diary(node).remember("ops-bot keeps this", actor="ops-bot")
        node.conn.execute("INSERT INTO embed_holds VALUES ('p1', 1, 'fp', 1, 2, 10, 'refused by the provider')")
        node.conn.execute("INSERT INTO answer_cache VALUES ('k1', 1, 0, '{}', 1, 1)")


def last_seq(path: Path) -> int:
    with FileLog(path, readonly=True) as flog:
        return flog.scan().last_seq


def killed_runs(target: str, argv: list[str], steps_file: Path, reset, check) -> int:
    """Run `crewlet ARGV` killed before step 1, 2, … of TARGET until a run is not killed (every step was a kill
    point); `check(kill_at)` after each kill, `reset()` to put the homes back. Returns how many were killed."""
    kill_at = killed = 0
    while True:
        kill_at += 1
        steps_file.unlink(missing_ok=True)
        proc = subprocess.run([sys.executable, "-c", KILLING_CLI, str(kill_at), str(steps_file), target, *argv],
                              env=PROC_ENV, capture_output=True, text=True, timeout=180)
        if proc.returncode != -signal.SIGKILL:
            assert proc.returncode == 0, proc.stderr
            assert int(steps_file.read_text()) == kill_at - 1, kill_at   # every step was a kill point
            return killed
        killed += 1
        check(kill_at)
        reset()


def snapshot_dirs(*pairs: tuple[Path, Path]):
    for live, template in pairs:
        if live.exists():
            shutil.rmtree(live)
        if template.exists():
            shutil.copytree(template, live)


@pytest.mark.timeout(900)
def test_the_first_node_killed_at_each_step_keeps_everything_and_joins_again(tmp_path):
    a = new_home(tmp_path / "A", company())
    ok(cli(a.root, "page", "create", "ENG", "Written Before The Join"))
    with_own_rows(a)
    rows, counts, records = node_local_rows(a.db_file), diary_counts(a.db_file), last_seq(a.log_file)
    config_text = a.config_file.read_text()
    shared = tmp_path / "shared"
    template = tmp_path / "A.template"
    shutil.copytree(a.root, template)

    def check(kill_at: int) -> None:
        res = cli(a.root, "page", "show", "ENG/written before the join")
        assert res.exit_code == 0, (kill_at, res.stdout, res.stderr)
        home = Home(a.root)
        assert not (home.root / JOIN_NOTE).exists() and not note_path(home.db_file).exists(), kill_at
        assert node_local_rows(home.db_file) == rows and diary_counts(home.db_file) == counts, kill_at
        assert last_seq(home.log_file) >= records, kill_at
        if home.shared is None:   # as before the join
            assert (a.root / "company.toml").read_text() == config_text, kill_at
        else:                     # joined: nothing of the home's own left beside the shared copies
            assert home.shared == shared and (shared / "company.toml").read_text() == config_text, kill_at
            assert not (a.root / "log").exists() and not (a.root / "company.toml").exists(), kill_at
        again = cli(a.root, "sync", "join", str(shared), "--json")
        assert again.exit_code == 0, (kill_at, again.stderr)
        home = Home(a.root)
        assert home.shared == shared and not (a.root / "log").exists(), (kill_at, json.loads(again.stdout))
        assert not (a.root / "company.toml").exists(), kill_at
        assert node_local_rows(home.db_file) == rows and diary_counts(home.db_file) == counts, kill_at
        assert last_seq(shared / "pages.log") >= records, kill_at
        ok(cli(a.root, "page", "show", "ENG/written before the join"))

    def reset() -> None:
        snapshot_dirs((a.root, template), (shared, tmp_path / "no-such-template"))

    killed = killed_runs("core.sync.join:_first", ["--home", str(a.root), "sync", "join", str(shared)],
                         tmp_path / "steps", reset, check)
    assert killed >= 10, killed   # the note, each copy, company.toml, node.toml, the originals removed
    assert Home(a.root).shared == shared and node_local_rows(a.db_file) == rows


@pytest.mark.timeout(900)
def test_a_home_joining_a_directory_that_holds_a_log_killed_at_each_step_keeps_its_diaries(tmp_path):
    """A fresh home (its log holds only its configuration's container documents) joins a directory another node
    made: its database is started over from the shared log and its diaries carried — killed at each step. (Its
    other node-local rows — embedding holds, cached answers — are of the content it leaves behind: a joined home
    starts them over by design; killed before the join took, they are all still there.)"""
    data = company()
    a = new_home(tmp_path / "A", data)
    shared = tmp_path / "shared"
    ok(cli(a.root, "sync", "join", str(shared)))
    ok(cli(a.root, "page", "create", "ENG", "On The Shared Log"))
    c = new_home(tmp_path / "C", data)
    with_own_rows(c)
    rows, counts = node_local_rows(c.db_file), diary_counts(c.db_file)
    own_records = last_seq(c.log_file)
    templates = [(c.root, tmp_path / "C.template"), (shared, tmp_path / "shared.template")]
    for live, template in templates:
        shutil.copytree(live, template)

    def diaries(db: Path) -> list[tuple]:
        return node_local_rows(db)["agent_diary"]

    def check(kill_at: int) -> None:
        res = cli(c.root, "pages", "ENG")
        assert res.exit_code == 0, (kill_at, res.stdout, res.stderr)
        home = Home(c.root)
        assert not (home.root / JOIN_NOTE).exists() and not note_path(home.db_file).exists(), kill_at
        assert diaries(home.db_file) == rows["agent_diary"] and diary_counts(home.db_file) == counts, kill_at
        if home.shared is None:   # as before the join: its own log and company.toml, every node-local row
            assert last_seq(home.log_file) == own_records and (c.root / "company.toml").is_file(), kill_at
            assert node_local_rows(home.db_file) == rows, kill_at
        else:                     # joined: the shared pages applied, the home's own files kept aside
            assert "On The Shared Log" in res.stdout, (kill_at, res.stdout)
            assert list(c.root.glob("log.before-join-*")) and list(c.root.glob("company.toml.before-join-*")), kill_at
        again = cli(c.root, "sync", "join", str(shared), "--json")
        assert again.exit_code == 0, (kill_at, again.stderr)
        assert "On The Shared Log" in ok(cli(c.root, "pages", "ENG")), kill_at
        assert diaries(c.db_file) == rows["agent_diary"] and diary_counts(c.db_file) == counts, kill_at
        assert len(list(c.root.glob("crewlet.db.before-join-*[0-9]Z"))) == 1, kill_at
        with Node.open(Home(c.root)) as node:
            assert Diary(node).notes("eng-bot", actor="alex").total == 3, kill_at
            assert node.damage is None, kill_at

    killed = killed_runs("core.sync.join:_join_existing", ["--home", str(c.root), "sync", "join", str(shared)],
                         tmp_path / "steps", lambda: snapshot_dirs(*templates), check)
    assert killed >= 8, killed   # the note, node.toml, company.toml aside, the database swap, the log aside
    assert diaries(c.db_file) == rows["agent_diary"]


@pytest.mark.timeout(900)
def test_a_new_node_killed_at_each_step_is_undone_and_joins_again_from_its_snapshot(tmp_path):
    a = new_home(tmp_path / "A", company())
    shared = tmp_path / "shared"
    ok(cli(a.root, "sync", "join", str(shared)))
    ok(cli(a.root, "page", "create", "ENG", "In The Snapshot"))
    snap = tmp_path / "a.snapshot"
    ok(cli(a.root, "sync", "snapshot", str(snap)))
    b = tmp_path / "B"
    argv = ["--home", str(b), "sync", "join", str(shared), "--snapshot", str(snap)]

    def check(kill_at: int) -> None:
        home = Home(b)
        res = cli(b, "pages", "ENG")
        # undone: nothing of a home left; or whole
        assert not (home.root / JOIN_NOTE).exists(), kill_at
        if res.exit_code != 0:   # nothing of a node, at most a note never written whole (the next join sweeps it)
            left = [p.name for p in b.iterdir() if not p.name.startswith(".node.toml.joining.")] if b.exists() else []
            assert not left and ("no crewlet home" in res.stderr or "crewlet init" in res.stderr), \
                (kill_at, res.stderr, left)
        else:
            assert "In The Snapshot" in res.stdout, kill_at
        if res.exit_code != 0:   # joined again from its snapshot
            again = cli(b, "sync", "join", str(shared), "--snapshot", str(snap), "--json")
            assert again.exit_code == 0, (kill_at, again.stderr)
            assert json.loads(again.stdout)["snapshot"], kill_at
            assert not list(b.glob(".node.toml.joining.*")), kill_at
        else:                    # already whole: a second join finds it joined
            again = cli(b, "sync", "join", str(shared), "--json")
            assert again.exit_code == 0 and json.loads(again.stdout)["joined"] == "already", (kill_at, again.stderr)
        assert "In The Snapshot" in ok(cli(b, "pages", "ENG")), kill_at

    killed = killed_runs("core.sync.join:_new_node", argv, tmp_path / "steps",
                         lambda: shutil.rmtree(b, ignore_errors=True), check)
    assert killed >= 5, killed
    assert "In The Snapshot" in ok(cli(b, "pages", "ENG"))


@pytest.mark.timeout(900)
def test_the_first_node_on_jetstream_killed_at_steps_of_its_switch_keeps_everything(tmp_path, nats_server):
    """`sync join nats://…` killed at each step of the first node's join (one nats-server; each kill
    point on streams of its own prefix): the next command reads and writes — never a database whose positions are
    stream positions under a company.toml that still says file logs — and a second join goes through."""
    a = new_home(tmp_path / "A", company())
    ok(cli(a.root, "page", "create", "ENG", "Written Before The Move"))
    with_own_rows(a)
    rows, records = node_local_rows(a.db_file), last_seq(a.log_file)
    template = tmp_path / "A.template"
    shutil.copytree(a.root, template)
    steps_file = tmp_path / "steps"

    def join_argv(prefix: str) -> list[str]:
        return ["--home", str(a.root), "sync", "join", nats_server.url, "--prefix", prefix]

    target = "core.sync.nats_join:_first"
    proc = subprocess.run([sys.executable, "-c", KILLING_CLI, "1000000", str(steps_file), target,
                           *join_argv("counting")], env=PROC_ENV, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    steps = int(steps_file.read_text())
    assert steps >= 8, steps
    killed = 0
    for kill_at in range(1, steps + 1):
        snapshot_dirs((a.root, template))
        prefix = f"k{kill_at}"
        proc = subprocess.run([sys.executable, "-c", KILLING_CLI, str(kill_at), str(steps_file), target,
                               *join_argv(prefix)], env=PROC_ENV, capture_output=True, text=True, timeout=180)
        assert proc.returncode == -signal.SIGKILL, (kill_at, proc.stderr)
        killed += 1
        assert "Written Before The Move" in ok(cli(a.root, "page", "show", "ENG/written before the move")), kill_at
        home = Home(a.root)
        assert not (home.root / JOIN_NOTE).exists(), kill_at
        backend = config_mod.load(home.config_file).log.backend
        if backend == "file":   # as before the join: its own log whole
            assert last_seq(home.log_file) == records, kill_at
        else:                   # switched: its file log kept aside, whole
            kept = list((a.root / "log").glob("pages.log.before-jetstream-*"))
            assert len(kept) == 1 and last_seq(kept[0]) == records, (kill_at, kept)
        assert node_local_rows(home.db_file) == rows, kill_at
        res = cli(a.root, "page", "create", "ENG", f"Written After Kill {kill_at}")   # a write works: no false damage
        assert res.exit_code == 0, (kill_at, backend, res.stderr)
        again = cli(a.root, "sync", "join", nats_server.url, "--prefix", prefix, "--json")
        assert again.exit_code == 0, (kill_at, again.stderr)
        assert json.loads(again.stdout)["joined"] in ("first", "already"), kill_at
        assert config_mod.load(Home(a.root).config_file).log.backend == "jetstream", kill_at
        for title in ("written before the move", f"written after kill {kill_at}"):
            ok(cli(a.root, "page", "show", f"ENG/{title}"))
        assert node_local_rows(a.db_file) == rows, kill_at
    assert killed >= 8, killed


def test_a_join_note_that_cannot_be_read_is_named_in_one_line_and_init_does_not_build_on_a_stopped_join(tmp_path):
    """A note that is not one crewlet wrote (write_atomic renames a note into place only once whole) is named with
    the fix, never guessed at; and `crewlet init` over a home a join stopped in refuses rather than build a home the
    next open would undo."""
    a = new_home(tmp_path / "A", company())
    (a.root / JOIN_NOTE).write_text("{not json")
    res = cli(a.root, "pages", "ENG")
    assert res.exit_code == 1 and JOIN_NOTE in res.stderr and "move it aside" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    (a.root / JOIN_NOTE).unlink()
    ok(cli(a.root, "pages", "ENG"))
    b = tmp_path / "B"
    b.mkdir()
    (b / JOIN_NOTE).write_text(json.dumps({"kind": "new", "shared": str(tmp_path / "shared"), "created": False}))
    res = cli(b, "init")
    assert res.exit_code == 1 and "sync join" in res.stderr, (res.stdout, res.stderr)
    assert not (b / "company.toml").exists()


@pytest.mark.timeout(900)
def test_a_home_whose_log_is_a_prefix_of_the_directorys_killed_at_each_step_keeps_its_database(tmp_path):
    """A home restored from a backup taken before its node joined (its log a byte-for-byte prefix of the shared
    one) joins again: it keeps its database and its own rows, and applies the rest — killed at each step."""
    a = new_home(tmp_path / "A", company())
    ok(cli(a.root, "page", "create", "ENG", "Before The Backup"))
    with_own_rows(a)
    c = tmp_path / "C"
    shutil.copytree(a.root, c)   # the backup
    shared = tmp_path / "shared"
    ok(cli(a.root, "sync", "join", str(shared)))
    ok(cli(a.root, "page", "create", "ENG", "After The Backup"))
    rows, records = node_local_rows(Home(c).db_file), last_seq(Home(c).log_file)
    templates = [(c, tmp_path / "C.template"), (shared, tmp_path / "shared.template")]
    for live, template in templates:
        shutil.copytree(live, template)

    def check(kill_at: int) -> None:
        res = cli(c, "pages", "ENG")
        assert res.exit_code == 0 and "Before The Backup" in res.stdout, (kill_at, res.stderr)
        home = Home(c)
        assert not (c / JOIN_NOTE).exists(), kill_at
        assert node_local_rows(home.db_file) == rows, kill_at
        if home.shared is None:
            assert last_seq(home.log_file) == records and (c / "company.toml").is_file(), kill_at
        else:
            assert "After The Backup" in res.stdout and not (c / "log").exists(), (kill_at, res.stdout)
        again = cli(c, "sync", "join", str(shared), "--json")
        assert again.exit_code == 0, (kill_at, again.stderr)
        assert "After The Backup" in ok(cli(c, "pages", "ENG")) and not (c / "log").exists(), kill_at
        assert node_local_rows(Home(c).db_file) == rows, kill_at

    killed = killed_runs("core.sync.join:_join_existing", ["--home", str(c), "sync", "join", str(shared)],
                         tmp_path / "steps", lambda: snapshot_dirs(*templates), check)
    assert killed >= 5, killed
    assert Home(c).shared == shared and node_local_rows(Home(c).db_file) == rows
