"""Replication: homes sharing one directory of logs (issue 13). Real homes, real logs, real SQLite files;
every command goes through the CLI where a person would use it."""
from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest
from conftest import new_home
from typer.testing import CliRunner

from core import config as config_mod
from core.errors import CrewletError, Refused
from core.log import FileLog, LogMismatch, LogMoved, Record
from core.log.framing import encode_frame
from core.node import Node
from core.pages.service import KnowledgeBase
from core.paths import Home
from core.log import locks, peers
from core.store.digest import content_digest
from core.sync.watch import LogWatcher
from crewlet_tui.cli import app

ENV = {"CREWLET_HOME": None, "CREWLET_AS": None, "COLUMNS": "200"}


def cli(root: Path, *args: str, env: dict | None = None):
    return CliRunner().invoke(app, ["--home", str(root), *args], env=ENV | (env or {}))


def ok(res) -> str:
    assert res.exit_code == 0, (res.stdout, res.stderr)
    return res.stdout


def refused(res) -> str:
    assert res.exit_code == 1, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crewlet: "), res.stderr
    return lines[0]


@pytest.fixture
def fleet(tmp_path):
    """A first node A (the example company) whose logs moved into `shared`, and a new node B made from it."""
    a = new_home(tmp_path / "A")
    shared = tmp_path / "shared"
    ok(cli(a.root, "sync", "join", str(shared)))
    ok(cli(tmp_path / "B", "sync", "join", str(shared), "--operator", "sam"))
    return Home(a.root), Home(tmp_path / "B"), shared


def digest(home: Home) -> str:
    with Node.open(home) as node:
        return content_digest(node.conn).content


# -- joining ------------------------------------------------------------------------------------------------

def test_the_first_node_moves_its_logs_and_configuration_into_the_shared_directory(tmp_path):
    a = new_home(tmp_path / "A")
    with Node.open(a) as node:
        KnowledgeBase(node).create_page("ENG", "Before Sharing", "text")
        log_bytes = a.log_file.read_bytes()
    shared = tmp_path / "shared"
    out = json.loads(ok(cli(a.root, "sync", "join", str(shared), "--json")))
    assert out["joined"] == "first"
    assert (shared / "pages.log").read_bytes() == log_bytes        # the very bytes, nothing re-written
    assert (shared / "company.toml").is_file() and (shared / "vectors.log").exists()
    assert not (a.root / "log").exists() and not (a.root / "company.toml").exists()
    joined = Home(a.root)
    assert joined.shared == shared.resolve() and joined.log_file == shared.resolve() / "pages.log"
    settings = config_mod.load_node(joined.node_file)
    assert settings.operator == "alex" and settings.node_id
    assert "Before Sharing" in ok(cli(a.root, "page", "show", "ENG/before sharing"))
    assert json.loads(ok(cli(a.root, "sync", "join", str(shared), "--json")))["joined"] == "already"


def test_a_page_written_on_one_node_appears_on_the_other_with_the_writer_s_node_id(fleet):
    a, b, shared = fleet
    ok(cli(b.root, "page", "create", "ENG", "Written On B"))
    shown = json.loads(ok(cli(a.root, "page", "show", "ENG/written on b", "--json")))
    assert shown["created_by"] == "sam"                 # B's own operator, from its node.toml
    b_id = config_mod.load_node(b.node_file).node_id
    with FileLog(shared / "pages.log", readonly=True) as flog:
        last = [r for r, _ in flog.read()][-1]
    assert last.type == "page.create" and last.node == b_id
    assert digest(a) == digest(b)
    # search on A finds what B wrote (A's own keyword index, built from A's rows)
    assert "Written On B" in ok(cli(a.root, "search", "written"))


def test_each_node_acts_as_its_own_operator_and_crewlet_as_overrides_it(fleet):
    a, b, _ = fleet
    assert json.loads(ok(cli(a.root, "page", "create", "ENG", "By A", "--json")))["created_by"] == "alex"
    assert json.loads(ok(cli(b.root, "page", "create", "ENG", "By B", "--json")))["created_by"] == "sam"
    made = json.loads(ok(cli(b.root, "page", "create", "ENG", "By Bot", "--json", env={"CREWLET_AS": "eng-bot"})))
    assert made["created_by"] == "eng-bot"
    config_mod.write_node(b.node_file, config_mod.NodeSettings(config_mod.load_node(b.node_file).node_id, "nobody",
                                                               str(b.shared)))
    line = refused(cli(b.root, "spaces"))
    assert "node.toml: operator: 'nobody' is not an actor" in line


