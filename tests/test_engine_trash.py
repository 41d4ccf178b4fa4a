"""Trash, restore, purge and the trash reaper."""
from __future__ import annotations

import json

import pytest
from conftest import DAY_MS, T0, config_with, count, create_rec, purge_rec, rec, restore_rec, rows, trash_rec

from core import config as config_mod
from core.errors import NotFound, Refused
from core.node import Node
from core.pages.service import REAPER, TRASH_TERM_MS, KnowledgeBase

# -- who may trash and restore ------------------------------------------------------------------------


@pytest.mark.parametrize("who, allowed", [
    ("sam", True),       # the creator
    ("alex", True),      # ENG's lead (and an admin)
    ("eng-bot", False),  # neither
])
def test_trash_and_restore_are_the_creators_the_leads_and_an_admins(kb, who, allowed):
    page = kb.create_page("ENG", "Sam's Page", "x", actor="sam")
    if not allowed:
        with pytest.raises(Refused) as exc:
            kb.trash_page(page.id, actor=who)
        assert exc.value.code == "forbidden"
        kb.trash_page(page.id, actor="sam")
        with pytest.raises(Refused) as exc:
            kb.restore_page(page.id, actor=who)
        assert exc.value.code == "forbidden"
        return
    trashed = kb.trash_page(page.id, actor=who)
    assert (trashed.trashed_by, trashed.trashed_at is not None) == (who, True)
    assert [p.id for p in kb.trash()] == [page.id]
    restored = kb.restore_page(page.id, actor=who)
    assert restored.trashed_at is None and restored.trashed_by is None


def test_a_lead_tidies_their_space_but_not_another(kb):
    """sam leads PROD, not ENG (and is not an admin)."""
    in_prod = kb.create_page("PROD", "Alex in PROD", "x", actor="alex")
    in_eng = kb.create_page("ENG", "Alex in ENG", "x", actor="alex")
    assert kb.trash_page(in_prod.id, actor="sam").trashed_by == "sam"
    with pytest.raises(Refused) as exc:
        kb.trash_page(in_eng.id, actor="sam")
    assert exc.value.code == "forbidden"


def test_a_trashed_page_is_out_of_the_way_and_kept_for_restore(kb):
    page = kb.create_page("ENG", "Binned", "text")
    kb.trash_page(page.id)
    assert [p.title for p in kb.list_pages("ENG").pages] == []
    assert {s["key"]: s["pages"] for s in kb.spaces()}["ENG"] == 0
    assert kb.resolve(page.id).body == "text"  # still readable, by id
    assert kb.trash_page(page.id).trashed_at is not None  # trashing twice: a noop


# -- purge ----------------------------------------------------------------------------------------------


def test_a_purge_is_an_admins_alone_and_never_an_agents(make_home):
    actors = {**config_mod.example_config()["actors"], "ops-bot": {"kind": "agent", "admin": True}}
    with Node.open(make_home(config_with(actors=actors))) as node:
        kb = KnowledgeBase(node)
        page = kb.create_page("ENG", "Doomed", "x", actor="sam")
        kb.trash_page(page.id, actor="sam")
        for who in ("sam", "eng-bot", "ops-bot"):  # the creator, an agent, an admin agent
            with pytest.raises(Refused) as exc:
                kb.purge_page(page.id, actor=who)
            assert exc.value.code == "forbidden", who
        assert kb.purge_page(page.id, actor="alex")["purged"] is True


def test_a_purge_needs_the_page_in_the_trash(kb):
    page = kb.create_page("ENG", "Live", "x")
    with pytest.raises(Refused) as exc:
        kb.purge_page(page.id)
    assert exc.value.code == "not_trashed"
    assert kb.resolve(page.id).trashed_at is None


def test_a_purge_removes_the_page_its_revisions_and_comments_and_leaves_a_marker(kb):
    page = kb.create_page("ENG", "Doomed", "v1")
    kb.save_page(page.id, "v2", base_revision=1)
    kb.add_comment(page.id, "bye", actor="sam")
    kb.trash_page(page.id)
    kb.purge_page(page.id, reason="secrets pasted in")
    for table, col in (("pages", "id"), ("revisions", "page_id"), ("comments", "page_id")):
        assert count(kb.conn, f"SELECT count(*) FROM {table} WHERE {col} = ?", (page.id,)) == 0, table
    assert rows(kb.conn, "SELECT page_id, container, title, purged_by, reason FROM deleted_pages") == [
        (page.id, "ENG", "Doomed", "alex", "secrets pasted in")]
    with pytest.raises(NotFound) as exc:
        kb.resolve(page.id)
    assert exc.value.code == "purged" and "purged by alex" in str(exc.value)
    assert kb.create_page("ENG", "Doomed", "a new page may take the address").id != page.id


