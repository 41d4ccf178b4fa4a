"""The write path of issue 14: a writer applies the records it just appended from the frames in memory (and
reads the log only for what it does not hold), catch_up transactions span several chunks and end on time,
and the fast outcome text is json.dumps' text. Every case is checked against a replay of the same log."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
from conftest import (REPLAYED_TABLES, OneAtATime, create_rec, move_rec, new_home, pid, rec, restore_rec, save_rec, table_rows,
                      trash_rec)

from core.log import FileLog, Record
from core.node import Node
from core.pages import applier
from core.replica import appliers, engine
from core.store import connect, transaction


def _replay(log_path, db_path, *, one_at_a_time: bool = False, **kw) -> dict[str, list[tuple]]:
    conn = connect(db_path)
    with FileLog(log_path, readonly=True) as flog:
        engine.catch_up(conn, flog, OneAtATime() if one_at_a_time else applier.PAGES, **kw)
    rows = {t: table_rows(conn, t) for t in REPLAYED_TABLES}
    conn.close()
    return rows


def _mixed(n_pages: int = 6) -> list[Record]:
    ids = [pid() for _ in range(n_pages)]
    out = [create_rec("ENG", f"Page {i}", f"body {i}", page_id=p) for i, p in enumerate(ids)]
    out += [save_rec(p, f"body {i} again", 1) for i, p in enumerate(ids)]
    out += [save_rec(ids[0], "stale", 1), move_rec(ids[1], ids[0]), trash_rec(ids[2]), restore_rec(ids[2]),
            rec("page.rename", page_id=ids[3], title="Page 4"),                     # title_taken
            rec("comment.add", comment_id=pid(), page_id=ids[4], body="a remark"),
            rec("page.labels", page_id=ids[5], labels=["Ops", "ü"]),
            rec("knowledge.read", via="search", pages=[{"title": "x", "id": ids[0], "rank": 1}], query="q")]
    return out


def test_append_frames_are_the_frames_a_reader_reads(tmp_path):
    with FileLog(tmp_path / "pages.log") as flog:
        flog.append([create_rec("ENG", "First")])
        written = flog.append_frames(_mixed(), sync=False)
        on_disk = list(flog.frames(0))[1:]
    assert [f for _, f in written] == on_disk
    assert [r.seq for r, _ in written] == [f.seq for f in on_disk] == list(range(2, 2 + len(on_disk)))
    assert [Record.from_body(f.body, f.seq) for f in on_disk] == [r for r, _ in written]


def test_the_writer_applies_its_own_frames_as_a_replay_of_the_file_does(tmp_path):
    home = new_home(tmp_path / "home")
    with Node.open(home) as node:
        records = _mixed()
        outs = node.submit(records[:9]) + node.submit(records[9:])
        assert [o.op_id for o in outs] == [r.op_id for r in records]
        assert {o.code for o in outs if o.status == "refused"} == {"stale_revision", "title_taken"}
        live = {t: table_rows(node.conn, t) for t in REPLAYED_TABLES}
    assert _replay(home.log_file, tmp_path / "replay.db") == live


def test_a_writer_behind_the_log_reads_what_another_process_appended_before_its_own(tmp_path):
    home = new_home(tmp_path / "home")
    with Node.open(home) as node:
        page = pid()
        node.submit([create_rec("ENG", "Shared", "one", page_id=page)])
        # another process appends a save and a create; this node has applied neither
        with FileLog(home.log_file) as other:
            other.append([save_rec(page, "two", 1), create_rec("ENG", "Theirs")])
        mine = [save_rec(page, "three", 1), save_rec(page, "three", 2), create_rec("ENG", "Theirs")]
        outs = node.submit(mine)
        # theirs applied first, in log order: my base-1 save is stale, my create's title is taken
        assert [(o.status, o.code) for o in outs] == [("refused", "stale_revision"), ("applied", None),
                                                      ("refused", "title_taken")]
        assert node.conn.execute("SELECT body, revision FROM pages WHERE id = ?", (page,)).fetchone()[:] == ("three", 3)
        live = {t: table_rows(node.conn, t) for t in REPLAYED_TABLES}
    assert _replay(home.log_file, tmp_path / "replay.db") == live


def test_records_another_process_applied_first_are_answered_from_the_table(tmp_path):
    home = new_home(tmp_path / "home")
    with Node.open(home) as node, Node.open(home) as other:
        other_records = [create_rec("ENG", "One")]
        other.submit(other_records)
        records = [create_rec("ENG", "Two"), create_rec("ENG", "One")]
        written = node.log.append_frames(node._stamped(records))
        # the other node applies everything, ours included, before we do
        other.catch_up()
        decided: dict = {}
        assert applier.catch_up(node.conn, node.log, outcomes=decided, appended=written) == 0
        assert decided == {}
        assert [appliers.outcome_of(node.conn, r.op_id).status for r in records] == ["applied", "refused"]


def test_transactions_of_several_chunks_that_end_on_time_give_the_same_rows(tmp_path, monkeypatch):
    records = _mixed(12)
    bad = rec("page.create", page_id=pid(), container="ENG", title="Bad", body="x", message=["not", "text"])
    records[15:15] = [bad]                                                         # malformed, mid-log
    with FileLog(tmp_path / "pages.log") as flog:
        flog.append(records, sync=False)
    one = _replay(tmp_path / "pages.log", tmp_path / "one.db", one_at_a_time=True)
    assert _replay(tmp_path / "pages.log", tmp_path / "default.db") == one

    monkeypatch.setattr(engine, "CHUNK_RECORDS", 4)
    commits: list[int] = []
    conn = connect(tmp_path / "chunks.db")
    with FileLog(tmp_path / "pages.log", readonly=True) as flog:
        decided: dict = {}
        assert applier.catch_up(conn, flog, batch=10, progress=commits.append, outcomes=decided) == len(records)
    assert commits == [10, 10, 10, len(records) - 30]
    assert decided[bad.op_id].code == "malformed"
    assert {t: table_rows(conn, t) for t in REPLAYED_TABLES} == one
    conn.close()

    # a transaction that ends on time (here: after every chunk) leaves the rest to the next one
    monkeypatch.setattr(engine, "TXN_SECONDS", 0.0)
    commits.clear()
    conn = connect(tmp_path / "timed.db")
    with FileLog(tmp_path / "pages.log", readonly=True) as flog:
        assert applier.catch_up(conn, flog, progress=commits.append) == len(records)
    assert commits == [4] * (len(records) // 4) + ([len(records) % 4] if len(records) % 4 else [])
    assert {t: table_rows(conn, t) for t in REPLAYED_TABLES} == one
    conn.close()


def test_damage_after_several_chunks_keeps_every_good_record_before_it(tmp_path, monkeypatch):
    from core.log import LogCorrupt
    from core.log.framing import HEADER_SIZE
    records = _mixed(10)
    with FileLog(tmp_path / "pages.log") as flog:
        written = flog.append_frames(records, sync=False)
    bad = written[13][1]
    data = bytearray((tmp_path / "pages.log").read_bytes())
    data[bad.offset + HEADER_SIZE + 2] ^= 0xFF
    (tmp_path / "pages.log").write_bytes(bytes(data))
    monkeypatch.setattr(engine, "CHUNK_RECORDS", 3)
    conn = connect(tmp_path / "x.db")
    with FileLog(tmp_path / "pages.log", readonly=True) as flog, pytest.raises(LogCorrupt):
        applier.catch_up(conn, flog)
    assert applier.position(conn)[0] == bad.seq - 1
    assert conn.execute("SELECT count(*) FROM applied_ops").fetchone()[0] == bad.seq - 1


@pytest.mark.parametrize("result", [
    {"page_id": "0123456789abcdef", "revision": 1, "warnings": []},
    {"page_id": "p", "revision": 2, "old_title": "Ünïcode \"quoted\" \\ \n\t\u2028 ☃ 𝄞"},
    {"page_id": "p", "parent_id": None},
    {"comment_id": "c", "page_id": "p"},
    {"page_id": "p", "labels": ["ops", "ü"]},
    {"page_id": "p", "warnings": [{"code": "pages_parent_salvaged", "message": "m"}]},
    {"n": True, "m": False, "f": 1.5, "big": 2 ** 70, "neg": -3},
    {1: "int key"},
    {"key": "value", "empty": {}},
])
def test_the_fast_outcome_text_is_json_dumps_text(result):
    assert appliers._result_json(result) == json.dumps(result)


def test_outcomes_stored_by_the_batch_are_the_outcomes_stored_one_at_a_time(tmp_path):
    records = [replace(r, seq=i + 1) for i, r in enumerate(_mixed())]
    one, many = connect(tmp_path / "one.db"), connect(tmp_path / "many.db")
    with transaction(one):
        for r in records:
            applier.apply_record(one, r)
    with transaction(many):
        applier.apply_batch(many, records)
    assert table_rows(one, "applied_ops") == table_rows(many, "applied_ops")
    stored = {r[0]: r[6] for r in table_rows(many, "applied_ops")}
    for r in records:
        out = appliers.outcome_of(many, r.op_id)
        assert stored[r.op_id] == (json.dumps(out.result) if out.result else None)


def test_a_purged_id_is_refused_in_the_chunk_that_purged_it_and_in_any_later_one(tmp_path, monkeypatch):
    from conftest import purge_rec
    gone, other = pid(), pid()
    records = [create_rec("ENG", "Gone", page_id=gone), trash_rec(gone), purge_rec(gone),
               create_rec("ENG", "Back", page_id=gone),                 # same chunk as the purge
               create_rec("ENG", "Other", page_id=other),
               create_rec("ENG", "Later", page_id=gone)]                # a later chunk: deleted_pages holds it
    with FileLog(tmp_path / "pages.log") as flog:
        flog.append(records, sync=False)
    one = _replay(tmp_path / "pages.log", tmp_path / "one.db", one_at_a_time=True)
    monkeypatch.setattr(engine, "CHUNK_RECORDS", 5)
    conn = connect(tmp_path / "x.db")
    with FileLog(tmp_path / "pages.log", readonly=True) as flog:
        decided: dict = {}
        applier.catch_up(conn, flog, outcomes=decided)
    assert [decided[r.op_id].code for r in records] == [None, None, None, "purged", None, "purged"]
    assert {t: table_rows(conn, t) for t in REPLAYED_TABLES} == one


class _Text(str):
    pass


@pytest.mark.parametrize("payload, plain", [
    ({"page_id": "p", "container": "ENG", "title": "Ünï \x00 \u2028 𝄞", "body": "a\nb", "parent_id": None}, True),
    ({"page_id": "p", "base_revision": 3, "body": "x", "message": "m"}, True),
    ({"page_id": "p", "labels": ["ops", "ü"], "n": -2 ** 70, "f": -0.0, "g": 1e300, "b": False}, True),
    ({"page_id": "p", "labels": ("ops",)}, False),                   # a tuple: a list once decoded
    ({"page_id": _Text("p")}, False),                                # a str subclass: a str once decoded
    ({"page_id": "p", "pages": [{"title": "t", "id": "i"}]}, False),  # nested objects: key order differs
    ({"page_id": "p", "labels": [1, 2]}, False),
    ({"page_id": "p", "cutoff": {"at": 1}}, False),
])
def test_a_record_is_applied_from_memory_only_when_it_is_what_its_body_decodes_to(payload, plain):
    r = Record.new("page.create", "alex", payload, node="n1").at_seq(9)
    decoded = Record.from_body(r.body(), 9)
    assert engine._as_decoded(r) is plain
    if plain:
        assert decoded == r
        assert [(k, type(v)) for k, v in sorted(decoded.payload.items())] == \
               [(k, type(v)) for k, v in sorted(r.payload.items())]
    assert not engine._as_decoded(replace(r, actor=_Text("alex")))
    assert not engine._as_decoded(replace(r, at=True))


def test_records_that_are_not_what_they_decode_to_are_applied_as_decoded(tmp_path):
    home = new_home(tmp_path / "home")
    with Node.open(home) as node:
        page = pid()
        records = [create_rec("ENG", "Tupled", "x", page_id=page, labels=("Ops", "ops")),
                   rec("knowledge.read", via="search", pages=[{"title": "x", "id": page, "rank": 1}], query="q"),
                   rec("page.labels", page_id=page, labels=(_Text("Runbook"),))]
        assert not any(engine._as_decoded(r) for r in records)
        assert all(o.status == "applied" for o in node.submit(records))
        stored = node.conn.execute("SELECT pages FROM knowledge_reads").fetchone()[0]
        assert stored == json.dumps([{"id": page, "rank": 1, "title": "x"}])   # the decoded key order
        live = {t: table_rows(node.conn, t) for t in REPLAYED_TABLES}
    assert _replay(home.log_file, tmp_path / "replay.db") == live


def test_a_catch_up_in_many_transactions_leaves_the_log_knowing_its_end(tmp_path, monkeypatch):
    """The next append starts where the applier stopped reading rather than scanning the log again."""
    with FileLog(tmp_path / "pages.log") as flog:
        flog.append(_mixed(20), sync=False)
        size = flog.size()
    monkeypatch.setattr(engine, "CHUNK_RECORDS", 3)
    conn = connect(tmp_path / "x.db")
    with FileLog(tmp_path / "pages.log") as flog:
        assert (flog._end, flog._last) == (0, 0)
        n = applier.catch_up(conn, flog, batch=7)
        assert (flog._end, flog._last) == (size, n)
    # a reader that stops taking records mid-log (a transaction's end) teaches it as far as it read
    with FileLog(tmp_path / "pages.log") as flog:
        pairs = flog.read_frames(after=0, start_offset=0, exact=True)
        for _ in range(5):
            _, frame = next(pairs)
        pairs.close()
        assert (flog._end, flog._last) == (frame.end, 5)
