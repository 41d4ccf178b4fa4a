"""A repair costs only what is damaged (issue 19, part 1).

Reproductions: one flipped byte, or one exact duplicate of a frame, in the middle of `pages.log` made
`crewlet log repair --yes` keep only the prefix before it — on a 90-page home, about 47 intact records moved
aside and the home ended with 43 pages; on a shared directory every other node then lost them too, although
their databases held them. Now the reader resynchronises on the next valid frame, a duplicate costs nothing,
a damaged frame costs that one record — given back by any database (this node's, a peer's on this machine)
that applied it, proved by a replay, else a tombstone every node applies the same way — and a repair says,
and asks, before other nodes lose anything."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import REPLAYED_TABLES, new_home, table_rows
from typer.testing import CliRunner

from core.log import FileLog
from core.log.framing import HEADER_SIZE
from core.node import Node
from core.pages.service import KnowledgeBase
from core.paths import Home
from core.store.digest import content_digest
from crewlet_tui.cli import app

ENV = {"CREWLET_HOME": None, "CREWLET_AS": None, "COLUMNS": "250"}


def cli(root: Path, *args: str):
    return CliRunner().invoke(app, ["--home", str(root), *args], env=ENV)


def ok(res) -> str:
    assert res.exit_code == 0, (res.stdout, res.stderr)
    return res.stdout


def frames(path: Path) -> list[tuple[int, int, int, str]]:
    """(start, end, seq, type) of every frame of a sound log."""
    out, start = [], 0
    with FileLog(path, readonly=True) as flog:
        for rec, end in flog.read():
            out.append((start, end, rec.seq, rec.type))
            start = end
    return out


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x10
    path.write_bytes(bytes(data))


def titles(root: Path) -> set[str]:
    with Node.open(Home(root), sync_containers=False) as node:
        return {r[0] for r in node.conn.execute("SELECT title FROM pages")}


def replica(home: Home, root: Path) -> Home:
    """A node's home with the same configuration and a copy of the log, and no database yet."""
    dst = Home(root)
    dst.log_file.parent.mkdir(parents=True)
    shutil.copy2(home.config_file, dst.config_file)
    shutil.copy2(home.log_file, dst.log_file)
    return dst


def assert_replay_equals_live(home: Home, scratch: Path) -> None:
    fresh = replica(home, scratch)
    with Node.open(home, sync_containers=False) as live, Node.open(fresh, sync_containers=False) as replayed:
        assert live.damage is None and replayed.damage is None, (live.damage, replayed.damage)
        for t in REPLAYED_TABLES:
            if t != "log_position":  # a replica's log is a copy, but its own position row is its own
                assert table_rows(replayed.conn, t) == table_rows(live.conn, t), t


def ninety_pages(home: Home) -> list[str]:
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        return [kb.create_page("ENG", f"Runbook {i}", f"# Runbook {i}\n\nsteps for service {i}\n").id for i in range(90)]


