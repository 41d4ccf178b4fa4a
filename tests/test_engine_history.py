"""A body has a history: revision N is the body at version N, with a line diff between any two; a
save states its base revision and a stale one is refused with the writer's text kept; a save's note
is only its writer's; "last saved" moves only on create, save and rename."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import T0, count, create_rec, move_rec, rec, restore_rec, rows, save_rec, trash_rec

from core.errors import NotFound, Refused, StaleRevision


@pytest.fixture
def page(kb):
    return kb.create_page("ENG", "Runbook", "line one\nline two\n")


def test_revision_n_is_the_body_at_version_n(kb, page):
    kb.save_page(page.id, "line one\nline 2\n", base_revision=1)
    kb.save_page(page.id, "line one\nline 2\nline three\n", base_revision=2, actor="sam")
    kb.rename_page(page.id, "Runbook v2")
    kb.save_page(page.id, "all new\n", base_revision=4)
    bodies = {n: kb.revision(page.id, n).body for n in range(1, 6)}
    assert bodies == {1: "line one\nline two\n", 2: "line one\nline 2\n", 3: "line one\nline 2\nline three\n",
                      4: "line one\nline 2\nline three\n", 5: "all new\n"}
    hist = kb.history(page.id)
    assert [(r.revision, r.kind, r.author, r.title) for r in hist] == [
        (5, "save", "alex", "Runbook v2"), (4, "rename", "alex", "Runbook v2"), (3, "save", "sam", "Runbook"),
        (2, "save", "alex", "Runbook"), (1, "create", "alex", "Runbook")]
    assert kb.resolve(page.id).revision == 5
    with pytest.raises(NotFound) as exc:
        kb.revision(page.id, 6)
    assert exc.value.code == "no_revision"


def test_a_line_diff_between_any_two_revisions(kb, page):
    kb.save_page(page.id, "line one\nline 2\n", base_revision=1)
    kb.save_page(page.id, "line one\nline 2\nline three\n", base_revision=2)
    d13 = kb.diff(page.id, 1, 3)
    assert "-line two" in d13 and "+line 2" in d13 and "+line three" in d13 and " line one" in d13
    assert kb.diff(page.id, 3) == kb.diff(page.id, 2, 3)  # alone: what that save changed
    assert [ln for ln in kb.diff(page.id, 3) if ln[:1] in "+-" and ln[:3] not in ("+++", "---")] == ["+line three"]
    assert any(ln == "+line one" for ln in kb.diff(page.id, 1))  # revision 1 against nothing
    d31 = kb.diff(page.id, 3, 1)  # either direction
    assert "+line two" in d31 and "-line three" in d31
    assert kb.diff(page.id, 2, 2) == []


def test_a_diff_across_a_rename_names_the_title_change(kb, page):
    kb.rename_page(page.id, "Runbook Two")
    d = kb.diff(page.id, 2)
    assert d == ["title: 'Runbook' → 'Runbook Two'"]


def test_a_stale_save_is_refused_and_the_writers_text_is_kept(kb, page, home):
    kb.save_page(page.id, "sam's edit\n", base_revision=1, actor="sam")
    mine = "alex's careful edit\nwith two lines\n"
    with pytest.raises(StaleRevision) as exc:
        kb.save_page(page.id, mine, base_revision=1, actor="alex")
    err = exc.value
    assert err.code == "stale_revision"
    assert (err.base_revision, err.current_revision) == (1, 2)
    assert err.your_body == mine
    rescued = Path(err.rescued_to)
    assert rescued.parent == home.rescue_dir and rescued.read_text(encoding="utf-8") == mine
    assert str(rescued) in str(err) and "sam saved since" in str(err)
    assert err.to_json()["error"] == "stale_revision"
    current = kb.resolve(page.id)
    assert (current.revision, current.body, current.saved_by) == (2, "sam's edit\n", "sam")
    assert count(kb.conn, "SELECT count(*) FROM revisions WHERE page_id = ?", (page.id,)) == 2


def test_a_save_from_a_future_revision_is_stale_too(kb, page):
    with pytest.raises(StaleRevision):
        kb.save_page(page.id, "x", base_revision=7)


def test_two_saves_from_one_base_in_one_batch_exactly_one_applies(node, page):
    outs = node.submit([save_rec(page.id, "first", 1), save_rec(page.id, "second", 1, actor="sam")])
    assert [(o.status, o.code) for o in outs] == [("applied", None), ("refused", "stale_revision")]
    assert rows(node.conn, "SELECT body, revision FROM pages") == [("first", 2)]


def test_a_save_of_the_same_body_writes_no_revision(kb, page):
    same = kb.save_page(page.id, page.body, base_revision=1)
    assert same.revision == 1
    assert count(kb.conn, "SELECT count(*) FROM revisions") == 1


def test_a_trashed_page_cannot_be_saved(kb, page):
    kb.trash_page(page.id)
    with pytest.raises(Refused) as exc:
        kb.save_page(page.id, "x", base_revision=1)
    assert exc.value.code == "trashed"


# -- a save's note ----------------------------------------------------------------------------------


def test_a_saves_message_is_only_its_writers(kb):
    page = kb.create_page("ENG", "Noted", "# The Heading\n\nbody\n")
    kb.save_page(page.id, "# The Heading\n\nbody, edited\n", base_revision=1)
    kb.save_page(page.id, "# The Heading\n\nbody, edited again\n", base_revision=2, message="  fixed a typo  ")
    kb.save_page(page.id, "# The Heading\n\nthird\n", base_revision=3, message="   ")
    messages = {r.revision: r.message for r in kb.history(page.id)}
    assert messages == {1: None, 2: None, 3: "fixed a typo", 4: None}


def test_a_creates_message_is_only_its_writers(kb):
    a = kb.create_page("ENG", "With Note", "# Heading\n", message="first draft")
    b = kb.create_page("ENG", "Without Note", "# Heading\n")
    c = kb.create_page("ENG", "Blank Note", "# Heading\n", message="   ")
    assert kb.history(a.id)[0].message == "first draft"
    assert kb.history(b.id)[0].message is None
    assert kb.history(c.id)[0].message is None


# -- "last saved" ------------------------------------------------------------------------------------


def _saved(node, page_id):
    return tuple(node.conn.execute("SELECT saved_by, saved_at, updated_at FROM pages WHERE id = ?", (page_id,)).fetchone())


def test_last_saved_moves_only_on_create_save_and_rename(node):
    c = create_rec("ENG", "Tracked", "v1", actor="alex", at=T0)
    other = create_rec("ENG", "Other Parent", "x", actor="alex", at=T0)
    node.submit([c, other])
    page_id = c.payload["page_id"]
    assert _saved(node, page_id) == ("alex", T0, T0)

    node.submit_one(save_rec(page_id, "v2", 1, actor="sam", at=T0 + 10))
    assert _saved(node, page_id) == ("sam", T0 + 10, T0 + 10)

    # neither a move, a label, a comment, a trash nor a restore is a change to what the page says
    not_saves = [
        move_rec(page_id, other.payload["page_id"], actor="alex", at=T0 + 20),
        rec("page.labels", "alex", at=T0 + 30, page_id=page_id, labels=["Ops"]),
        rec("comment.add", "alex", at=T0 + 40, page_id=page_id, comment_id="c1", body="hi"),
        trash_rec(page_id, actor="alex", at=T0 + 50),
        restore_rec(page_id, actor="alex", at=T0 + 60),
    ]
    for r in not_saves:
        out = node.submit_one(r)
        assert out.status == "applied", (r.type, out)
        saved_by, saved_at, _ = _saved(node, page_id)
        assert (saved_by, saved_at) == ("sam", T0 + 10), r.type
    assert _saved(node, page_id)[2] == T0 + 60  # the row itself did change

    node.submit_one(rec("page.rename", "alex", at=T0 + 70, page_id=page_id, title="Tracked Page"))
    assert _saved(node, page_id)[:2] == ("alex", T0 + 70)
    assert rows(node.conn, "SELECT revision, kind FROM revisions WHERE page_id = ? ORDER BY revision", (page_id,)) == [
        (1, "create"), (2, "save"), (3, "rename")]


def test_labels_are_lower_cased_and_de_duplicated(kb, page):
    out = kb.set_labels(page.id, ["Ops", "ops", "Deploy"])
    assert out.result["labels"] == ["deploy", "ops"]
    assert kb.resolve(page.id).labels == ["deploy", "ops"]
    assert kb.set_labels(page.id, ["OPS"]).status == "noop"
