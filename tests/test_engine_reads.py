"""What agents read (one knowledge_read per act, nothing for nothing, only a seat reads),
backlinks by page id (core.pages.links) and onboarding markers."""
from __future__ import annotations

import json

import pytest
from conftest import config_with, count, rec, rows

from core.config import ConfigError
from core.errors import NotFound, Refused
from core.importer import import_directory
from core.node import Node
from core.pages.links import extract_links, link_to
from core.pages.service import KnowledgeBase

# -- knowledge reads -----------------------------------------------------------------------------------


@pytest.fixture
def page(kb):
    return kb.create_page("ENG", "Deploy Runbook", "steps")


def test_an_agents_get_page_is_one_read_event_listing_the_page(kb, page):
    got = kb.get_page("ENG/deploy runbook", actor="eng-bot")
    assert got.id == page.id
    reads = kb.reads()
    assert len(reads) == 1
    r = reads[0]
    assert (r["actor"], r["via"], r["query"]) == ("eng-bot", "get_page", None)
    assert r["pages"] == [{"id": page.id, "container": "ENG", "title": "Deploy Runbook", "rank": 1}]


def test_an_agents_read_waits_for_no_disk_flush_and_the_next_write_flushes_it(kb, page, monkeypatch):
    import os

    flushed: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (flushed.append(fd), real(fd))[1])
    kb.get_page(page.id, actor="eng-bot")
    assert flushed == [] and len(kb.reads()) == 1  # recorded and applied, not waited on
    kb.save_page(page.id, "steps, and one more", base_revision=page.revision)
    assert flushed  # a page write flushes the log, the read before it with it


def test_a_persons_read_is_never_a_knowledge_read(kb, page):
    kb.get_page(page.id, actor="sam")
    kb.get_page(page.id)  # the operator, alex
    assert kb.reads() == []
    assert count(kb.conn, "SELECT count(*) FROM applied_ops WHERE type = 'knowledge.read'") == 0


def test_a_page_not_found_records_nothing(kb):
    with pytest.raises(NotFound):
        kb.get_page("ENG/nothing here", actor="eng-bot")
    assert kb.reads() == []


def test_one_event_per_act_listing_its_pages_in_rank_order(kb, page):
    other = kb.create_page("ENG", "Rollback", "x")
    kb.record_read("eng-bot", "search", [kb.resolve(other.id), kb.resolve(page.id)], query="how to roll back")
    (r,) = kb.reads()
    assert r["via"] == "search" and r["query"] == "how to roll back"
    assert [(p["id"], p["rank"]) for p in r["pages"]] == [(other.id, 1), (page.id, 2)]


def test_nothing_is_recorded_for_nothing(kb, node):
    before = node.log.last_seq()
    kb.record_read("eng-bot", "search", [], query="no hits")
    assert node.log.last_seq() == before  # nothing even appended
    out = node.submit_one(rec("knowledge.read", "eng-bot", via="search", query="q", pages=[]))
    assert out.status == "noop"
    assert kb.reads() == []


def test_a_long_query_is_clipped_to_200_bytes_on_a_character_boundary(kb, page):
    query = "é" * 150  # 300 bytes
    kb.record_read("eng-bot", "search", [kb.resolve(page.id)], query=query)
    stored = kb.reads()[0]["query"]
    assert stored.endswith("…")
    head = stored[:-1]
    # 200 bytes at most with the ellipsis (3 bytes) included, cut on a character boundary
    assert len(stored.encode("utf-8")) <= 200 and query.startswith(head) and len(head) == 98
    kb.record_read("eng-bot", "search", [kb.resolve(page.id)], query="short")
    assert {r["query"] for r in kb.reads()} == {stored, "short"}


def test_a_read_is_stored_as_the_record_says(node):
    pages = [{"id": "p1", "container": "ENG", "title": "T", "rank": 1}]
    out = node.submit_one(rec("knowledge.read", "eng-bot", via="prefetch", query="q", pages=pages))
    assert out.status == "applied"
    (row,) = rows(node.conn, "SELECT actor, via, query, pages FROM knowledge_reads")
    assert row[:3] == ("eng-bot", "prefetch", "q") and json.loads(row[3]) == pages


# -- onboarding markers -----------------------------------------------------------------------------------


def test_onboarding_markers_upsert_one_row_per_agent(kb):
    assert not kb.is_onboarded("eng-bot", "chain-1")
    kb.mark_onboarded("eng-bot", "chain-1")
    assert kb.is_onboarded("eng-bot", "chain-1")
    kb.mark_onboarded("eng-bot", "chain-1")
    kb.mark_onboarded("eng-bot", "chain-2")  # the org chain changed: re-onboarded
    assert not kb.is_onboarded("eng-bot", "chain-1") and kb.is_onboarded("eng-bot", "chain-2")
    kb.mark_onboarded("other-bot", "chain-9")
    assert rows(kb.conn, "SELECT agent_id, chain_hash FROM agent_onboarding_markers ORDER BY agent_id") == [
        ("eng-bot", "chain-2"), ("other-bot", "chain-9")]


# -- links by page id --------------------------------------------------------------------------------------


