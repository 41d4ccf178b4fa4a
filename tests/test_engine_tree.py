"""A container is a tree: parent rules at write time, identical salvage of races at apply time,
folders derived from the body, and one level of the outline in windows."""
from __future__ import annotations

import logging

import pytest
from conftest import count, create_rec, move_rec, purge_rec, trash_rec

from core.errors import Invalid, Refused
from core.pages.model import is_folder


@pytest.fixture
def tree(kb):
    """ENG: Ops / Deploy / Rollback (a chain), plus a sibling at the top."""
    ops = kb.create_page("ENG", "Ops", "")
    deploy = kb.create_page("ENG", "Deploy", "how we deploy", parent=ops.id)
    rollback = kb.create_page("ENG", "Rollback", "how we roll back", parent="ENG/deploy")
    other = kb.create_page("ENG", "Other", "x")
    return {"ops": ops, "deploy": deploy, "rollback": rollback, "other": other}


def test_a_page_is_filed_under_its_parent_and_knows_its_ancestors(kb, tree):
    rb = kb.resolve(tree["rollback"].id)
    assert rb.parent_id == tree["deploy"].id
    assert [a["title"] for a in rb.ancestors] == ["Ops", "Deploy"]
    assert kb.resolve(tree["ops"].id).child_count == 1


def _assert_parent_refusal(exc, container="ENG"):
    assert exc.value.code == "invalid_parent"
    msg = str(exc.value)
    assert "parent_id" in msg
    assert f"pick a live page in {container}" in msg  # …and what to do instead


def test_a_parent_in_another_container_is_refused(kb, tree):
    prod = kb.create_page("PROD", "Roadmap", "x")
    with pytest.raises(Refused) as exc:
        kb.create_page("ENG", "Child", "x", parent=prod.id)
    _assert_parent_refusal(exc)
    with pytest.raises(Refused) as exc:
        kb.move_page(tree["other"].id, prod.id)
    _assert_parent_refusal(exc)


def test_a_trashed_parent_is_refused(kb, tree):
    kb.trash_page(tree["other"].id)
    with pytest.raises(Refused) as exc:
        kb.create_page("ENG", "Child", "x", parent=tree["other"].id)
    _assert_parent_refusal(exc)
    assert "trash" in str(exc.value)
    with pytest.raises(Refused) as exc:
        kb.move_page(tree["rollback"].id, tree["other"].id)
    _assert_parent_refusal(exc)


def test_a_parent_that_is_the_page_or_beneath_it_is_refused(kb, tree):
    for parent in (tree["ops"], tree["deploy"], tree["rollback"]):
        with pytest.raises(Refused) as exc:
            kb.move_page(tree["ops"].id, parent.id)
        _assert_parent_refusal(exc)
        assert "cycle" in str(exc.value)
    assert kb.resolve(tree["ops"].id).parent_id is None


def test_a_parent_that_does_not_exist_is_refused_naming_parent_id(kb, tree):
    for attempt in (lambda: kb.create_page("ENG", "Child", "x", parent="nosuchpage00000"),
                    lambda: kb.move_page(tree["other"].id, "nosuchpage00000")):
        with pytest.raises(Refused) as exc:
            attempt()
        _assert_parent_refusal(exc)


def test_moves_within_the_rules_and_to_the_top(kb, tree):
    moved = kb.move_page(tree["rollback"].id, tree["other"].id)
    assert moved.parent_id == tree["other"].id
    top = kb.move_page(tree["rollback"].id, None)
    assert top.parent_id is None
    assert kb.move_page(tree["rollback"].id, None).parent_id is None  # already there: a noop


def test_racing_moves_are_salvaged_identically_with_a_warning(node, caplog):
    a, b = create_rec("ENG", "A", "a"), create_rec("ENG", "B", "b")
    node.submit([a, b])
    a_id, b_id = a.payload["page_id"], b.payload["page_id"]
    with caplog.at_level(logging.WARNING, logger="crewlet.applier"):
        outs = node.submit([move_rec(a_id, b_id), move_rec(b_id, a_id, actor="sam")])
    assert [o.status for o in outs] == ["applied", "applied"]
    assert outs[0].warnings == []
    assert [w["code"] for w in outs[1].warnings] == ["pages_parent_salvaged"]
    assert "left where it was" in outs[1].warnings[0]["message"]
    parents = dict(node.conn.execute("SELECT id, parent_id FROM pages").fetchall())
    assert parents == {a_id: b_id, b_id: None}  # B stayed where it was: no cycle
    assert any("pages_parent_salvaged" in r.getMessage() and b_id in r.getMessage() for r in caplog.records)


def test_a_move_whose_parent_went_to_another_container_or_was_purged_leaves_the_page(node):
    a, p = create_rec("ENG", "A", "a"), create_rec("ENG", "P", "p")
    node.submit([a, p])
    a_id, p_id = a.payload["page_id"], p.payload["page_id"]
    outs = node.submit([trash_rec(p_id), purge_rec(p_id), move_rec(a_id, p_id)])
    assert [o.status for o in outs] == ["applied", "applied", "applied"]
    assert [w["code"] for w in outs[2].warnings] == ["pages_parent_salvaged"]
    assert node.conn.execute("SELECT parent_id FROM pages WHERE id = ?", (a_id,)).fetchone()[0] is None


