"""Where the log and the database meet: damage is detected (by the live home as by a replay), named,
refused, and repaired by `crewlet log check` / `crewlet log repair` without deleting a byte.

Reproductions of issue 9, items 1–3: an applied last frame cut or flipped, a bit flipped mid-log,
a duplicated frame. Each ran wrong before: a "torn tail" cut into applied records, a replay that
rolled back every good record, a live home that went on writing past a repeated seq."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import REPLAYED_TABLES, table_rows
from typer.testing import CliRunner

from core.config import load_node
from core.log import FileLog, LogCorrupt, LogDamage, LogGap, Record
from core.log.check import cut_aside, inspect
from core.log.framing import HEADER_SIZE, Applied, encode_frame
from core.node import Node
from core.pages import applier
from core.pages.service import KnowledgeBase
from core.paths import Home
from core.store import connect
from crewlet_tui.cli import app

ENV = {"CREWLET_HOME": None, "CREWLET_AS": None, "COLUMNS": "200"}


# -- helpers -------------------------------------------------------------------------------------------

def cli(home: Home, *args: str):
    return CliRunner().invoke(app, ["--home", str(home.root), *args], env=ENV)


def one_line_refusal(res, *words: str) -> str:
    assert res.exit_code == 1, (res.exit_code, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crewlet: "), res.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def create_pages(home: Home, *titles: str) -> list[str]:
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        return [kb.create_page("ENG", t, f"# {t}\n\nabout {t}\n").id for t in titles]


def frames(path: Path) -> list[tuple[int, int, int]]:
    """(start, end, seq) of every frame of a sound log."""
    out, start = [], 0
    with FileLog(path) as flog:
        for rec, end in flog.read():
            out.append((start, end, rec.seq))
            start = end
    return out


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x10
    path.write_bytes(bytes(data))


def titles(home: Home) -> set[str]:
    with Node.open(home, sync_containers=False) as node:
        return {r[0] for r in node.conn.execute("SELECT title FROM pages")}


def replica(home: Home, root: Path) -> Home:
    """A fresh node's home: the same company.toml and a copy of the log, no database."""
    dst = Home(root)
    dst.log_file.parent.mkdir(parents=True)
    shutil.copy2(home.config_file, dst.config_file)
    shutil.copy2(home.log_file, dst.log_file)
    return dst


def assert_replay_equals_live(home: Home, scratch: Path) -> None:
    fresh = replica(home, scratch)
    with Node.open(home, sync_containers=False) as live, Node.open(fresh, sync_containers=False) as replayed:
        assert live.damage is None and replayed.damage is None
        for t in REPLAYED_TABLES:
            assert table_rows(replayed.conn, t) == table_rows(live.conn, t), t


def aside_files(home: Home) -> list[Path]:
    return sorted(home.log_file.parent.glob("pages.log.damaged-*"))


# -- 1. an applied last frame, cut or flipped -----------------------------------------------------------