@pytest.mark.parametrize("body, expected", [
    ("see [the runbook](#/knowledge/pages/abc123def456)", {"abc123def456"}),
    ("see /pages/abc123def456 for more", {"abc123def456"}),
    ("[r](/pages/abc123def456) and [s](#/knowledge/pages/fedcba654321)", {"abc123def456", "fedcba654321"}),
    ("/pages/abc123def456 at the start of the body", {"abc123def456"}),
    ("twice: /pages/abc123def456 /pages/abc123def456", {"abc123def456"}),
    ("[[ENG/Deploy Runbook]] is not a link", set()),
    ("[[abc123def456]] neither", set()),
    ("a title is not a link: ENG/Deploy Runbook", set()),
    ("another site's path https://example.com/pages/abc123def456", set()),
    ("inline `see /pages/abc123def456` code", set()),
    ("``double `tick` /pages/abc123def456`` code", set()),
    ("```\n[x](#/knowledge/pages/abc123def456)\n```\nafter", set()),
    ("~~~md\n/pages/abc123def456\n~~~", set()),
    ("para\n\n    /pages/abc123def456 indented code\n\nafter", set()),
    ("```\ncode\n```\n[real](#/knowledge/pages/abc123def456)", {"abc123def456"}),
    ("`a` [real](/pages/abc123def456) `b`", {"abc123def456"}),
])
def test_extract_links_by_id_outside_code(body, expected):
    assert extract_links(body) == expected


def test_a_link_in_a_nested_list_item_is_not_code():
    """A list nested with four spaces is a list, not an indented code block (CommonMark): the link
    in it counts for "Linked from"."""
    body = "- Runbooks\n    - [Deploy](#/knowledge/pages/abc123def456)\n    - [Rollback](/pages/fedcba654321)\n"
    assert extract_links(body) == {"abc123def456", "fedcba654321"}


def test_a_continuation_line_indented_four_spaces_is_not_code():
    """An indented code block cannot interrupt a paragraph: an indented line straight after text
    is the paragraph's own."""
    body = "The deploy steps are in\n    [the runbook](#/knowledge/pages/abc123def456), read it first.\n"
    assert extract_links(body) == {"abc123def456"}


def test_link_to_is_the_grammar_extract_links_reads():
    md = link_to("abc123def456", "Deploy Runbook")
    assert md == "[Deploy Runbook](#/knowledge/pages/abc123def456)"
    assert extract_links(f"See {md}.") == {"abc123def456"}


def test_a_read_names_its_backend_turn_and_phase(kb, page):
    kb.record_read("eng-bot", "search", [kb.resolve(page.id)], query="q", turn="t-42", phase="plan")
    kb.record_read("eng-bot", "prefetch", [kb.resolve(page.id)], query="q")  # before the first phase: none
    reads = {r["via"]: r for r in kb.reads()}
    assert (reads["search"]["backend"], reads["search"]["turn"], reads["search"]["phase"]) == ("native", "t-42", "plan")
    assert (reads["prefetch"]["turn"], reads["prefetch"]["phase"]) == (None, None)


def test_migrations_are_named_and_recorded_once(node):
    from core.store.migrations import MIGRATIONS, migrate

    names = [r[0] for r in node.conn.execute("SELECT name FROM _migrations ORDER BY name")]
    assert names == sorted(fn.__name__ for fn in MIGRATIONS)
    assert migrate(node.conn) == []  # nothing runs twice


# -- reading is the knowledge app: KnowledgeBase enforces it on every read, whoever calls ----------------

def test_every_read_refuses_a_person_without_the_knowledge_app_and_an_admin_reads(make_home, tmp_path):
    home = make_home(config_with(actors={"kim": {"kind": "person", "knowledge": False},
                                         "boss": {"kind": "person", "admin": True, "knowledge": False}}))
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        page = kb.create_page("ENG", "Runbook", "v1\n", actor="alex")
        kb.save_page(page.id, "v2\n", base_revision=1, actor="alex")
        child = kb.create_page("ENG", "Step", "see the runbook", actor="alex", parent=page.id)
        kb.add_comment(page.id, "looks right", actor="alex")
        gone = kb.create_page("ENG", "Old", "x", actor="alex")
        kb.trash_page(gone.id, actor="alex")
        docs = tmp_path / "docs" / "ENG"
        docs.mkdir(parents=True)
        (docs / "new.md").write_text("# New\n\nbody\n", encoding="utf-8")

        reads = {
            "get_page": lambda who: kb.get_page(page.id, actor=who),
            "resolve": lambda who: kb.resolve("ENG/runbook", actor=who),
            "list_pages": lambda who: kb.list_pages("ENG", actor=who),
            "list_pages --parent": lambda who: kb.list_pages("ENG", parent=page.id, actor=who),
            "spaces": lambda who: kb.spaces(actor=who),
            "trash": lambda who: kb.trash(actor=who),
            "history": lambda who: kb.history(page.id, actor=who),
            "revision": lambda who: kb.revision(page.id, 1, actor=who),
            "diff": lambda who: kb.diff(page.id, 2, actor=who),
            "comments": lambda who: kb.comments(page.id, actor=who),
            "backlinks": lambda who: kb.backlinks(child.id, actor=who),
            "reads": lambda who: kb.reads(actor=who),
            "import --dry-run": lambda who: import_directory(kb, tmp_path / "docs", actor=who, dry_run=True),
        }
        before = node.log.last_seq()
        for name, read in reads.items():
            with pytest.raises(Refused) as exc:
                read("kim")
            assert exc.value.code == "forbidden", name
            assert "kim does not hold the knowledge app" in str(exc.value), name
        assert node.log.last_seq() == before  # a refused read writes nothing
        for name, read in reads.items():  # admin includes the knowledge app; the operator (alex) holds it
            assert read("boss") is not None, name
            assert read(None) is not None, name
        assert [r.revision for r in kb.history(page.id, actor="boss")] == [2, 1]
        assert kb.list_pages("ENG", parent=page.id, actor="boss").pages[0].id == child.id

        # an actor nobody configured is refused by every read too, before any row is looked at
        with pytest.raises(ConfigError) as unknown:
            kb.list_pages("ENG", actor="nobody")
        assert "no actor 'nobody' is configured" in str(unknown.value)
