"""Comments: a remark is its author's. The author edits it; the author or an admin removes it."""
from __future__ import annotations

import pytest
from conftest import count, rec, rows

from core.errors import Invalid, NotFound, Refused


@pytest.fixture
def page(kb):
    return kb.create_page("ENG", "Discussed", "text", actor="alex")


def test_a_comment_is_added_listed_and_names_its_author(kb, page):
    c1 = kb.add_comment(page.id, "first", actor="sam")
    c2 = kb.add_comment("ENG/discussed", "second", actor="eng-bot")
    listed = kb.comments(page.id)
    assert sorted((c.id, c.author, c.body) for c in listed) == sorted([(c1.id, "sam", "first"),
                                                                      (c2.id, "eng-bot", "second")])
    assert c1.page_id == page.id and c1.edited_at is None


def test_comments_made_in_one_millisecond_are_listed_in_the_order_they_were_made(kb, node, page):
    at = page.created_at + 1
    node.submit([rec("comment.add", "sam", at=at, page_id=page.id, comment_id="zz-first", body="first"),
                 rec("comment.add", "alex", at=at, page_id=page.id, comment_id="aa-second", body="second")])
    assert [c.body for c in kb.comments(page.id)] == ["first", "second"]


def test_an_empty_comment_is_refused(kb, page):
    with pytest.raises(Invalid):
        kb.add_comment(page.id, "   ")


def test_only_the_author_edits_a_comment(kb, page):
    c = kb.add_comment(page.id, "my words", actor="sam")
    for other in ("alex", "eng-bot"):  # not even an admin, nor the page's creator or lead
        with pytest.raises(Refused) as exc:
            kb.edit_comment(c.id, "put in sam's mouth", actor=other)
        assert exc.value.code == "forbidden"
    edited = kb.edit_comment(c.id, "my better words", actor="sam")
    assert (edited.body, edited.edited_at is not None) == ("my better words", True)


def test_the_applier_also_holds_the_authors_edit(node, kb, page):
    c = kb.add_comment(page.id, "mine", actor="sam")
    out = node.submit_one(rec("comment.edit", "alex", comment_id=c.id, body="forged"))
    assert (out.status, out.code) == ("refused", "forbidden")
    assert rows(node.conn, "SELECT body FROM comments") == [("mine",)]


def test_the_author_or_an_admin_removes_a_comment_and_nobody_else(kb, page):
    by_sam = kb.add_comment(page.id, "sam's", actor="sam")
    by_bot = kb.add_comment(page.id, "bot's", actor="eng-bot")
    by_alex = kb.add_comment(page.id, "alex's", actor="alex")
    with pytest.raises(Refused) as exc:  # sam is not an admin, and a lead is not a moderator
        kb.remove_comment(by_alex.id, actor="sam")
    assert exc.value.code == "forbidden"
    with pytest.raises(Refused):
        kb.remove_comment(by_sam.id, actor="eng-bot")
    kb.remove_comment(by_sam.id, actor="sam")     # the author
    kb.remove_comment(by_bot.id, actor="alex")    # an admin
    assert [c.id for c in kb.comments(page.id)] == [by_alex.id]
    with pytest.raises(NotFound):
        kb.remove_comment(by_sam.id, actor="sam")


def test_a_lead_who_is_not_an_admin_cannot_remove_anothers_comment(kb):
    page = kb.create_page("PROD", "Roadmap", "x", actor="sam")  # sam leads PROD
    c = kb.add_comment(page.id, "from alex", actor="alex")
    with pytest.raises(Refused):
        kb.remove_comment(c.id, actor="sam")


def test_a_comment_on_a_trashed_page_is_refused(kb, page):
    kb.trash_page(page.id)
    with pytest.raises(Refused) as exc:
        kb.add_comment(page.id, "too late")
    assert exc.value.code == "trashed"
    assert count(kb.conn, "SELECT count(*) FROM comments") == 0


def test_a_comment_does_not_touch_the_page(kb, page):
    kb.add_comment(page.id, "remark", actor="sam")
    after = kb.resolve(page.id)
    assert (after.revision, after.saved_by, after.saved_at, after.updated_at) == (
        1, page.saved_by, page.saved_at, page.updated_at)