@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_a_damaged_last_frame_the_database_applied_is_damage_not_a_torn_tail(home, tmp_path, damage):
    create_pages(home, "P1", "P2", "P3")
    start, end, last = frames(home.log_file)[-1]
    if damage == "truncate":
        os.truncate(home.log_file, end - 10)         # `truncate -s -10 log/pages.log`
    else:
        flip(home.log_file, start + HEADER_SIZE + 7)  # one bit inside the last frame's body
    damaged = home.log_file.read_bytes()

    # every write is refused, with the damage and the command that repairs it; nothing is appended
    for title in ("P4", "P5"):
        one_line_refusal(cli(home, "page", "create", "ENG", title), "damaged", "crewlet log repair", f"seq {last}")
        assert home.log_file.read_bytes() == damaged
    assert titles(home) >= {"P1", "P2", "P3"} and not titles(home) & {"P4", "P5"}
    # reads still work, and say the home cannot be written
    res = cli(home, "page", "show", "ENG/P1")
    assert res.exit_code == 0 and "damaged" in res.stderr and "P1" in res.stdout

    # check names the damage and what a repair costs: the applied record the log no longer holds is given
    # back by the database that applied it (issue 19: it used to be cut away, and P3 lost)
    res = cli(home, "log", "check")
    assert res.exit_code == 1 and "damaged" in res.stdout
    assert f"seq {last} (page.create ENG/P3): given back by this node's database" in res.stdout
    one_line_refusal(res, "pages log damaged", f"byte offset {start:,}", f"past record {last - 1}")
    data = json.loads(cli(home, "log", "check", "--json").stdout)
    log = data["logs"][0]
    # a frame cut short is records missing at the end; a whole frame whose checksum fails is a damaged frame
    # (issue 34: either way damage, never an interrupted append)
    assert (data["ok"], log["damage"]["kind"], log["damage"]["offset"], log["valid_prefix_end"]) == (
        False, "cut" if damage == "truncate" else "corrupt", start, start)
    [spot] = log["spots"]
    assert (spot["seqs"], spot["records_lost"], spot["records_given_back"]) == ([last], 0, 1)
    assert log["lost_if_repaired"] == [] and log["records_lost"] == 0

    # repair: the log written anew with P3 given back, the damaged file kept whole, the database kept
    res = cli(home, "log", "repair", "--yes")
    assert res.exit_code == 0, res.stderr
    assert "rebuilt" not in res.stdout and "sound" in res.stdout and "records lost: 0" in res.stdout
    [aside] = aside_files(home)
    assert aside.read_bytes() == damaged
    assert not list(home.root.glob("crewlet.db.before-repair-*"))
    assert {"P1", "P2", "P3"} <= titles(home)

    # the next two writes take the next seqs, and a fresh replay is the live database
    for title in ("P4", "P5"):
        assert cli(home, "page", "create", "ENG", title).exit_code == 0
    assert [s for _, _, s in frames(home.log_file)][-3:] == [last, last + 1, last + 2]
    assert {"P1", "P2", "P3", "P4", "P5"} <= titles(home)
    assert_replay_equals_live(home, tmp_path / "replay")


def test_a_log_cut_and_written_again_under_the_database_is_a_mismatch(home, tmp_path):
    """What the old code left behind: the last applied frame cut off, and the same seq written again
    for another record — a different record at the very offset and seq the database applied."""
    create_pages(home, "P1", "P2", "P3")
    start, _, last = frames(home.log_file)[-1]
    os.truncate(home.log_file, start)
    other = Record.new("page.create", "alex", {"page_id": "0123456789abcdef", "container": "ENG", "title": "PX",
                                               "body": "# PX\n\nabout PX\n", "parent_id": None},
                       node=load_node(home.node_file).node_id)  # as this node writes it: the same frame size
    with open(home.log_file, "ab") as fh:
        fh.write(encode_frame(last, other.body()))
    with Node.open(home) as node:
        assert node.damage is not None and node.damage.kind == "mismatch"
        with pytest.raises(LogDamage):
            KnowledgeBase(node).create_page("ENG", "P4", "")
    data = json.loads(cli(home, "log", "check", "--json").stdout)["logs"][0]
    assert data["damage"] is None and data["database_disagrees"]["kind"] == "mismatch"
    assert [c["what"] for c in data["lost_if_repaired"]] == ["ENG/P3"]
    assert cli(home, "log", "repair", "--yes").exit_code == 0
    assert not aside_files(home)  # the log itself was sound: nothing to move
    assert "PX" in titles(home) and "P3" not in titles(home)
    assert_replay_equals_live(home, tmp_path / "replay")


# -- 2. a bit flipped mid-log ----------------------------------------------------------------------------