def test_company_toml_lives_in_the_shared_directory_and_an_edit_reaches_every_node(fleet):
    a, b, shared = fleet
    text = (shared / "company.toml").read_text(encoding="utf-8")
    (shared / "company.toml").write_text(text + '\n[spaces.OPS]\nname = "Operations"\n', encoding="utf-8")
    ok(cli(a.root, "page", "create", "OPS", "Runbook"))       # A reads the edited file
    keys = [s["key"] for s in json.loads(ok(cli(b.root, "spaces", "--json")))]
    assert "OPS" in keys
    assert digest(a) == digest(b)


def test_a_fresh_home_joins_a_shared_directory_keeping_its_own_files_aside(fleet, tmp_path):
    _, _, shared = fleet
    c = new_home(tmp_path / "C", config_mod.empty_config("alex"))
    with Node.open(c):
        pass  # its container documents: derived from its own configuration, not written by anyone
    out = json.loads(ok(cli(c.root, "sync", "join", str(shared), "--json")))
    assert out["joined"] == "joined" and out["applied"] > 0
    assert any("company.toml.before-join" in k for k in out["kept_aside"])
    assert any("crewlet.db.before-join" in k for k in out["kept_aside"])
    assert digest(Home(c.root)) == digest(fleet[0])


def test_a_home_with_pages_of_its_own_is_refused_and_left_as_it_was(fleet, tmp_path):
    _, _, shared = fleet
    c = new_home(tmp_path / "C")
    with Node.open(c) as node:
        KnowledgeBase(node).create_page("ENG", "Mine", "only here")
    before = sorted(p.name for p in c.root.iterdir())
    line = refused(cli(c.root, "sync", "join", str(shared)))
    assert "has written 1 record(s) of its own" in line and "1 page.create" in line
    assert sorted(p.name for p in c.root.iterdir()) == before and not Home(c.root).shared


def test_a_restored_home_whose_log_is_a_prefix_of_the_shared_log_joins_keeping_its_database(tmp_path):
    a = new_home(tmp_path / "A")
    ok(cli(a.root, "page", "create", "ENG", "Before The Backup"))
    backup = tmp_path / "backup"
    shutil.copytree(a.root, backup)          # a backup taken before the home was shared
    shared = tmp_path / "shared"
    ok(cli(a.root, "sync", "join", str(shared)))
    ok(cli(a.root, "page", "create", "ENG", "Written Since"))
    os.remove(backup / "node.toml")          # the backup lost its node file too
    out = json.loads(ok(cli(backup, "sync", "join", str(shared), "--json")))
    assert out["joined"] == "joined" and not any("crewlet.db" in k for k in out["kept_aside"])
    assert out["applied"] == 1               # only what was written since the backup
    assert digest(Home(backup)) == digest(Home(a.root))


def test_join_refuses_what_it_cannot_use(fleet, tmp_path):
    a, _, shared = fleet
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("x")
    c = new_home(tmp_path / "C")
    assert "holds files but no crewlet log" in refused(cli(c.root, "sync", "join", str(other)))
    assert "already a node of" in refused(cli(a.root, "sync", "join", str(other)))
    assert "is not a shared directory yet" in refused(cli(tmp_path / "N", "sync", "join", str(other)))
    assert not (tmp_path / "N").exists()     # nothing of a new node is left behind
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("x")
    assert "not a crewlet home and not empty" in refused(cli(busy, "sync", "join", str(shared)))


def test_joining_refuses_while_the_app_or_a_worker_runs_on_the_home(fleet, tmp_path):
    _, _, shared = fleet
    c = new_home(tmp_path / "C", config_mod.empty_config("alex"))
    from core.duties.runner import Lease
    Lease(Home(c.root).node_lease_dir, "keyword-index", "someone", "crewlet app (pid 1)").acquire()
    assert "crewlet app (pid 1) is running" in refused(cli(c.root, "sync", "join", str(shared)))


# -- status ---------------------------------------------------------------------------------------------------

