"""Titles are addresses: normalised, unique per container, first writer wins; the displayed title
is kept apart from the address; rename semantics; fetch by id or CONTAINER/Title."""
from __future__ import annotations

import pytest
from conftest import count, create_rec, rec, rows, trash_rec

from core.errors import Invalid, NotFound, Refused
from core.pages.model import clean_title, normalise_title


def test_normalise_title_lowercases_and_collapses_whitespace():
    assert normalise_title("  Deploy \t Runbook\n") == "deploy runbook"
    assert normalise_title("DEPLOY RUNBOOK") == normalise_title("deploy   runbook")
    assert clean_title("  Deploy \t Runbook ") == "Deploy Runbook"


def test_the_address_and_the_displayed_title_are_stored_apart(kb):
    page = kb.create_page("ENG", "  Deploy   Runbook ", "steps")
    assert (page.title, page.address) == ("Deploy Runbook", "deploy runbook")


@pytest.mark.parametrize("ref", ["ENG/Deploy Runbook", "ENG/deploy runbook", "ENG/DEPLOY RUNBOOK",
                                 "ENG/  deploy \t  runbook  "])
def test_a_page_is_fetched_by_container_and_title_in_any_case_or_spacing(kb, ref):
    page = kb.create_page("ENG", "Deploy Runbook", "steps")
    assert kb.resolve(ref).id == page.id
    assert kb.get_page(ref).id == page.id


def test_a_page_is_fetched_by_id_and_an_unknown_ref_carries_what_it_named(kb):
    """The refusal states the fact (the ref, and the container an address names); how to name a page is
    each surface's own advice (tests/test_cli_pages.py, tests/test_mcp.py)."""
    page = kb.create_page("ENG", "Deploy Runbook", "steps")
    assert kb.resolve(page.id).title == "Deploy Runbook"
    with pytest.raises(NotFound) as exc:
        kb.resolve("no-such-id")
    assert str(exc.value) == "no page 'no-such-id'" and exc.value.to_json() == {
        "error": "not_found", "message": "no page 'no-such-id'", "ref": "no-such-id", "container": None}
    with pytest.raises(NotFound) as exc:
        kb.resolve("PROD/Deploy Runbook")  # the address is per container
    assert exc.value.details == {"ref": "PROD/Deploy Runbook", "container": "PROD"}


def test_titles_are_unique_per_container_regardless_of_case_and_spacing(kb):
    kb.create_page("ENG", "Deploy Runbook", "a")
    for clash in ("deploy runbook", "DEPLOY  RUNBOOK", " Deploy\tRunbook"):
        with pytest.raises(Refused) as exc:
            kb.create_page("ENG", clash, "b")
        assert exc.value.code == "title_taken"
        assert "ENG/Deploy Runbook already exists" in str(exc.value)
    # another container is another namespace
    assert kb.create_page("PROD", "Deploy Runbook", "c").container == "PROD"
    assert count(kb.conn, "SELECT count(*) FROM pages") == 2


def test_two_creates_in_one_batch_with_one_address_first_writer_wins(node):
    first = create_rec("ENG", "Release Notes", "mine", actor="alex")
    second = create_rec("ENG", "release   NOTES", "theirs", actor="sam")
    outs = node.submit([first, second])
    assert [o.status for o in outs] == ["applied", "refused"]
    assert outs[1].code == "title_taken"
    assert rows(node.conn, "SELECT id, title, body, created_by FROM pages") == [
        (first.payload["page_id"], "Release Notes", "mine", "alex")]
    assert count(node.conn, "SELECT count(*) FROM revisions WHERE page_id = ?", (second.payload["page_id"],)) == 0


def test_a_trashed_page_keeps_its_address_and_a_create_is_told_so(kb):
    page = kb.create_page("ENG", "Old Page", "x")
    kb.trash_page(page.id)
    with pytest.raises(Refused) as exc:
        kb.create_page("ENG", "old page", "y")
    assert exc.value.code == "title_taken" and "trash" in str(exc.value)
    assert kb.restore_page(page.id).trashed_at is None


@pytest.mark.parametrize("title, code", [("", "invalid_title"), ("   ", "invalid_title"), ("x" * 256, "invalid_title"),
                                         ("bell\x07", "invalid_title")])
