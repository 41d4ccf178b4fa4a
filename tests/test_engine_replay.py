"""Replaying the whole log into a fresh database gives the same rows."""
from __future__ import annotations

import shutil

import pytest
from conftest import DAY_MS, REPLAYED_TABLES, create_rec, move_rec, rec, table_rows

from core.errors import StaleRevision
from core.log import FileLog
from core.node import Node
from core.pages import applier
from core.pages.service import KnowledgeBase
from core.paths import Home
from core.store import connect


def _workload(kb: KnowledgeBase) -> None:
    node = kb.node
    ops = kb.create_page("ENG", "Ops", "")
    deploy = kb.create_page("ENG", "Deploy Runbook", "# Deploy\n\nsteps\n", parent=ops.id, message="first")
    rollback = kb.create_page("ENG", "Rollback", "see [deploy](#/knowledge/pages/%s)" % deploy.id)
    kb.create_page("PROD", "Roadmap", "q1", actor="sam", labels=["Plans"])
    kb.create_page("HOME", "Onboarding", "read me")
    kb.save_page(deploy.id, "# Deploy\n\nsteps, better\n", base_revision=1, actor="sam", message="clarified")
    with pytest.raises(StaleRevision):
        kb.save_page(deploy.id, "# Deploy\n\nmy stale edit\n", base_revision=1)  # a refused stale save
    kb.rename_page(deploy.id, "DEPLOY RUNBOOK")
    kb.rename_page(rollback.id, "Rollback Guide")
    kb.move_page(rollback.id, ops.id)
    kb.set_labels(rollback.id, ["Ops", "runbook"])
    c1 = kb.add_comment(deploy.id, "nice", actor="sam")
    c2 = kb.add_comment(deploy.id, "typo", actor="eng-bot")
    kb.edit_comment(c1.id, "very nice", actor="sam")
    kb.remove_comment(c2.id, actor="alex")
    # a salvaged move: A under B and B under A in one batch
    a, b = create_rec("ENG", "A", "a"), create_rec("ENG", "B", "b")
    node.submit([a, b])
    outs = node.submit([move_rec(a.payload["page_id"], b.payload["page_id"]),
                        move_rec(b.payload["page_id"], a.payload["page_id"])])
    assert outs[1].warnings
    # trash, restore, trash again, purge; a title claimed again after a purge
    gone = kb.create_page("ENG", "Gone Soon", "x")
    kb.add_comment(gone.id, "bye")
    kb.trash_page(gone.id)
    kb.restore_page(gone.id)
    kb.trash_page(gone.id)
    kb.purge_page(gone.id, reason="test")
    kb.create_page("ENG", "Gone Soon", "a new page at the old address")
    # the reaper, with a page due and one not
    old = create_rec("LEAD", "Old Memo", "x", at=1_000)
    node.submit([old, rec("page.trash", at=2_000, page_id=old.payload["page_id"])])
    stays = kb.create_page("LEAD", "Recent Memo", "x")
    kb.trash_page(stays.id)
    assert kb.reap(now=40 * DAY_MS).purged == 1
    # reads, markers, refusals, a malformed record and a noop
    kb.get_page(deploy.id, actor="eng-bot")
    kb.record_read("eng-bot", "search", [kb.resolve(ops.id), kb.resolve(deploy.id)], query="deploy")
    kb.mark_onboarded("eng-bot", "h1")
    kb.mark_onboarded("eng-bot", "h2")
    node.submit([rec("page.create", page_id="malformed", container="ENG"),  # lacks a title
                 create_rec("ENG", "ops", "a clash with Ops"),                 # title_taken
                 rec("page.save", page_id=ops.id, base_revision=1, body="")])  # unchanged: noop


def _replay_home(src: Home, dst_root) -> Home:
    dst = Home(dst_root)
    dst.log_file.parent.mkdir(parents=True)
    shutil.copy2(src.config_file, dst.config_file)  # the same file, activated at the same instant
    shutil.copy2(src.log_file, dst.log_file)
    return dst


def test_replaying_the_whole_log_into_a_fresh_database_gives_the_same_rows(kb, home, tmp_path):
    _workload(kb)
    kb.node.close()
    with Node.open(home) as node:
        original = {t: table_rows(node.conn, t) for t in REPLAYED_TABLES}
        last = node.log.last_seq()
    assert len(original["pages"]) == 9 and original["deleted_pages"] and original["knowledge_reads"]
    statuses = {r[3] for r in original["applied_ops"]}
    assert statuses == {"applied", "refused", "noop"}

    fresh = _replay_home(home, tmp_path / "replica")
    assert not fresh.db_file.exists()
    with Node.open(fresh) as node:
        assert node.log.last_seq() == last  # opening wrote nothing of its own
        replayed = {t: table_rows(node.conn, t) for t in REPLAYED_TABLES}
    for t in REPLAYED_TABLES:
        assert replayed[t] == original[t], t


def test_replaying_in_small_batches_gives_the_same_rows(kb, home, tmp_path):
    _workload(kb)
    original = {t: table_rows(kb.conn, t) for t in REPLAYED_TABLES}
    fresh = _replay_home(home, tmp_path / "replica")
    conn = connect(fresh.db_file)
    with FileLog(fresh.log_file) as flog:
        batches = []
        applier.catch_up(conn, flog, batch=7, progress=batches.append)
    assert len(batches) > 5 and set(batches[:-1]) == {7}
    replayed = {t: table_rows(conn, t) for t in REPLAYED_TABLES}
    conn.close()
    for t in REPLAYED_TABLES:
        assert replayed[t] == original[t], t


def test_replaying_a_log_already_applied_changes_nothing(kb, home):
    _workload(kb)
    original = {t: table_rows(kb.conn, t) for t in REPLAYED_TABLES}
    # forget the position: every record is read again, and every op_id is already applied
    kb.conn.execute("DELETE FROM log_position")
    assert kb.node.catch_up() == kb.node.log.last_seq()
    assert {t: table_rows(kb.conn, t) for t in REPLAYED_TABLES} == original