def middle_page_create(log: Path) -> tuple[int, int, int]:
    creates = [(s, e, q) for s, e, q, t in frames(log) if t == "page.create"]
    return creates[len(creates) // 2]


# -- a flipped byte ------------------------------------------------------------------------------------------

def test_a_flipped_byte_mid_log_costs_that_one_record_and_no_other(home, tmp_path):
    """A node with no database that applied the damaged record (a replica): the repair loses exactly it — a
    tombstone in its place naming what it was — and keeps all 89 other pages (it kept 43 before)."""
    ninety_pages(home)
    start, end, seq = middle_page_create(home.log_file)
    flip(home.log_file, start + HEADER_SIZE + 40)
    node_b = replica(home, tmp_path / "replica")
    with Node.open(node_b) as node:            # a replay stops at the damage, every record before it applied
        assert node.damage is not None and node.applied_seq() == seq - 1

    data = json.loads(cli(node_b.root, "log", "check", "--json").stdout)["logs"][0]
    [spot] = data["spots"]
    assert (spot["kind"], spot["seqs"], spot["records_lost"]) == ("corrupt", [seq], 1)
    [rewrite] = spot["rewrites"]
    # no database applied it, and the damaged bytes still say what it was
    assert rewrite["how"] == "lost" and rewrite["what"].startswith("page.create ENG/Runbook 45")
    assert f"this node's database applied the log only through seq {seq - 1}" in rewrite["why"]
    out = cli(node_b.root, "log", "check").stdout
    assert "a repair loses 1 record" in out

    repaired = json.loads(ok(cli(node_b.root, "log", "repair", "--yes", "--json")))
    assert repaired["records_lost"] == 1 and repaired["ok"]
    assert titles(node_b.root) == {f"Runbook {i}" for i in range(90)} - {"Runbook 45"}
    # the hole is one record at that very seq, applied the same way by every node that replays the log
    kept = frames(node_b.log_file)
    assert [q for _, _, q, _ in kept] == list(range(1, len(kept) + 1))
    assert kept[seq - 1][3] == "log.lost"
    with Node.open(node_b) as node:
        row = node.conn.execute("SELECT type, status, reason FROM applied_ops WHERE seq = ?", (seq,)).fetchone()
        assert (row["type"], row["status"]) == ("log.lost", "lost") and "Runbook 45" in row["reason"]
        KnowledgeBase(node).create_page("ENG", "After The Repair", "writes work again")
    assert_replay_equals_live(node_b, tmp_path / "replay")


def test_a_flipped_byte_mid_log_is_given_back_by_the_database_that_applied_it(home, tmp_path):
    ninety_pages(home)
    start, end, seq = middle_page_create(home.log_file)
    flip(home.log_file, start + HEADER_SIZE + 40)
    damaged = home.log_file.read_bytes()
    res = cli(home.root, "log", "check")
    assert res.exit_code == 1
    assert f"seq {seq} (page.create ENG/Runbook 45): given back by this node's database" in res.stdout
    assert "a repair loses 0 records, gives back 1" in res.stdout

    out = json.loads(ok(cli(home.root, "log", "repair", "--yes", "--json")))
    assert out["records_lost"] == 0 and not out["rebuilt"] and out["lost"] == []
    assert titles(home.root) == {f"Runbook {i}" for i in range(90)}
    [aside] = home.log_file.parent.glob("pages.log.damaged-*")
    assert aside.read_bytes() == damaged                     # not a byte deleted
    assert json.loads(ok(cli(home.root, "log", "check", "--json")))["ok"]
    assert_replay_equals_live(home, tmp_path / "replay")


# -- a duplicated frame ----------------------------------------------------------------------------------------

def test_a_duplicated_frame_costs_nothing(home, tmp_path):
    ninety_pages(home)
    start, end, seq = middle_page_create(home.log_file)
    data = home.log_file.read_bytes()
    home.log_file.write_bytes(data[:end] + data[start:end] + data[end:])
    node_b = replica(home, tmp_path / "replica")
    for root in (home.root, node_b.root):
        log = json.loads(cli(root, "log", "check", "--json").stdout)["logs"][0]
        [spot] = log["spots"]
        assert (spot["kind"], spot["copy_of"], spot["records_lost"], spot["seqs"]) == ("duplicate", seq, 0, [])
        out = json.loads(ok(cli(root, "log", "repair", "--yes", "--json")))
        assert out["records_lost"] == 0 and out["lost"] == [] and not out["rebuilt"]
        assert titles(root) == {f"Runbook {i}" for i in range(90)}
        assert Path(root, "log", "pages.log").read_bytes() == data     # the copy is gone, nothing else moved
    assert_replay_equals_live(home, tmp_path / "replay")


def test_log_check_says_for_each_damage_how_many_records_a_repair_loses(home, tmp_path):
    ninety_pages(home)
    fs = frames(home.log_file)
    d_start, d_end, d_seq, _ = fs[20]
    f_start, f_end, f_seq, _ = fs[60]
    data = bytearray(home.log_file.read_bytes())
    data[f_start + HEADER_SIZE + 30] ^= 0x04
    home.log_file.write_bytes(bytes(data[:d_end] + data[d_start:d_end] + data[d_end:]))
    node_b = replica(home, tmp_path / "replica")
    log = json.loads(cli(node_b.root, "log", "check", "--json").stdout)["logs"][0]
    assert [(s["kind"], s["records_lost"]) for s in log["spots"]] == [("duplicate", 0), ("corrupt", 1)]
    assert log["records_lost"] == 1 and log["spots"][1]["seqs"] == [f_seq]
    text = cli(node_b.root, "log", "check").stdout
    assert "damage 1" in text and "damage 2" in text and "a repair loses 0 records" in text and "a repair loses 1 record" in text


def test_a_refused_record_lost_from_the_log_is_given_back_as_the_outcome_it_was_given(home, tmp_path):
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        page = kb.create_page("ENG", "Shared", "first")
        kb.save_page(page.id, "second", base_revision=1)
        try:
            kb.save_page(page.id, "a stale third", base_revision=1)
        except Exception:  # noqa: BLE001 - refused: stale
            pass
        kb.create_page("ENG", "Later", "after")
    refused = [f for f in frames(home.log_file) if f[3] == "page.save"][-1]
    flip(home.log_file, refused[0] + HEADER_SIZE + 30)
    out = json.loads(ok(cli(home.root, "log", "repair", "--yes", "--json")))
    assert [(r["how"], r["seq"]) for r in out["rewritten"]] == [("outcome", refused[2])]
    assert out["records_lost"] == 0
    with Node.open(home, sync_containers=False) as node:
        row = node.conn.execute("SELECT type, status, code FROM applied_ops WHERE seq = ?", (refused[2],)).fetchone()
        assert tuple(row) == ("page.save", "refused", "stale_revision")
    assert_replay_equals_live(home, tmp_path / "replay")


# -- a shared directory ---------------------------------------------------------------------------------------

def _fleet(tmp_path: Path) -> tuple[Home, Home, Path]:
    a = new_home(tmp_path / "A")
    shared = tmp_path / "shared"
    ok(cli(a.root, "sync", "join", str(shared)))
    ok(cli(tmp_path / "B", "sync", "join", str(shared), "--operator", "sam"))
    return Home(a.root), Home(tmp_path / "B"), shared


def _write_on(root: Path, n: int) -> None:
    with Node.open(Home(root)) as node:
        kb = KnowledgeBase(node)
        for i in range(n):
            kb.create_page("ENG", f"From B {i}", f"written on B, {i}\n")


def test_a_record_the_shared_log_lost_is_given_back_by_the_peer_that_applied_it(tmp_path):
    """Node A had not applied B's writes when one of them was damaged: A's repair gives the record back from
    B's database (on this machine), and neither node loses a page."""
    a, b, shared = _fleet(tmp_path)
    _write_on(b.root, 12)
    start, end, seq = middle_page_create(shared / "pages.log")
    flip(shared / "pages.log", start + HEADER_SIZE + 40)
    log = json.loads(cli(a.root, "log", "check", "--json").stdout)["logs"][0]
    [spot] = log["spots"]
    assert spot["records_lost"] == 0 and spot["rewrites"][0]["how"] == "recovered"
    assert spot["rewrites"][0]["source"].startswith("node ")      # B's database, not A's
    assert log["other_nodes"] == []
    out = json.loads(ok(cli(a.root, "log", "repair", "--yes", "--json")))
    assert out["records_lost"] == 0
    expected = {f"From B {i}" for i in range(12)}
    assert expected <= titles(a.root) and expected <= titles(b.root)
    with Node.open(a) as na, Node.open(b) as nb:
        assert na.damage is None and nb.damage is None
        assert content_digest(na.conn).content == content_digest(nb.conn).content


def test_a_repair_that_would_make_another_node_lose_a_record_says_so_and_asks_first(tmp_path):
    """B's database is on "another machine": A's repair cannot read it. It names B and the record, refuses
    without an answer, and once told yes, B hears at its next open that it holds a change the log lost; B's own
    repair then rebuilds it, and both nodes agree."""
    a, b, shared = _fleet(tmp_path)
    _write_on(b.root, 12)
    peer_file = next(p for p in (shared / "nodes").glob("*.json") if json.loads(p.read_text())["home"] == str(b.root))
    data = json.loads(peer_file.read_text())
    peer_file.write_text(json.dumps(data | {"host": "another-machine"}))
    start, end, seq = middle_page_create(shared / "pages.log")
    flip(shared / "pages.log", start + HEADER_SIZE + 40)
    before = (shared / "pages.log").read_bytes()

    res = cli(a.root, "log", "repair")
    assert res.exit_code == 1 and "other node" in res.stderr and "pass --yes" in res.stderr
    assert "From B 6" in res.stdout and "another machine" in res.stdout
    assert (shared / "pages.log").read_bytes() == before       # asked first: nothing changed
    out = json.loads(ok(cli(a.root, "log", "repair", "--yes", "--json")))
    assert out["records_lost"] == 1

    with Node.open(b) as nb:
        assert nb.damage is not None and nb.damage.kind == "diverged"
        assert "From B 6" in str(nb.damage) and "page.create" in str(nb.damage)
    res = cli(b.root, "page", "create", "ENG", "Refused On B")
    assert res.exit_code == 1 and "crewlet log repair" in res.stderr
    fixed = json.loads(ok(cli(b.root, "log", "repair", "--yes", "--json")))
    assert fixed["rebuilt"] and [c["what"] for c in fixed["lost"]] == ["ENG/From B 6"]
    with Node.open(a) as na, Node.open(b) as nb:
        assert na.damage is None and nb.damage is None
        assert content_digest(na.conn).content == content_digest(nb.conn).content
    ok(cli(b.root, "page", "create", "ENG", "Written After"))


def test_a_process_that_had_the_log_open_follows_the_repair(tmp_path):
    """A node open while another process repairs the log (the app left open) moves to the new file: it applies
    what the repair wrote and its next write lands on the repaired log."""
    a, b, shared = _fleet(tmp_path)
    _write_on(b.root, 6)
    start, end, seq = middle_page_create(shared / "pages.log")
    with Node.open(a) as open_a:
        assert open_a.applied_seq() >= seq
        flip(shared / "pages.log", start + HEADER_SIZE + 40)
        ok(cli(b.root, "log", "repair", "--yes"))
        open_a.catch_up()
        assert open_a.damage is None
        KnowledgeBase(open_a).create_page("ENG", "After Repair On A", "x")
    assert "After Repair On A" in titles(b.root)
    assert [q for _, _, q, _ in frames(shared / "pages.log")] == list(range(1, len(frames(shared / "pages.log")) + 1))


def test_the_vector_log_is_repaired_the_same_way_and_a_lost_vector_put_given_back(home, tmp_path):
    import numpy as np

    from core.vectors import records as vectors

    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        ids = [kb.create_page("ENG", f"P{i}", "x").id for i in range(5)]
        node.submit_vectors([vectors.put_record(pid, "test-space", "ENG", 1, f"d{i}", 10, 0,
                                                np.arange(8, dtype="float32") + i) for i, pid in enumerate(ids)])
    start, end, seq, _ = frames(home.vectors_log_file)[2]
    flip(home.vectors_log_file, start + HEADER_SIZE + 30)
    log = json.loads(cli(home.root, "log", "check", "--json").stdout)["logs"][1]
    [spot] = log["spots"]
    assert spot["seqs"] == [seq] and spot["rewrites"][0]["what"] == "vector.put of ENG/P2 (test-space)"
    out = json.loads(ok(cli(home.root, "log", "repair", "--yes", "--json")))
    assert out["records_lost"] == 0 and not out["rebuilt"]
    replayed = replica(home, tmp_path / "replay")
    shutil.copy2(home.vectors_log_file, replayed.vectors_log_file)
    with Node.open(home) as live, Node.open(replayed) as fresh:
        for t in ("vectors", "vector_codes"):
            assert table_rows(fresh.conn, t) == table_rows(live.conn, t)