def test_a_replayed_create_cannot_resurrect_a_purged_page(kb, node):
    original = create_rec("ENG", "Ghost", "boo")
    node.submit_one(original)
    page_id = original.payload["page_id"]
    kb.trash_page(page_id)
    kb.purge_page(page_id)
    # the same record redelivered is skipped by op_id; the same create under a new op_id is refused
    assert node.submit_one(original).status == "applied"  # the first outcome, unchanged
    replayed = create_rec("ENG", "Ghost", "boo", page_id=page_id)
    out = node.submit_one(replayed)
    assert (out.status, out.code) == ("refused", "purged")
    later = [rec("page.save", page_id=page_id, base_revision=1, body="x"), restore_rec(page_id),
             rec("comment.add", page_id=page_id, comment_id="cx", body="x")]
    assert {(o.status, o.code) for o in node.submit(later)} == {("refused", "purged")}
    assert count(node.conn, "SELECT count(*) FROM pages WHERE id = ?", (page_id,)) == 0


def test_a_purge_re_files_children_under_the_purged_pages_parent(kb):
    top = kb.create_page("ENG", "Top", "")
    mid = kb.create_page("ENG", "Mid", "", parent=top.id)
    leaf1 = kb.create_page("ENG", "Leaf One", "x", parent=mid.id)
    leaf2 = kb.create_page("ENG", "Leaf Two", "x", parent=mid.id)
    for p in (leaf1, leaf2, mid):
        kb.trash_page(p.id)
    kb.purge_page(mid.id)
    assert {p.id: p.parent_id for p in (kb.resolve(leaf1.id), kb.resolve(leaf2.id))} == {leaf1.id: top.id, leaf2.id: top.id}
    assert kb.restore_page(leaf1.id).parent_id == top.id  # restorable: its parent is live


def test_purging_a_top_level_page_files_its_children_at_the_top(kb):
    top = kb.create_page("ENG", "Top", "")
    child = kb.create_page("ENG", "Child", "x", parent=top.id)
    kb.trash_page(child.id)
    kb.trash_page(top.id)
    kb.purge_page(top.id)
    assert kb.resolve(child.id).parent_id is None
    assert kb.restore_page(child.id).parent_id is None
    assert [p.title for p in kb.list_pages("ENG").pages] == ["Child"]


# -- the reaper -------------------------------------------------------------------------------------------


def _create_trashed(node, n, *, first_trash_at, step=1000, batch=1000):
    """n pages created and trashed by direct records, trashed at first_trash_at + i*step (shuffled
    so that log order is not trash order)."""
    creates = [create_rec("ENG", f"Trashed {i:05d}", "x", at=T0) for i in range(n)]
    ids = [c.payload["page_id"] for c in creates]
    order = list(range(n))
    order = order[1::2] + order[0::2]  # trash order differs from create order and from log order
    trashes = [trash_rec(ids[i], at=first_trash_at + i * step) for i in order]
    for chunk in range(0, n, batch):
        assert all(o.status == "applied" for o in node.submit(creates[chunk:chunk + batch], sync=False))
    for chunk in range(0, n, batch):
        assert all(o.status == "applied" for o in node.submit(trashes[chunk:chunk + batch], sync=False))
    return {ids[i]: first_trash_at + i * step for i in range(n)}


def test_the_reaper_purges_over_thirty_days_oldest_first_at_most_1000_a_pass(kb, node):
    trashed_at = _create_trashed(node, 1005, first_trash_at=T0 + DAY_MS)
    recent = kb.create_page("ENG", "Trashed Yesterday", "x")
    kb.trash_page(recent.id)
    before = node.log.last_seq()
    report = kb.reap(now=T0 + 40 * DAY_MS)
    assert (report.purged, report.refused, report.passes) == (1005, 0, 2)
    assert count(kb.conn, "SELECT count(*) FROM pages WHERE id != ?", (recent.id,)) == 0
    assert kb.resolve(recent.id).trashed_at is not None  # not yet due
    purges = rows(kb.conn, "SELECT seq, result FROM applied_ops WHERE type = 'page.purge' ORDER BY seq")
    purged_order = [json.loads(r)["page_id"] for _, r in purges]
    assert len(purged_order) == 1005
    assert [trashed_at[p] for p in purged_order] == sorted(trashed_at.values())  # oldest first
    # the passes: the first 1,000 oldest in one batch, then the rest
    assert min(trashed_at[p] for p in purged_order[1000:]) > max(trashed_at[p] for p in purged_order[:1000])
    markers = rows(kb.conn, "SELECT DISTINCT purged_by FROM deleted_pages")
    assert markers == [(REAPER,)]
    reason = kb.conn.execute("SELECT reason FROM deleted_pages LIMIT 1").fetchone()[0]
    assert str(T0 + 40 * DAY_MS - TRASH_TERM_MS) in reason  # why: the cutoff it was in the trash before
    assert node.log.last_seq() == before + 1005
    assert kb.reap(now=T0 + 40 * DAY_MS).passes == 0


