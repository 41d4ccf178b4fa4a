"""The batched applier decides exactly what the record-at-a-time applier decides: same outcomes, same rows,
including a malformed record in the middle of a batch (the batch is rolled back and applied again record by
record) and op_ids repeated inside one batch."""
from __future__ import annotations

from dataclasses import replace

from conftest import REPLAYED_TABLES, OneAtATime, create_rec, move_rec, pid, rec, restore_rec, save_rec, table_rows, trash_rec

from core.pages import applier
from core.replica import engine
from core.store import connect, transaction


def _mixed_log() -> list:
    a, b, c = pid(), pid(), pid()
    records = [
        create_rec("ENG", "Alpha", "one", page_id=a),
        create_rec("ENG", "alpha", "taken", page_id=pid()),          # title_taken
        create_rec("ENG", "Beta", "two", page_id=b, parent_id=a),
        create_rec("ENG", "Gamma", "x", page_id=c, parent_id="nope"),  # salvaged to the top
        save_rec(a, "one more", 1),
        save_rec(a, "stale", 1),                                       # stale_revision
        save_rec(a, "one more", 2),                                    # noop: unchanged
        move_rec(a, b),                                                # a cycle: left where it was
        rec("page.rename", page_id=b, title="Alpha"),                  # title_taken
        rec("page.create", page_id=pid(), container="ENG", title="Bad", body="x", message=["not", "text"]),  # malformed
        trash_rec(a),                                                  # has_children
        trash_rec(b), trash_rec(a), restore_rec(b),                    # parent_trashed
        rec("comment.add", comment_id="c1", page_id=c, body="hi"),
        rec("page.labels", page_id=c, labels=["Ops", "ops"]),
        rec("no.such.type"),
    ]
    dup = records[4]
    records.append(dup)  # the same op_id again, in the same batch: skipped
    return [replace(r, seq=i + 1) for i, r in enumerate(records)]


def test_batched_and_one_at_a_time_decide_the_same(tmp_path):
    records = _mixed_log()
    one = connect(tmp_path / "one.db")
    many = connect(tmp_path / "many.db")
    with transaction(one):
        singles = [o for o in (applier.apply_record(one, r) for r in records) if o is not None]
    with transaction(many):
        batched = applier.apply_batch(many, records)
    assert [(o.op_id, o.status, o.code, o.reason, o.result) for o in batched] == \
           [(o.op_id, o.status, o.code, o.reason, o.result) for o in singles]
    codes = [o.code for o in batched]
    for expected in ("title_taken", "stale_revision", "malformed", "has_children", "parent_trashed", "unknown_record"):
        assert expected in codes
    assert len(batched) == len(records) - 1  # the repeated op_id decided once
    for table in REPLAYED_TABLES:
        assert table_rows(one, table) == table_rows(many, table), table
    # nothing of the malformed create was kept
    assert many.execute("SELECT count(*) FROM pages WHERE title = 'Bad'").fetchone()[0] == 0


def test_a_batch_skips_what_an_earlier_batch_applied(tmp_path):
    records = _mixed_log()
    conn = connect(tmp_path / "x.db")
    with transaction(conn):
        first = applier.apply_batch(conn, records[:5])
    with transaction(conn):
        again = applier.apply_batch(conn, records)
    assert {o.op_id for o in first}.isdisjoint({o.op_id for o in again})
    assert len(first) + len(again) == len(records) - 1



def test_catch_up_applies_a_log_with_a_malformed_record_as_one_record_at_a_time_does(tmp_path):
    from core.log import FileLog
    records = _mixed_log()
    with FileLog(tmp_path / "pages.log") as flog:
        flog.append([replace(r, seq=0) for r in records], sync=False)
        fast = connect(tmp_path / "fast.db")
        slow = connect(tmp_path / "slow.db")
        decided: dict = {}
        assert applier.catch_up(fast, flog, batch=7, outcomes=decided) == len(records)
        assert engine.catch_up(slow, flog, OneAtATime(), batch=7) == len(records)
    for table in REPLAYED_TABLES:
        assert table_rows(fast, table) == table_rows(slow, table), table
    assert decided[records[9].op_id].code == "malformed"   # its batch was given up and applied carefully
