"""Damage at the edges of the file log that cost an intact record (issue 34), with the database deleted (the
case where no database can give a record back, so only the log's own bytes decide).

Reproductions: two adjacent frames swapped — check reported seq 80 missing and another record claiming 80, and
repair tombstoned 80 though its intact frame lay right after 81 (101 of 102 pages). A damaged last frame was taken
for an interrupted append — `log check` said sound and the next write cut it with a warning, one acknowledged
record silently lost. Now the swapped frames are put back in their places, and a whole last frame whose
checksum fails is damage: named by check, refused by a write, never cut."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from core.log import FileLog
from core.log.framing import HEADER_SIZE, encode_frame
from core.log.record import Record
from core.node import Node
from core.pages.service import KnowledgeBase
from core.paths import Home
from crewlet_tui.cli import app

ENV = {"CREWLET_HOME": None, "CREWLET_AS": None, "COLUMNS": "250"}


def cli(home: Home, *args: str):
    return CliRunner().invoke(app, ["--home", str(home.root), *args], env=ENV)


def ok(res) -> str:
    assert res.exit_code == 0, (res.stdout, res.stderr)
    return res.stdout


def frames(path: Path) -> list[tuple[int, int, int, bytes]]:
    """(start, end, seq, body) of every frame of a sound log."""
    out = []
    with FileLog(path, readonly=True) as flog:
        for frame in flog.frames(0):
            out.append((frame.offset, frame.end, frame.seq, frame.body))
    return out


def pages(home: Home, n: int) -> None:
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        for i in range(n):
            kb.create_page("ENG", f"Runbook {i}", f"# Runbook {i}\n\nsteps for service {i}\n")


def drop_database(home: Home) -> None:
    for side in ("", "-wal", "-shm"):
        Path(f"{home.db_file}{side}").unlink(missing_ok=True)


def titles(home: Home) -> set[str]:
    with Node.open(home, sync_containers=False) as node:
        assert node.damage is None, node.damage
        return {r[0] for r in node.conn.execute("SELECT title FROM pages")}


def test_two_swapped_frames_are_put_back_in_their_places_and_no_record_is_lost(home):
    pages(home, 100)
    fs = frames(home.log_file)
    i = len(fs) - 20
    (a_start, a_end, a_seq, a_body), (b_start, b_end, b_seq, b_body) = fs[i], fs[i + 1]
    data = home.log_file.read_bytes()
    home.log_file.write_bytes(data[:a_start] + data[b_start:b_end] + data[a_start:a_end] + data[b_end:])
    drop_database(home)

    res = cli(home, "log", "check", "--json")
    assert res.exit_code == 1
    log = json.loads(res.stdout)["logs"][0]
    kinds = [(s["kind"], s["seqs"], s["copy_of"]) for s in log["spots"]]
    assert kinds == [("gap", [a_seq], None), ("displaced", [], a_seq)], kinds
    assert log["records_lost"] == 0
    [rewrite] = log["spots"][0]["rewrites"]
    assert rewrite["how"] == "found" and rewrite["what"].startswith("page.create ENG/Runbook")
    out = cli(home, "log", "check").stdout
    assert f"seq {a_seq} (page.create ENG/Runbook" in out and "out of its place" in out
    assert "losing 0 records" in out

    repaired = json.loads(ok(cli(home, "log", "repair", "--yes", "--json")))
    assert repaired["records_lost"] == 0
    after = frames(home.log_file)
    assert [q for _, _, q, _ in after] == list(range(1, len(after) + 1))
    assert after[a_seq - 1][3] == a_body and after[b_seq - 1][3] == b_body    # the very records, in their places
    assert titles(home) == {f"Runbook {i}" for i in range(100)}
    assert ok(cli(home, "log", "check"))


def test_swapped_frames_the_database_applied_cost_nothing_either(home):
    pages(home, 30)
    fs = frames(home.log_file)
    i = len(fs) // 2
    (a_start, a_end, a_seq, a_body), (b_start, b_end, _, _) = fs[i], fs[i + 1]
    data = home.log_file.read_bytes()
    home.log_file.write_bytes(data[:a_start] + data[b_start:b_end] + data[a_start:a_end] + data[b_end:])
    repaired = json.loads(ok(cli(home, "log", "repair", "--yes", "--json")))
    assert repaired["records_lost"] == 0 and not repaired["rebuilt"]
    assert frames(home.log_file)[a_seq - 1][3] == a_body
    assert titles(home) == {f"Runbook {i}" for i in range(30)}
    assert cli(home, "page", "create", "ENG", "After").exit_code == 0


# where, inside the last frame, one bit is flipped: its body, its seq, its magic, its length
DAMAGE = {"body": lambda start, end: start + HEADER_SIZE + 30, "seq": lambda start, end: start + 15,
          "magic": lambda start, end: start + 1, "length": lambda start, end: start + 7,
          "last byte": lambda start, end: end - 1}


@pytest.mark.parametrize("where", list(DAMAGE))
def test_a_damaged_last_frame_with_the_database_gone_is_damage_not_a_torn_tail(home, where):
    pages(home, 5)
    start, end, last, body = frames(home.log_file)[-1]
    data = bytearray(home.log_file.read_bytes())
    data[DAMAGE[where](start, end)] ^= 0x10
    home.log_file.write_bytes(bytes(data))
    damaged = home.log_file.read_bytes()
    drop_database(home)

    res = cli(home, "log", "check", "--json")
    assert res.exit_code == 1, res.stdout
    log = json.loads(res.stdout)["logs"][0]
    [spot] = log["spots"]
    assert (spot["kind"], spot["seqs"], spot["offset"]) == ("corrupt", [last], start), spot
    assert log["torn_tail_bytes"] == 0
    # a write refuses in one line and cuts nothing
    res = cli(home, "page", "create", "ENG", "Would Cut It")
    assert res.exit_code == 1 and "damaged" in res.stderr, (res.stdout, res.stderr)
    assert len(res.stderr.strip().splitlines()) == 1
    assert home.log_file.read_bytes() == damaged
    # the repair keeps the damaged file whole and puts a tombstone at its seq: said, not silent
    repaired = json.loads(ok(cli(home, "log", "repair", "--yes", "--json")))
    assert repaired["records_lost"] == 1
    after = frames(home.log_file)
    assert [q for _, _, q, _ in after] == list(range(1, last + 1))
    assert Record.from_body(after[-1][3], last).type == "log.lost"


def test_an_append_whose_last_bytes_never_landed_is_still_an_interrupted_append(home):
    """After a power loss a file can be as long as the append made it, its last blocks zeros: no record was
    acknowledged there (the append had not been synced), and it is cut as before."""
    pages(home, 2)
    sound = home.log_file.read_bytes()
    rec = Record.new("page.create", "alex", {"page_id": "feedfacefeedface", "container": "ENG", "title": "Torn",
                                             "body": "x" * 5000, "parent_id": None})
    frame = encode_frame(frames(home.log_file)[-1][2] + 1, rec.body())
    with open(home.log_file, "ab") as fh:
        fh.write(frame[:HEADER_SIZE + 100] + b"\0" * (len(frame) - HEADER_SIZE - 100))
    res = cli(home, "log", "check")
    assert res.exit_code == 0 and "interrupted append" in res.stdout, res.stdout
    assert cli(home, "page", "create", "ENG", "Next").exit_code == 0
    assert home.log_file.read_bytes().startswith(sound) and "Torn" not in titles(home)


def test_an_append_with_a_hole_of_zeros_inside_it_is_still_an_interrupted_append(home):
    """Pages of an unsynced append can reach the disk out of order: its last bytes landed (the body ends in `}`)
    but a page inside it is zeros. No record was acknowledged there, so it is cut as a torn tail, not called
    damage that would refuse the node until a repair (a review of the whole-frame check found this)."""
    pages(home, 2)
    sound = home.log_file.read_bytes()
    rec = Record.new("page.create", "alex", {"page_id": "feedfacefeedfac0", "container": "ENG", "title": "Holed",
                                             "body": "x" * 9000, "parent_id": None})
    frame = encode_frame(frames(home.log_file)[-1][2] + 1, rec.body())
    holed = frame[:HEADER_SIZE + 1000] + b"\0" * 4096 + frame[HEADER_SIZE + 1000 + 4096:]
    assert len(holed) == len(frame) and holed.endswith(b"}")
    with open(home.log_file, "ab") as fh:
        fh.write(holed)
    res = cli(home, "log", "check")
    assert res.exit_code == 0 and "interrupted append" in res.stdout, res.stdout
    assert cli(home, "page", "create", "ENG", "Next").exit_code == 0
    assert home.log_file.read_bytes().startswith(sound) and "Holed" not in titles(home)