def test_a_bad_title_is_refused_before_anything_is_written(kb, title, code):
    with pytest.raises(Invalid) as exc:
        kb.create_page("ENG", title, "x")
    assert exc.value.code == code
    assert count(kb.conn, "SELECT count(*) FROM applied_ops WHERE type = 'page.create'") == 0


# -- rename ----------------------------------------------------------------------------------------


def test_rename_to_the_same_displayed_title_succeeds_and_does_nothing(kb):
    page = kb.create_page("ENG", "Deploy Runbook", "x")
    seq = kb.node.log.last_seq()
    again = kb.rename_page(page.id, "Deploy Runbook")
    assert again.title == "Deploy Runbook" and again.revision == 1
    assert again.saved_at == page.saved_at
    assert count(kb.conn, "SELECT count(*) FROM revisions WHERE page_id = ?", (page.id,)) == 1
    out = kb.node.submit_one(rec("page.rename", page_id=page.id, title="  Deploy   Runbook "))  # same after cleaning
    assert out.status == "noop"
    assert kb.node.log.last_seq() == seq + 2  # recorded, but nothing changed


def test_a_case_only_rename_keeps_the_address_and_writes_a_revision(kb):
    page = kb.create_page("ENG", "Deploy Runbook", "x")
    renamed = kb.rename_page("ENG/deploy runbook", "DEPLOY RUNBOOK", actor="alex")
    assert (renamed.id, renamed.title, renamed.address, renamed.revision) == (page.id, "DEPLOY RUNBOOK", "deploy runbook", 2)
    history = kb.history(page.id)
    assert [(r.revision, r.kind, r.title) for r in history] == [(2, "rename", "DEPLOY RUNBOOK"), (1, "create", "Deploy Runbook")]
    assert history[0].body == "x"


def test_a_rename_to_a_new_title_frees_the_old_address(kb):
    page = kb.create_page("ENG", "Deploy Runbook", "x")
    renamed = kb.rename_page(page.id, "Deploy Guide")
    assert (renamed.address, renamed.revision) == ("deploy guide", 2)
    assert kb.resolve("ENG/deploy guide").id == page.id
    with pytest.raises(NotFound):
        kb.resolve("ENG/Deploy Runbook")
    taken_again = kb.create_page("ENG", "deploy runbook", "a new page at the freed address")
    assert taken_again.id != page.id


def test_a_rename_onto_a_taken_address_is_refused(kb):
    kb.create_page("ENG", "Alpha", "a")
    beta = kb.create_page("ENG", "Beta", "b")
    with pytest.raises(Refused) as exc:
        kb.rename_page(beta.id, " ALPHA ")
    assert exc.value.code == "title_taken"
    assert kb.resolve(beta.id).title == "Beta"


def test_two_renames_racing_for_one_address_first_wins(node):
    a, b = create_rec("ENG", "A", "a"), create_rec("ENG", "B", "b")
    node.submit([a, b])
    outs = node.submit([rec("page.rename", page_id=a.payload["page_id"], title="Winner"),
                        rec("page.rename", actor="sam", page_id=b.payload["page_id"], title="winner")])
    assert [(o.status, o.code) for o in outs] == [("applied", None), ("refused", "title_taken")]
    assert rows(node.conn, "SELECT title FROM pages ORDER BY title") == [("B",), ("Winner",)]


def test_a_rename_keeps_the_container_and_is_the_tidiers(kb):
    page = kb.create_page("ENG", "Mine", "x", actor="sam")  # sam created it; alex leads ENG
    assert kb.rename_page(page.id, "Sam's", actor="sam").container == "ENG"
    assert kb.rename_page(page.id, "Lead's", actor="alex").title == "Lead's"
    with pytest.raises(Refused) as exc:
        kb.rename_page(page.id, "Bot's", actor="eng-bot")
    assert exc.value.code == "forbidden"
    assert "creator (sam)" in str(exc.value) and "lead of ENG (alex)" in str(exc.value)


def test_a_trashed_page_cannot_be_renamed(kb, node):
    page = kb.create_page("ENG", "Binned", "x")
    node.submit_one(trash_rec(page.id))
    with pytest.raises(Refused) as exc:
        kb.rename_page(page.id, "New")
    assert exc.value.code == "trashed"