@pytest.mark.parametrize("race", ["trashed", "purged"])
def test_a_create_whose_parent_went_away_lands_at_the_top(node, race):
    p = create_rec("ENG", "Parent", "")
    node.submit_one(p)
    p_id = p.payload["page_id"]
    first = [trash_rec(p_id)] + ([purge_rec(p_id)] if race == "purged" else [])
    child = create_rec("ENG", "Child", "c", parent_id=p_id)
    outs = node.submit([*first, child])
    assert outs[-1].status == "applied"
    assert [w["code"] for w in outs[-1].warnings] == ["pages_parent_salvaged"]
    assert "created at the top of ENG" in outs[-1].warnings[0]["message"]
    row = node.conn.execute("SELECT parent_id, revision FROM pages WHERE id = ?", (child.payload["page_id"],)).fetchone()
    assert tuple(row) == (None, 1)


def test_the_writer_sees_the_salvage_warning(kb, node, monkeypatch):
    """Between the writer's check and the apply, another writer trashes the parent."""
    parent = kb.create_page("ENG", "Parent", "")
    real_submit = node.submit

    def racing_submit(records, **kw):
        if records and records[0].type == "page.create":
            real_submit([trash_rec(parent.id, actor="sam")])
        return real_submit(records, **kw)

    monkeypatch.setattr(node, "submit", racing_submit)
    page = kb.create_page("ENG", "Child", "x", parent=parent.id)
    assert page.parent_id is None
    assert [w["code"] for w in page.warnings] == ["pages_parent_salvaged"]


def test_a_page_with_live_children_cannot_be_trashed(kb, tree):
    with pytest.raises(Refused) as exc:
        kb.trash_page(tree["deploy"].id)
    assert exc.value.code == "has_children"
    kb.trash_page(tree["rollback"].id)
    assert kb.trash_page(tree["deploy"].id).trashed_at is not None


def test_a_child_cannot_be_restored_before_its_trashed_parent(kb, tree):
    kb.trash_page(tree["rollback"].id)
    kb.trash_page(tree["deploy"].id)
    with pytest.raises(Refused) as exc:
        kb.restore_page(tree["rollback"].id)
    assert exc.value.code == "parent_trashed"
    kb.restore_page(tree["deploy"].id)
    assert kb.restore_page(tree["rollback"].id).trashed_at is None


# -- folders ---------------------------------------------------------------------------------------


def test_a_folder_is_a_page_with_an_empty_body_derived_on_read(kb):
    page = kb.create_page("ENG", "Folder", "")
    assert kb.resolve(page.id).is_folder
    kb.save_page(page.id, "now a paragraph", base_revision=1)
    assert not kb.resolve(page.id).is_folder
    kb.save_page(page.id, "  \n\t\n", base_revision=2)
    assert kb.resolve(page.id).is_folder
    assert "is_folder" not in [r[1] for r in kb.conn.execute("PRAGMA table_info(pages)")]  # never stored


@pytest.mark.parametrize("body", ["", " ", "\n\n", "\t \r\n", "x", "\u00a0", "\x0c"])
def test_a_page_and_its_listing_agree_on_whether_it_is_a_folder(kb, body):
    page = kb.create_page("ENG", "Maybe Folder", body)
    listed = kb.list_pages("ENG").pages[0]
    assert listed.is_folder == kb.resolve(page.id).is_folder == is_folder(body)


# -- the outline in windows ----------------------------------------------------------------------


def test_a_level_is_listed_in_windows_with_its_total_and_a_cursor(kb):
    titles = [f"Page {i:02d}" for i in range(12)]
    for t in reversed(titles):
        kb.create_page("ENG", t, "x")
    seen, cursor, windows = [], None, 0
    while True:
        w = kb.list_pages("ENG", after=cursor, limit=5)
        windows += 1
        assert w.total == 12
        seen += [p.title for p in w.pages]
        cursor = w.next_cursor
        if cursor is None:
            break
    assert seen == titles and windows == 3
    with pytest.raises(Invalid):
        kb.list_pages("ENG", limit=501)
    with pytest.raises(Invalid):
        kb.list_pages("ENG", after="garbage!")


def test_child_counts_ignore_trashed_children(kb, tree):
    extra = kb.create_page("ENG", "Extra", "x", parent=tree["ops"].id)
    assert {p.title: p.child_count for p in kb.list_pages("ENG").pages}["Ops"] == 2
    kb.trash_page(extra.id)
    listing = {p.title: p for p in kb.list_pages("ENG").pages}
    assert listing["Ops"].child_count == 1 and listing["Ops"].is_folder
    assert kb.resolve(tree["ops"].id).child_count == 1
    children = kb.list_pages("ENG", parent="ENG/ops")
    assert [p.title for p in children.pages] == ["Deploy"] and children.total == 1
    assert count(kb.conn, "SELECT count(*) FROM pages WHERE parent_id = ?", (tree["ops"].id,)) == 2