def test_status_shows_this_node_s_lag_and_every_peer_without_applying(fleet):
    a, b, _ = fleet
    for i in range(3):
        ok(cli(a.root, "page", "create", "ENG", f"Lag {i}"))
    st = json.loads(ok(cli(b.root, "sync", "status", "--json")))
    pages = next(line for line in st["logs"] if line["log"] == "pages")
    assert pages["behind"] == 3 and pages["log_seq"] == pages["applied_seq"] + 3
    assert {p["node_id"] for p in st["peers"]} == {config_mod.load_node(h.node_file).node_id for h in (a, b)}
    me = next(p for p in st["peers"] if p["this_node"])
    assert me["behind"]["pages"] == 3
    assert st["locks"]["ok"] is True
    ok(cli(b.root, "spaces"))                 # any command catches up
    st = json.loads(ok(cli(b.root, "sync", "status", "--json", "--digest")))
    assert st["behind"] == 0
    assert st["digest"]["content"] == json.loads(ok(cli(a.root, "sync", "status", "--json", "--digest")))["digest"]["content"]
    text = ok(cli(b.root, "sync", "status"))
    assert "peers     2 seen" in text and "(this node)" in text


def test_status_of_a_home_that_shares_nothing_says_so(home):
    assert "not joined" in ok(cli(home.root, "sync", "status"))


# -- deterministic conflicts across nodes -----------------------------------------------------------------------

def test_conflicts_decided_the_same_on_every_node_and_the_losing_text_kept_where_it_was_written(fleet):
    a, b, _ = fleet
    with Node.open(a) as na, Node.open(b) as nb:
        ka, kb = KnowledgeBase(na), KnowledgeBase(nb)
        page = ka.create_page("ENG", "Contended", "v1")
        nb.catch_up()
        # both saw revision 1; A saves first, B's save of revision 1 is stale
        ka.save_page(page.id, "A's words", base_revision=1)
        with pytest.raises(Refused) as stale:
            kb.save_page(page.id, "B's words", base_revision=1, actor="sam")
        assert stale.value.code == "stale_revision"
        assert list(b.rescue_dir.iterdir()) and not a.rescue_dir.exists()
        assert [p.read_text() for p in b.rescue_dir.iterdir()] == ["B's words"]
        # the same title, created on both nodes: the first on the log holds it
        ka.create_page("ENG", "Same Title", "from A")
        with pytest.raises(Refused) as taken:
            kb.create_page("ENG", "same title", "from B", actor="sam")
        assert taken.value.code == "title_taken"
        # moves into a cycle: each sound where it was written, the second salvaged identically
        x = ka.create_page("ENG", "X", "")
        y = ka.create_page("ENG", "Y", "")
        nb.catch_up()
        records = [Record.new("page.move", "alex", {"page_id": x.id, "parent_id": y.id}),
                   Record.new("page.move", "sam", {"page_id": y.id, "parent_id": x.id})]
        outs = na.submit(records)
        assert outs[1].warnings[0]["code"] == "pages_parent_salvaged"
        # trash and restore racing: a restore of a page under a trashed parent is refused
        child = ka.create_page("ENG", "Child", "c", parent=x.id)
        outs = nb.submit([Record.new("page.trash", "alex", {"page_id": child.id}),
                          Record.new("page.trash", "alex", {"page_id": x.id}),
                          Record.new("page.restore", "alex", {"page_id": child.id})])
        assert [o.code for o in outs] == [None, None, "parent_trashed"]
    assert digest(a) == digest(b)


# -- snapshots --------------------------------------------------------------------------------------------------

def test_a_new_node_from_a_snapshot_applies_only_the_log_after_it(fleet, tmp_path):
    a, _, shared = fleet
    for i in range(5):
        ok(cli(a.root, "page", "create", "ENG", f"Before {i}"))
    snap = tmp_path / "snap.db"
    info = json.loads(ok(cli(a.root, "sync", "snapshot", str(snap), "--json")))
    at = info["positions"]["pages"]["seq"]
    for i in range(4):
        ok(cli(a.root, "page", "create", "ENG", f"After {i}"))
    out = json.loads(ok(cli(tmp_path / "C", "sync", "join", str(shared), "--snapshot", str(snap), "--json")))
    assert out["joined"] == "new" and out["snapshot"]["positions"]["pages"]["seq"] == at
    assert out["applied"] == 4
    assert digest(Home(tmp_path / "C")) == digest(a)
    with Node.open(Home(tmp_path / "C")) as node:   # the snapshot carried none of A's own rows
        assert node.conn.execute("SELECT count(*) FROM duties").fetchone()[0] == 0
    assert "already exists" in refused(cli(a.root, "sync", "snapshot", str(snap)))