def test_a_mid_log_flip_refuses_writes_and_a_replay_applies_every_good_record_before_it(home, tmp_path):
    create_pages(home, *(f"P{i}" for i in range(1, 7)))
    fs = frames(home.log_file)
    start, end, bad = fs[len(fs) // 2]
    flip(home.log_file, start + HEADER_SIZE + 3)
    damaged = home.log_file.read_bytes()

    line = one_line_refusal(cli(home, "page", "create", "ENG", "Later"), "damaged", f"byte offset {start}",
                            f"seq {bad}", "crewlet log repair")
    assert home.log_file.read_bytes() == damaged

    # a fresh replay applies the valid prefix, commits it, and stops at the same damage
    fresh = replica(home, tmp_path / "fresh")
    with Node.open(fresh) as node:
        assert node.applied_seq() == bad - 1
        assert isinstance(node.damage, LogCorrupt) and node.damage.offset == start
        assert f"byte offset {start}" in line and str(node.damage).split(": ", 1)[1] in line
    # in small batches too: each committed batch stays, never rolled back
    conn = connect(tmp_path / "batches.db")
    with FileLog(home.log_file) as flog, pytest.raises(LogCorrupt):
        applier.catch_up(conn, flog, batch=3)
    assert applier.position(conn)[0] == bad - 1
    conn.close()

    res = cli(home, "log", "check", "--json")
    log = json.loads(res.stdout)["logs"][0]
    assert res.exit_code == 1 and log["damage"]["kind"] == "corrupt" and log["damage"]["seq"] == bad
    [spot] = log["spots"]
    assert spot["seqs"] == [bad] and log["records"] == len(fs) - 1  # every frame after it still verifies
    assert (spot["records_lost"], spot["records_given_back"]) == (0, 1)  # this database applied it: given back
    assert log["lost_if_repaired"] == []
    assert cli(home, "log", "repair", "--yes").exit_code == 0
    [aside] = aside_files(home)
    assert aside.read_bytes() == damaged
    assert cli(home, "page", "create", "ENG", "Later").exit_code == 0
    assert {f"P{i}" for i in range(1, 7)} | {"Later"} <= titles(home)
    assert_replay_equals_live(home, tmp_path / "replay")


# -- 3. a duplicated frame, a dropped one -------------------------------------------------------------------

@pytest.mark.parametrize("which", ["last", "middle"])
def test_a_duplicated_frame_is_damage_to_the_live_home_as_to_a_replay(home, tmp_path, which):
    create_pages(home, "P1", "P2", "P3", "P4")
    fs = frames(home.log_file)
    start, end, seq = fs[-1] if which == "last" else fs[len(fs) // 2]
    data = home.log_file.read_bytes()
    home.log_file.write_bytes(data[:end] + data[start:end] + data[end:])
    damaged = home.log_file.read_bytes()

    # the live home refuses (it used to skip the repeat unchecked and go on writing)
    one_line_refusal(cli(home, "page", "create", "ENG", "Next"), "damaged", "crewlet log repair")
    assert home.log_file.read_bytes() == damaged
    # a replay stops at the repeat, having applied everything before it
    with Node.open(replica(home, tmp_path / "fresh")) as node:
        assert isinstance(node.damage, LogGap) and node.damage.kind == "repeat"
        assert node.damage.offset == end and node.applied_seq() == seq
    log = json.loads(cli(home, "log", "check", "--json").stdout)["logs"][0]
    assert (log["damage"]["kind"], log["damage"]["offset"], log["damage"]["seq"]) == ("repeat", end, seq)
    assert cli(home, "log", "repair", "--yes").exit_code == 0
    assert cli(home, "page", "create", "ENG", "Next").exit_code == 0
    assert_replay_equals_live(home, tmp_path / "replay")


def test_a_dropped_frame_is_a_gap(home, tmp_path):
    create_pages(home, "P1", "P2", "P3", "P4")
    fs = frames(home.log_file)
    start, end, seq = fs[len(fs) // 2]
    data = home.log_file.read_bytes()
    home.log_file.write_bytes(data[:start] + data[end:])
    one_line_refusal(cli(home, "page", "create", "ENG", "Next"), "damaged")
    with Node.open(replica(home, tmp_path / "fresh")) as node:
        assert isinstance(node.damage, LogGap) and node.damage.kind == "gap" and node.applied_seq() == seq - 1
        assert f"seq {seq} missing" in str(node.damage)


# -- what is not damage ----------------------------------------------------------------------------------------

def test_an_interrupted_append_past_everything_applied_is_still_cut_quietly(home):
    create_pages(home, "P1")
    sound = home.log_file.read_bytes()
    rec = Record.new("page.create", "alex", {"page_id": "feedfacefeedface", "container": "ENG", "title": "Torn",
                                             "body": "never finished", "parent_id": None})
    with open(home.log_file, "ab") as fh:
        fh.write(encode_frame(frames(home.log_file)[-1][2] + 1, rec.body())[:25])
    res = cli(home, "log", "check")
    assert res.exit_code == 0 and "interrupted append of 25 bytes" in res.stdout
    assert cli(home, "page", "create", "ENG", "P2").exit_code == 0
    assert home.log_file.read_bytes().startswith(sound) and "Torn" not in titles(home)


def test_a_position_stored_before_digests_is_checked_by_a_scan_and_given_its_digest(home):
    create_pages(home, "P1", "P2")
    conn = connect(home.db_file)
    conn.execute("UPDATE log_position SET frame_offset = NULL, digest = NULL")
    conn.close()
    with Node.open(home) as node:
        assert node.damage is None
        applied = applier.applied_position(node.conn)
        assert applied.start == frames(home.log_file)[-1][0] and applied.digest
    # and a legacy position that no frame ends at is damage
    conn = connect(home.db_file)
    conn.execute("UPDATE log_position SET frame_offset = NULL, digest = NULL, byte_offset = byte_offset - 3")
    conn.close()
    with Node.open(home) as node:
        assert node.damage is not None and node.damage.kind == "mismatch"


# -- the commands ------------------------------------------------------------------------------------------------

def test_log_check_on_a_sound_home(home):
    create_pages(home, "P1")
    res = cli(home, "log", "check")
    assert res.exit_code == 0 and "sound" in res.stdout and not res.stderr
    data = json.loads(cli(home, "log", "check", "--json").stdout)
    log = data["logs"][0]
    assert data["ok"] is True and log["damage"] is None and log["database_disagrees"] is None
    assert log["records"] == log["last_seq"] == log["applied"]["seq"] and log["bytes"] == log["valid_prefix_end"]
    res = cli(home, "log", "repair")
    assert res.exit_code == 0 and "nothing to repair" in res.stdout


def test_log_repair_asks_first_and_changes_nothing_unless_told(home):
    create_pages(home, "P1", "P2")
    os.truncate(home.log_file, home.log_file.stat().st_size - 5)
    damaged = home.log_file.read_bytes()
    db = home.db_file.read_bytes()
    one_line_refusal(cli(home, "log", "repair"), "pass --yes")             # not a terminal: never guesses
    res = CliRunner().invoke(app, ["--home", str(home.root), "log", "repair", "--json"], env=ENV)
    assert res.exit_code == 1 and json.loads(res.stdout.splitlines()[0])["error"] == "confirm"
    assert home.log_file.read_bytes() == damaged and home.db_file.read_bytes() == db and not aside_files(home)
    res = cli(home, "log", "repair", "--yes", "--json")
    out = json.loads(res.stdout)
    assert res.exit_code == 0 and out["repaired"] and out["ok"] and not out["rebuilt"]
    assert out["lost"] == [] and out["records_lost"] == 0
    assert [(r["how"], r["what"]) for r in out["rewritten"]] == [("recovered", "page.create ENG/P2")]


def test_log_commands_have_help():
    for args in (["log", "--help"], ["log", "check", "--help"], ["log", "repair", "--help"]):
        res = CliRunner().invoke(app, args, env=ENV)
        assert res.exit_code == 0 and "Usage" in res.stdout


# -- any log, any position --------------------------------------------------------------------------------------

def test_check_and_cut_work_on_any_log_and_the_position_stored_for_it(tmp_path):
    """Another log (a vectors log, say) with its own position: the same checks, the same repair."""
    path = tmp_path / "log" / "vectors.log"
    with FileLog(path) as flog:
        flog.append([Record.new("vector.put", "crewlet", {"i": i}) for i in range(6)])
    fs = frames(path)
    start, end, seq = fs[3]
    with FileLog(path, readonly=True) as flog:
        frame = flog.frame_at(start)
        from core.log.framing import frame_digest

        applied = Applied(seq, end, start, frame_digest(frame.body))
        assert flog.locate(applied).seq == seq
        assert inspect(flog, applied).sound
    flip(path, fs[4][0] + HEADER_SIZE + 2)  # past the position: damage, but nothing applied is lost
    damaged = path.read_bytes()
    with FileLog(path, readonly=True) as flog:
        health = inspect(flog, applied)
        assert health.damage is not None and health.end == fs[4][0] and not health.applied_past_cut
        moved = cut_aside(flog, health.end, tmp_path / "aside", expect_size=health.size)
    assert moved == len(damaged) - fs[4][0]
    assert path.read_bytes() + (tmp_path / "aside").read_bytes() == damaged
    with FileLog(path) as flog:  # the kept prefix is a log that takes appends again
        assert flog.append([Record.new("vector.put", "crewlet", {"i": 9})])[0].seq == 5


def test_checking_a_home_with_no_database_yet_creates_none(home, tmp_path):
    create_pages(home, "P1")
    fresh = replica(home, tmp_path / "fresh")
    res = cli(fresh, "log", "check", "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["logs"][0]["applied"]["seq"] == 0
    assert not fresh.db_file.exists()