def test_the_reaper_leaves_pages_trashed_within_thirty_days(kb, node):
    _create_trashed(node, 3, first_trash_at=T0)
    assert kb.reap(now=T0 + 29 * DAY_MS).purged == 0
    assert count(node.conn, "SELECT count(*) FROM pages") == 3
    assert kb.reap(now=T0 + 31 * DAY_MS).purged == 3


def test_the_term_runs_from_the_latest_trash(kb, node):
    c = create_rec("ENG", "Back and forth", "x", at=T0)
    page_id = c.payload["page_id"]
    node.submit([c, trash_rec(page_id, at=T0 + 1000), restore_rec(page_id, at=T0 + 2 * DAY_MS),
                 trash_rec(page_id, at=T0 + 3 * DAY_MS)])
    report = kb.reap(now=T0 + 1000 + 31 * DAY_MS)  # 31 days after the FIRST trash
    assert (report.purged, report.passes) == (0, 0)
    assert kb.resolve(page_id).trashed_at == T0 + 3 * DAY_MS
    assert kb.reap(now=T0 + 3 * DAY_MS + 31 * DAY_MS).purged == 1


def test_a_restore_that_lands_before_the_reapers_purge_refuses_it(node):
    c = create_rec("ENG", "Saved in time", "x", at=T0)
    page_id = c.payload["page_id"]
    node.submit([c, trash_rec(page_id, at=T0 + 1000)])
    cutoff = T0 + 10 * DAY_MS
    reaper_purge = rec("page.purge", REAPER, page_id=page_id, cutoff=cutoff, reason="due")
    outs = node.submit([restore_rec(page_id, actor="sam", at=T0 + 9 * DAY_MS), reaper_purge])
    assert outs[0].status == "applied"
    assert (outs[1].status, outs[1].code) == ("refused", "not_due")
    assert node.conn.execute("SELECT trashed_at FROM pages WHERE id = ?", (page_id,)).fetchone()[0] is None


def test_a_re_trash_that_lands_before_the_reapers_purge_refuses_it(node):
    c = create_rec("ENG", "Re-trashed", "x", at=T0)
    page_id = c.payload["page_id"]
    node.submit([c, trash_rec(page_id, at=T0 + 1000)])
    cutoff = T0 + 10 * DAY_MS
    outs = node.submit([restore_rec(page_id, at=T0 + 20 * DAY_MS), trash_rec(page_id, at=T0 + 20 * DAY_MS + 1),
                        rec("page.purge", REAPER, page_id=page_id, cutoff=cutoff)])
    assert (outs[2].status, outs[2].code) == ("refused", "not_due")
    assert count(node.conn, "SELECT count(*) FROM pages WHERE id = ?", (page_id,)) == 1


def test_a_retried_reap_purge_is_harmless(kb, node):
    _create_trashed(node, 2, first_trash_at=T0)
    assert kb.reap(now=T0 + 31 * DAY_MS).purged == 2
    ops = rows(node.conn, "SELECT op_id FROM applied_ops WHERE type = 'page.purge'")
    assert all(op.startswith("reap-") for (op,) in ops)
    page_id = ops[0][0].split("-")[1]
    retry = rec("page.purge", REAPER, op_id=ops[0][0], page_id=page_id, cutoff=T0)
    assert node.submit_one(retry).status == "applied"  # the outcome it had: nothing purged twice
    assert count(node.conn, "SELECT count(*) FROM deleted_pages") == 2


def test_a_purge_record_without_trash_is_refused(node):
    c = create_rec("ENG", "Live page", "x")
    node.submit_one(c)
    out = node.submit_one(purge_rec(c.payload["page_id"]))
    assert (out.status, out.code) == ("refused", "not_trashed")