def test_a_snapshot_of_another_log_or_past_the_log_is_refused_with_the_reason(fleet, tmp_path):
    a, _, shared = fleet
    stranger = new_home(tmp_path / "S")
    ok(cli(stranger.root, "page", "create", "ENG", "Elsewhere"))
    other = tmp_path / "other.db"
    ok(cli(stranger.root, "sync", "snapshot", str(other)))
    line = refused(cli(tmp_path / "C", "sync", "join", str(shared), "--snapshot", str(other)))
    assert "another log" in line
    assert not (tmp_path / "C").exists()
    # a snapshot taken further along than the log now reaches: a gap
    ok(cli(a.root, "page", "create", "ENG", "Soon Cut"))
    ahead = tmp_path / "ahead.db"
    ok(cli(a.root, "sync", "snapshot", str(ahead)))
    log = shared / "pages.log"
    with FileLog(log, readonly=True) as flog:
        start = [f for _, f in flog.read_frames()][-1].offset
    data = log.read_bytes()
    log.write_bytes(data[:start])
    try:
        line = refused(cli(tmp_path / "D", "sync", "join", str(shared), "--snapshot", str(ahead)))
        assert "a gap" in line
    finally:
        log.write_bytes(data)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    assert "is not a" in refused(cli(tmp_path / "E", "sync", "join", str(shared), "--snapshot", str(junk)))


def test_a_node_whose_log_no_longer_holds_its_position_says_so_and_adopting_a_snapshot_fixes_it(fleet, tmp_path):
    a, b, shared = fleet
    ok(cli(a.root, "page", "create", "ENG", "One"))
    ok(cli(b.root, "spaces"))
    # B's database applied a record the log no longer holds where B's position says (the log was replaced)
    log = shared / "pages.log"
    keep = log.read_bytes()
    with FileLog(log, readonly=True) as flog:
        last = [f for _, f in flog.read_frames()][-1]
    other = Record.new("page.create", "alex", {"page_id": "0123456789abcdef", "container": "ENG", "title": "Other",
                                               "body": "", "parent_id": None})
    log.write_bytes(keep[:last.offset] + encode_frame(last.seq, other.body()))
    res = cli(b.root, "page", "create", "ENG", "Refused")
    line = refused(res)
    assert "the log is damaged" in line and "crewlet sync adopt FILE" in line
    log.write_bytes(keep[:last.offset] + encode_frame(last.seq, other.body()))
    # A is damaged the same way; a snapshot of a node that matches the log fixes B
    fresh = tmp_path / "F"
    ok(cli(fresh, "sync", "join", str(shared)))
    snap = tmp_path / "fix.db"
    ok(cli(fresh, "sync", "snapshot", str(snap)))
    out = json.loads(ok(cli(b.root, "sync", "adopt", str(snap), "--yes", "--json")))
    assert out["database_kept_as"] and Path(out["database_kept_as"]).exists()
    ok(cli(b.root, "page", "create", "ENG", "Written After Adopting"))
    assert digest(Home(b.root)) == digest(Home(fresh))


# -- the writers' lock and torn tails ------------------------------------------------------------------------------

def test_a_torn_tail_another_node_applied_is_never_cut(fleet):
    a, b, shared = fleet
    with Node.open(a) as na:
        ok(cli(b.root, "page", "create", "ENG", "Applied By B"))   # B applied it; A has not looked yet
        log = shared / "pages.log"
        size = log.stat().st_size
        os.truncate(log, size - 5)            # what a stale view of the file looks like: the last frame torn
        with pytest.raises(LogMismatch) as exc:
            KnowledgeBase(na).create_page("ENG", "Would Cut", "x")
        assert "node " in str(exc.value) and "not an interrupted append" in str(exc.value)
        assert log.stat().st_size == size - 5          # nothing cut, nothing appended


def test_a_writer_that_waited_while_its_home_joined_refuses_to_append_to_the_log_left_behind(tmp_path):
    a = new_home(tmp_path / "A")
    with Node.open(a) as node:
        ok(cli(a.root, "sync", "join", str(tmp_path / "shared")))
        with pytest.raises(LogMoved):
            node.log.append([Record.new("page.create", "alex", {"page_id": "0123456789abcdef", "container": "ENG",
                                                                "title": "Lost", "body": "", "parent_id": None})])


@pytest.mark.parametrize("fstype, options, good", [
    ("ext4", {"rw"}, True), ("nfs4", {"rw", "vers=4.2"}, True), ("cifs", {"rw"}, True),
    ("nfs", {"rw", "nolock"}, False), ("nfs4", {"rw", "local_lock=flock"}, False), ("fuse.sshfs", {"rw"}, False),
    ("vboxsf", {"rw"}, False), ("weirdfs", {"rw"}, False)])
def test_a_filesystem_that_keeps_locks_local_is_refused(tmp_path, monkeypatch, fstype, options, good):
    monkeypatch.setattr(locks, "mount_of", lambda path: (fstype, "/mnt", options))
    result = locks.check(tmp_path)
    assert result.ok is good, result.why
    if not good:
        with pytest.raises(CrewletError) as exc:
            locks.require(tmp_path)
        assert exc.value.code == "locks_unsupported" and fstype in str(exc.value)


def test_a_node_refuses_to_start_on_a_shared_directory_without_locks(fleet, monkeypatch):
    a, _, _ = fleet
    monkeypatch.setattr(locks, "mount_of", lambda path: ("fuse.sshfs", "/mnt", {"rw"}))
    line = refused(cli(a.root, "spaces"))
    assert "refusing to use" in line and "sshfs keeps locks on the machine" in line
    monkeypatch.setenv(locks.TRUST_ENV, "1")
    monkeypatch.setattr(locks, "mount_of", lambda path: ("somefs", "/mnt", {"rw"}))
    ok(cli(a.root, "spaces"))


def test_a_node_whose_shared_directory_is_unreachable_says_so(fleet, tmp_path):
    a, _, shared = fleet
    os.rename(shared, tmp_path / "elsewhere")
    line = refused(cli(a.root, "spaces"))
    assert "cannot be reached" in line and "node.toml" in line


def test_the_flock_probe_sees_a_lock_that_excludes(tmp_path):
    assert locks.probe_flock(tmp_path) is None


# -- catching up in the background -------------------------------------------------------------------------------

def test_the_watcher_sees_another_node_append_and_the_apply_duty_applies_it(fleet):
    a, b, _ = fleet
    from core.duties.roster import ApplyDuty
    from core.duties.runner import PassContext
    with Node.open(b) as node:
        watcher = LogWatcher(b, node.applied_ends)
        assert not watcher.changed()
        KnowledgeBase(node).create_page("ENG", "Written Here", "x")   # this node's own write: applied already
        assert not watcher.changed()
        ok(cli(a.root, "page", "create", "ENG", "Seen By The Watcher"))
        assert watcher.changed() and not watcher.changed()
        result = ApplyDuty(node).run_pass(PassContext(cursor=None, stop=threading.Event()))
        assert result.counts["applied"] >= 1
        assert KnowledgeBase(node).resolve("ENG/seen by the watcher").title == "Seen By The Watcher"


def test_peer_files_say_where_each_node_is(fleet):
    a, b, _ = fleet
    ok(cli(a.root, "page", "create", "ENG", "Moves A"))
    seen = {p.node_id: p for p in peers.read_peers(a)}
    a_id = config_mod.load_node(a.node_file).node_id
    with Node.open(a, catch_up=False) as node:
        assert seen[a_id].seq("applier") == node.applied_seq()
    assert seen[a_id].home == str(a.root)


def test_fleet_duties_stay_singletons_across_nodes_because_their_leases_live_with_the_log(fleet):
    from core.duties.roster import TrashReaperDuty
    from core.duties.runner import DutyRunner
    a, b, shared = fleet
    with Node.open(a) as na, Node.open(b) as nb:
        first = DutyRunner(na, [TrashReaperDuty(na)], label="node A")
        second = DutyRunner(nb, [TrashReaperDuty(nb)], label="node B")
        assert first.run_one(first.duties[0], stop=threading.Event()).ran
        report = second.run_one(second.duties[0], stop=threading.Event())
        assert not report.ran and "node A" in report.skipped
        assert (shared / "leases" / "trash-reaper.lease").is_file()
        first.release()
        assert second.run_one(second.duties[0], stop=threading.Event()).ran
        second.release()


def test_nodes_probing_the_shared_directory_at_once_never_refuse_each_other(tmp_path):
    """Every node that opens probes the shared directory's locks: two opening at the same moment must not
    take each other's probe lock for a filesystem without locks (one shared probe file did exactly that:
    `crewlet` on one node refused to start while another opened), and no probe file is left behind."""
    import threading

    problems: list[str] = []

    def probe_often() -> None:
        for _ in range(200):
            problem = locks.probe_flock(tmp_path)
            if problem:
                problems.append(problem)

    threads = [threading.Thread(target=probe_often) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert problems == []
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".lock-probe")]
