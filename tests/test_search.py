"""Keyword search and the Searcher seam: the indexer (first build, incremental passes, re-derivation,
backlinks) and NativeSearcher (outcomes, ranking, exclusions, scope, ancestors, snippets, reads), on
real homes in tmp_path."""
from __future__ import annotations

import json
import logging
import os
import shutil
import threading

import pytest
from conftest import config_with

from core.config import AUTO_DRAFTED_PARENT
from core.node import Node
from core.pages.service import KnowledgeBase
from core.search import indexer as indexer_mod
from core.search import lexical
from core.search.indexer import BUILD_FILE, Indexer, read_state, state_path
from core.search.native import NO_TERMS, OUT_OF_SCOPE, NativeSearcher
from core.search.seam import (MODES, UNKNOWN_CONTAINER, NO_EMBEDDINGS, NOT_SEARCHABLE_MESSAGE, NOT_SEARCHABLE_YET, SNIPPET_MAX, UNAVAILABLE,
                              Query)

FILLER = ("Quarterly planning notes cover hiring, budgets and the roadmap review. The office moves in spring. "
          "Lunch is on Thursdays. ")


def index(home) -> indexer_mod.IndexPass:
    with Indexer(home) as ix:
        return ix.run_pass()


def titles(result) -> list[str]:
    return [h.title for h in result.hits]


@pytest.fixture
def searcher(node):
    s = NativeSearcher(node)
    yield s
    s.close()


# -- the first-build gate and every outcome --------------------------------------------------------------


def test_before_the_first_build_a_search_says_not_searchable_yet(kb, searcher):
    kb.create_page("ENG", "Deploy Runbook", "how to deploy")
    assert searcher.can_search() is False
    res = searcher.search(Query("deploy"))
    assert res.hits == []
    assert res.outcome.served_mode is None
    assert res.outcome.degraded == NOT_SEARCHABLE_YET
    assert res.outcome.message == NOT_SEARCHABLE_MESSAGE
    assert res.outcome.coverage.complete is False and res.outcome.coverage.pages_indexed == 0


def test_after_the_first_build_nothing_matched_is_a_served_answer(home, kb, searcher):
    kb.create_page("ENG", "Deploy Runbook", "how to deploy")
    report = index(home)
    assert report.kind == "build" and report.indexed == 1
    searcher._checked_at = 0.0
    assert searcher.can_search() is True
    res = searcher.search(Query("kubernetes"))
    assert res.hits == [] and res.outcome.served_mode == "keyword"
    assert res.outcome.degraded == NO_EMBEDDINGS  # hybrid served its keyword half, and says so
    cov = res.outcome.coverage
    assert (cov.indexed_seq, cov.applied_seq, cov.pages_indexed, cov.complete) == (cov.applied_seq, cov.applied_seq, 1, True)


def test_an_empty_company_after_its_first_build_is_nothing_matched_not_still_building(home, searcher):
    index(home)
    res = searcher.search(Query("anything at all"))
    assert res.outcome.served_mode == "keyword" and res.hits == []


def test_the_first_build_is_durable_and_later_edits_are_ordinary_staleness(home, node, kb):
    kb.create_page("ENG", "Deploy Runbook", "how to deploy")
    index(home)
    first = read_state(home.index_dir)
    assert first is not None and first.first_build_at > 0
    kb.create_page("ENG", "Deploy checklist", "deploy steps")   # not indexed yet
    with Node.open(home) as other:                                # a new process's view of the same home
        s = NativeSearcher(other)
        assert s.can_search()
        res = s.search(Query("deploy", mode="keyword"))
        assert res.outcome.served_mode == "keyword" and res.outcome.degraded is None
        assert titles(res) == ["Deploy Runbook"]
        assert res.outcome.coverage.behind >= 1 and res.outcome.coverage.complete is False
        s.close()
    index(home)
    assert read_state(home.index_dir).first_build_at == first.first_build_at


def test_modes(home, kb, searcher):
    kb.create_page("ENG", "Deploy Runbook", "how to deploy")
    index(home)
    kw = searcher.search(Query("deploy", mode="keyword"))
    assert (kw.outcome.served_mode, kw.outcome.degraded, kw.outcome.modes) == ("keyword", None, list(MODES))
    hy = searcher.search(Query("deploy"))
    assert (hy.outcome.served_mode, hy.outcome.degraded) == ("keyword", NO_EMBEDDINGS)
    assert titles(hy) == titles(kw) == ["Deploy Runbook"]
    se = searcher.search(Query("deploy", mode="semantic"))
    assert se.hits == [] and se.outcome.served_mode is None and se.outcome.degraded == NO_EMBEDDINGS
    assert "shares no word" in se.outcome.message
    bad = searcher.search(Query("deploy", mode="telepathy"))
    assert bad.outcome.served_mode is None and bad.outcome.degraded == UNAVAILABLE


def test_a_search_that_fails_answers_unavailable_rather_than_raising(home, kb, searcher, monkeypatch, caplog):
    kb.create_page("ENG", "Deploy Runbook", "how to deploy")
    index(home)
    st = read_state(home.index_dir)
    shutil.rmtree(home.index_dir / st.dir)          # the state names an index that is gone
    opened = []
    real_open = lexical.open_index
    monkeypatch.setattr(lexical, "open_index", lambda path: (opened.append(path), real_open(path))[1])
    fresh = NativeSearcher(searcher.node)
    with caplog.at_level(logging.DEBUG, logger="crewlet.search"):
        res = fresh.search(Query("deploy"))
    assert res.hits == [] and res.outcome.served_mode is None and res.outcome.degraded == UNAVAILABLE
    # the real cause (whoosh's EmptyIndexError), not an error of the handler itself
    assert "does not exist" in res.outcome.message and "missing or damaged" in res.outcome.message
    assert "WhooshError" not in res.outcome.message and "attribute" not in res.outcome.message
    assert len(opened) == 2                          # retried once, after forgetting what was open
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].exc_info is None and "\n" not in warnings[0].getMessage()
    assert any(r.levelno == logging.DEBUG and r.exc_info for r in caplog.records)   # the traceback: debug only
    unknown = fresh.search(Query("deploy", actor="nobody"))
    assert unknown.outcome.degraded == UNAVAILABLE and "nobody" in unknown.outcome.message
    fresh.close()


def test_an_index_switched_under_a_search_is_read_again_once(home, kb, searcher, monkeypatch):
    from whoosh.index import EmptyIndexError

    kb.create_page("ENG", "Deploy Runbook", "how to deploy")
    index(home)
    real_open = lexical.open_index
    calls = []

    def switched_once(path):
        calls.append(path)
        if len(calls) == 1:  # what a re-derivation's switch looks like between the state and the open
            raise EmptyIndexError(f"Index 'MAIN' does not exist in {path}")
        return real_open(path)

    monkeypatch.setattr(lexical, "open_index", switched_once)
    res = searcher.search(Query("deploy", mode="keyword"))
    assert res.outcome.served_mode == "keyword" and titles(res) == ["Deploy Runbook"]
    assert len(calls) == 2


def test_query_text_is_words_never_syntax(home, kb, searcher):
    kb.create_page("ENG", "Deploy Runbook", "how to deploy the title field")
    index(home)
    for text in ['deploy AND (title:x OR "quoted")', "deploy* ~2 ^3 -not +must", "[[ENG/Deploy]] {x} \\"]:
        res = searcher.search(Query(text, mode="keyword"))
        assert res.outcome.served_mode == "keyword", text
    assert titles(searcher.search(Query('deploy AND (title:x OR "quoted")', mode="keyword"))) == ["Deploy Runbook"]


def test_a_query_with_no_searchable_word_is_not_nothing_matched(home, kb, searcher):
    kb.create_page("ENG", "Deploy Runbook", "how to deploy the title field")
    index(home)
    for text in ["", "   ", "!!! ???", "the and of"]:
        for mode in ("keyword", "hybrid", "semantic"):
            res = searcher.search(Query(text, mode=mode))
            assert res.hits == [] and res.outcome.served_mode is None, (text, mode)
            if mode == "semantic" and text.strip():
                # any text can be embedded: what is missing here is a vector to rank by meaning
                assert res.outcome.degraded == NO_EMBEDDINGS, (text, mode)
                continue
            assert res.outcome.degraded == NO_TERMS, (text, mode)
            assert "no word that can be searched" in res.outcome.message
    assert "empty" in searcher.search(Query("  ")).outcome.message
    assert "common words" in searcher.search(Query("the and of")).outcome.message


def test_a_long_query_keeps_the_words_the_index_holds_and_says_what_it_left_out(home, kb, searcher):
    kb.create_page("ENG", "Deploy Runbook", "how to deploy")
    kb.create_page("ENG", "Vocabulary", " ".join(f"word{i}" for i in range(70)))
    index(home)
    unknown = " ".join(f"zz{i}q" for i in range(70))
    res = searcher.search(Query(unknown + " deploy", mode="keyword"))   # the 71st distinct word is the one that matters
    assert titles(res) == ["Deploy Runbook"]
    assert res.outcome.message == ""                                     # unknown words match nothing: nothing lost
    res = searcher.search(Query(" ".join(f"word{i}" for i in range(70)), mode="keyword"))
    assert titles(res) == ["Vocabulary"]
    assert "6 of them" in res.outcome.message and str(lexical.MAX_QUERY_TERMS) in res.outcome.message


# -- ranking ------------------------------------------------------------------------------------------------


def test_a_short_page_about_a_term_outranks_a_long_page_that_mentions_it_often(home, kb, searcher):
    for i in range(12):
        kb.create_page("ENG", f"Notes {i}", FILLER * 3)
    kb.create_page("ENG", "Office handbook", (FILLER * 10 + "We keep an eye on rate limits. ") * 30)
    kb.create_page("ENG", "Rate limits", "How we handle rate limits: back off on every 429 and retry later.")
    index(home)
    res = searcher.search(Query("rate limits", mode="keyword"))
    assert titles(res)[:2] == ["Rate limits", "Office handbook"]
    assert res.hits[0].score > res.hits[1].score > 0


def test_stemming_finds_other_forms_of_a_word(home, kb, searcher):
    kb.create_page("ENG", "Deployment", "We deployed the services yesterday.")
    index(home)
    assert titles(searcher.search(Query("deploying service", mode="keyword"))) == ["Deployment"]


def test_limit_defaults_to_eight(home, kb, searcher):
    for i in range(12):
        kb.create_page("ENG", f"Deploy note {i}", "deploy")
    index(home)
    assert len(searcher.search(Query("deploy")).hits) == 8
    assert len(searcher.search(Query("deploy", limit=3)).hits) == 3
    assert len(searcher.search(Query("deploy", limit=20)).hits) == 12


# -- exclusions, scope, ancestors, snippets -------------------------------------------------------------------


def test_exclusions_cost_a_result_its_page_never_a_place(home, kb, searcher):
    # the pages that would lead the ranking are all ones no result may be
    for i in range(3):
        kb.create_page("SKILLS", f"Deploy deploy skill {i}", "deploy deploy deploy")
    drafts = kb.create_page("ENG", AUTO_DRAFTED_PARENT, "")
    sub = kb.create_page("ENG", "Drafts of deploy", "deploy deploy deploy", parent=drafts.id)
    kb.create_page("ENG", "Deeper deploy draft", "deploy deploy deploy", parent=sub.id)
    kb.create_page("PROD", "[Auto-draft] Deploy deploy", "deploy deploy deploy")
    normal = [kb.create_page("ENG", f"Deploy guide {i}", "deploy " + FILLER * (i + 1)).title for i in range(5)]
    index(home)
    res = searcher.search(Query("deploy", limit=5))
    assert sorted(titles(res)) == sorted(normal)
    assert all(h.container != "SKILLS" for h in res.hits)
    # [] disables the ancestor exclusion (and its [Auto-draft] backstop); the skills container stays out
    shown = titles(searcher.search(Query("deploy", limit=20, exclude_ancestors=[])))
    assert {"Drafts of deploy", "Deeper deploy draft", "[Auto-draft] Deploy deploy"} <= set(shown)
    assert not any(t.startswith("Deploy deploy skill") for t in shown)
    # asking for the skills container by name still returns none of it
    res = searcher.search(Query("deploy", containers=["SKILLS"]))
    assert res.hits == [] and res.outcome.served_mode == "keyword" and "SKILLS" in res.outcome.message


def test_a_listed_ancestor_title_excludes_its_whole_subtree(home, kb, searcher):
    arch = kb.create_page("ENG", "Archive", "")
    old = kb.create_page("ENG", "Old deploy notes", "deploy", parent=arch.id)
    kb.create_page("ENG", "Older deploy notes", "deploy", parent=old.id)
    kb.create_page("ENG", "Current deploy notes", "deploy")
    index(home)
    assert titles(searcher.search(Query("deploy", exclude_ancestors=["archive"]))) == ["Current deploy notes"]
    assert len(searcher.search(Query("deploy")).hits) == 3


def test_trashed_pages_never_appear_even_before_the_index_catches_up(home, kb, searcher):
    p = kb.create_page("ENG", "Deploy Runbook", "deploy")
    kb.create_page("ENG", "Deploy FAQ", "deploy")
    index(home)
    kb.trash_page(p.id)
    assert titles(searcher.search(Query("deploy"))) == ["Deploy FAQ"]  # the rows say so already


def test_scope_narrows_to_its_containers_and_a_callers_containers_narrow_within_it(make_home):
    home = make_home(config_with(knowledge={"scope": ["ENG", "PROD"]}))
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        for c in ("ENG", "PROD", "LEAD", "HOME"):
            kb.create_page(c, f"Deploy in {c}", "deploy")
        index(home)
        s = NativeSearcher(node)
        assert sorted(h.container for h in s.search(Query("deploy")).hits) == ["ENG", "PROD"]
        assert [h.container for h in s.search(Query("deploy", containers=["PROD"])).hits] == ["PROD"]
        res = s.search(Query("deploy", containers=["LEAD"]))
        assert res.hits == [] and res.outcome.served_mode is None and res.outcome.degraded == OUT_OF_SCOPE
        assert "LEAD is outside knowledge.scope" in res.outcome.message
        res = s.search(Query("deploy", containers=["LEAD", "PROD", "HOME"]))
        assert [h.container for h in res.hits] == ["PROD"] and res.outcome.served_mode == "keyword"
        assert "HOME, LEAD are outside knowledge.scope" in res.outcome.message
        # a container nobody declared and that holds nothing is a typo, refused like `crewlet pages NOPE`
        res = s.search(Query("deploy", containers=["LEAD", "PROD", "NOPE"]))
        assert res.hits == [] and res.outcome.served_mode is None and res.outcome.degraded == UNKNOWN_CONTAINER
        assert "no space 'NOPE'" in res.outcome.message
        s.close()


def test_a_container_that_holds_no_pages_is_named(home, kb, searcher):
    kb.create_page("ENG", "Deploy Runbook", "deploy")
    index(home)
    res = searcher.search(Query("deploy", containers=["PROD"]))       # declared, and empty
    assert res.hits == [] and res.outcome.served_mode == "keyword"
    assert "container PROD holds no pages" in res.outcome.message
    res = searcher.search(Query("deploy", containers=["ENGG"]))       # neither declared nor holding a page
    assert res.hits == [] and res.outcome.served_mode is None and res.outcome.degraded == UNKNOWN_CONTAINER
    res = searcher.search(Query("deploy", containers=["ENG"]))
    assert titles(res) == ["Deploy Runbook"] and "holds no pages" not in res.outcome.message


def test_an_empty_scope_is_unscoped_and_containers_narrow(home, kb, searcher):
    for c in ("ENG", "PROD", "LEAD"):
        kb.create_page(c, f"Deploy in {c}", "deploy")
    index(home)
    assert sorted(h.container for h in searcher.search(Query("deploy")).hits) == ["ENG", "LEAD", "PROD"]
    assert sorted(h.container for h in searcher.search(Query("deploy", containers=["LEAD", "ENG"])).hits) == ["ENG", "LEAD"]


def test_a_hit_carries_its_ancestors_outermost_first_and_its_address(home, kb, searcher):
    top = kb.create_page("ENG", "Operations", "")
    mid = kb.create_page("ENG", "Runbooks", "", parent=top.id)
    leaf = kb.create_page("ENG", "Deploy", "how to deploy", parent=mid.id)
    index(home)
    (hit,) = searcher.search(Query("deploy")).hits
    assert (hit.title, hit.container, hit.page_id) == ("Deploy", "ENG", leaf.id)
    assert hit.ancestors == ["Operations", "Runbooks"]
    assert hit.url == f"#/knowledge/pages/{leaf.id}"
    kb.rename_page(top.id, "Ops")
    kb.move_page(leaf.id, top.id)
    index(home)
    assert searcher.search(Query("deploy")).hits[0].ancestors == ["Ops"]


def test_snippets_are_plain_text_at_most_200_characters_around_the_first_match(home, kb, searcher):
    body = ("---\ntitle: x\n---\n# Intro\n\n" + "Some **bold** words and a [link](https://example.com/x) here. " * 20
            + "\n\n## Rollback\n\nTo `rollback`, run the *rollback* job from the [pipeline](#/knowledge/pages/abcd1234).\n\n"
            + "```\nrollback --now\n```\n" + "More text after. " * 20)
    kb.create_page("ENG", "Release process", body)
    kb.create_page("ENG", "Tiny", "A short rollback page.")
    index(home)
    hits = {h.title: h for h in searcher.search(Query("rollbacks")).hits}
    snip = hits["Release process"].snippet
    assert len(snip) <= SNIPPET_MAX
    assert "rollback" in snip.lower() and snip.startswith("…") and snip.endswith("…")
    for syntax in ("**", "](", "```", "`", "#", "---", "https://"):
        assert syntax not in snip, syntax
    assert hits["Tiny"].snippet == "A short rollback page."


# -- the index catching up ----------------------------------------------------------------------------------


def test_each_kind_of_change_reaches_the_index_on_the_next_pass(home, node, kb):
    s = NativeSearcher(node)
    parent = kb.create_page("ENG", "Platform", "")
    p = kb.create_page("ENG", "Deploy Runbook", "alpha words")
    index(home)

    def kw(text):
        return titles(s.search(Query(text, mode="keyword", limit=20)))

    def pages_indexed():
        return s.search(Query("x", mode="keyword")).outcome.coverage.pages_indexed

    assert kw("alpha") == ["Deploy Runbook"]
    kb.save_page(p.id, "bravo words", base_revision=p.revision)
    assert kw("bravo") == []                      # behind the rows until the pass
    assert index(home).kind == "incremental"
    assert kw("bravo") == ["Deploy Runbook"] and kw("alpha") == []
    kb.rename_page(p.id, "Release Checklist")
    index(home)
    assert kw("checklist") == ["Release Checklist"] and kw("runbook") == []
    kb.move_page(p.id, parent.id)
    index(home)
    assert s.search(Query("checklist")).hits[0].ancestors == ["Platform"]
    before = pages_indexed()
    kb.trash_page(p.id)
    report = index(home)
    assert report.deleted == 1 and pages_indexed() == before - 1 and kw("checklist") == []
    kb.restore_page(p.id)
    index(home)
    assert kw("checklist") == ["Release Checklist"] and pages_indexed() == before
    kb.trash_page(p.id)
    kb.purge_page(p.id)
    report = index(home)
    assert report.deleted >= 1 and kw("checklist") == [] and pages_indexed() == before - 1
    assert index(home).kind == "none"
    s.close()


def test_reads_and_comments_do_not_make_the_index_look_behind(home, kb, searcher):
    p = kb.create_page("ENG", "Deploy Runbook", "deploy")
    index(home)
    kb.add_comment(p.id, "nice")
    kb.get_page(p.id, actor="eng-bot")
    cov = searcher.search(Query("deploy")).outcome.coverage
    assert cov.complete and cov.behind == 0 and cov.indexed_seq == cov.applied_seq


def test_an_incremental_pass_can_be_bounded_and_resumes(home, kb):
    kb.create_page("ENG", "Seed", "seed")
    index(home)
    for i in range(7):
        kb.create_page("ENG", f"Page {i}", "zulu")
    with Indexer(home) as ix:
        first = ix.run_pass(max_rows=3)
        assert first.more and first.indexed == 3 and first.behind > 0
        while ix.run_pass(max_rows=3).more:
            pass
        assert ix.status().behind == 0
    s = NativeSearcher(kb.node)
    assert len(s.search(Query("zulu", limit=20)).hits) == 7


def test_a_killed_first_build_resumes_where_it_stopped(home, kb, searcher):
    for i in range(7):
        kb.create_page("ENG", f"Page {i}", "zulu")
    stop = threading.Event()
    calls = []

    def progress(done, total):
        calls.append((done, total))
        if done >= 2:
            stop.set()

    with Indexer(home, chunk=2) as ix:
        report = ix.run_pass(progress=progress, stop=stop)
        assert report.kind == "stopped"
        assert not state_path(home.index_dir).exists()          # still not searchable
        assert json.loads((home.index_dir / BUILD_FILE).read_text())["done"] == 2
        assert searcher.search(Query("zulu")).outcome.degraded == NOT_SEARCHABLE_YET
        report = ix.run_pass(progress=lambda d, t: calls.append((d, t)))
        assert report.kind == "build"
        assert calls[-1][0] == 7 and not (home.index_dir / BUILD_FILE).exists()
    assert len(searcher.search(Query("zulu", limit=20)).hits) == 7


def test_a_derivation_change_re_derives_every_row_once_by_itself(home, kb, searcher, monkeypatch):
    for i in range(5):
        kb.create_page("ENG", f"Deploy {i}", "deploy")
    index(home)
    old = read_state(home.index_dir)
    monkeypatch.setattr(lexical, "INDEX_DERIVATION", lexical.INDEX_DERIVATION + 1)
    with Indexer(home) as ix:
        assert ix.status().rebuild_pending
        # the old index keeps serving until the new one is ready
        assert len(searcher.search(Query("deploy")).hits) == 5
        report = ix.run_pass()
        assert report.kind == "rebuild" and report.indexed == 5
        new = read_state(home.index_dir)
        assert new.derivation == old.derivation + 1 and new.dir != old.dir
        assert new.first_build_at == old.first_build_at and new.pages == 5
        assert ix.run_pass().kind == "none"              # once
        assert not ix.status().rebuild_pending
    res = searcher.search(Query("deploy"))
    assert len(res.hits) == 5 and res.outcome.served_mode is not None


def test_readers_are_served_while_the_indexer_commits(home, node, kb):
    for i in range(20):
        kb.create_page("ENG", f"Common {i}", "common words " + FILLER)
    index(home)
    s = NativeSearcher(node)
    errors: list[str] = []
    done = threading.Event()

    def writer():
        try:
            with Indexer(home) as ix:
                for i in range(25):
                    kb.create_page("ENG", f"More common {i}", "common " + FILLER)
                    ix.run_pass()  # a commit per page: new segments, merges
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(repr(exc))
        finally:
            done.set()

    t = threading.Thread(target=writer)
    t.start()
    searches = 0
    seen_sizes = set()
    while not done.is_set() or searches < 5:
        res = s.search(Query("common", limit=100))
        searches += 1
        if res.outcome.served_mode != "keyword":
            errors.append(res.outcome.message)
        ids = [h.page_id for h in res.hits]
        if len(ids) != len(set(ids)):
            errors.append("duplicate hits")
        seen_sizes.add(res.outcome.coverage.pages_indexed)
    t.join()
    assert errors == []
    assert len(s.search(Query("common", limit=100)).hits) == 45
    assert len(seen_sizes) >= 3, seen_sizes   # the searches really were served across many commits
    s.close()


# -- what agents read ---------------------------------------------------------------------------------------


def test_an_agents_search_is_one_read_listing_the_hits_a_persons_is_none(home, kb, searcher):
    a = kb.create_page("ENG", "Deploy Runbook", "deploy deploy")
    b = kb.create_page("ENG", "Deploy FAQ", "deploy")
    index(home)
    searcher.search(Query("deploy", actor="alex"))
    searcher.search(Query("deploy", actor="sam"))
    searcher.search(Query("deploy"))  # the operator, a person
    assert kb.reads() == []
    res = searcher.search(Query("deploy", actor="eng-bot"))
    (read,) = kb.reads()
    assert (read["actor"], read["via"], read["query"]) == ("eng-bot", "search", "deploy")
    assert [(p["id"], p["rank"]) for p in read["pages"]] == [(h.page_id, i + 1) for i, h in enumerate(res.hits)]
    assert {p["id"] for p in read["pages"]} == {a.id, b.id}
    searcher.search(Query("kubernetes", actor="eng-bot"))  # no hits: nothing recorded
    assert len(kb.reads()) == 1


# -- backlinks ---------------------------------------------------------------------------------------------


def test_backlinks_are_derived_by_the_same_pass(home, kb):
    b = kb.create_page("ENG", "Target B", "b")
    c = kb.create_page("ENG", "Target C", "c")
    d = kb.create_page("ENG", "Target D", "d")
    a = kb.create_page("ENG", "Source A", (
        f"See [B](#/knowledge/pages/{b.id}) and /pages/{c.id}.\n\n"
        f"```\n#/knowledge/pages/{d.id}\n```\nand `#/knowledge/pages/{d.id}` and [[ENG/Target D]] and "
        f"[me](#/knowledge/pages/PLACEHOLDER)"))
    kb.save_page(a.id, kb.resolve(a.id).body.replace("PLACEHOLDER", a.id), base_revision=kb.resolve(a.id).revision)
    assert kb.backlinks(b.id) == []          # derived by the indexer, not the applier
    index(home)
    assert [p.id for p in kb.backlinks(b.id)] == [a.id]
    assert [p.id for p in kb.backlinks(c.id)] == [a.id]
    assert kb.backlinks(d.id) == []          # inside code, or a [[wiki link]]: counts for nothing
    assert kb.backlinks(a.id) == []          # a page's link to itself is not a backlink
    kb.save_page(a.id, f"only /pages/{c.id} now", base_revision=kb.resolve(a.id).revision)
    index(home)
    assert kb.backlinks(b.id) == [] and [p.id for p in kb.backlinks(c.id)] == [a.id]
    kb.trash_page(a.id)
    kb.purge_page(a.id)
    index(home)
    assert kb.backlinks(c.id) == []
    assert kb.conn.execute("SELECT count(*) FROM page_links").fetchone()[0] == 0


def test_index_status_says_what_the_index_covers(home, kb):
    with Indexer(home) as ix:
        st = ix.status()
        assert not st.first_build_done and st.pages_indexed == 0 and st.derivation is None
        kb.create_page("ENG", "Deploy Runbook", "deploy")
        ix.run_pass()
        kb.create_page("ENG", "Deploy FAQ", "deploy")
        st = ix.status()
        assert st.first_build_done and st.pages_indexed == 1 and st.behind == 1
        assert st.derivation == st.current_derivation == lexical.INDEX_DERIVATION and not st.rebuild_pending
        assert set(st.to_json()) >= {"first_build_done", "indexed_seq", "applied_seq", "behind", "pages_indexed",
                                     "derivation", "current_derivation", "rebuild_pending"}


def test_one_pass_at_a_time_across_indexers(home, kb):
    kb.create_page("ENG", "Deploy Runbook", "deploy")
    a, b = Indexer(home), Indexer(home)
    try:
        with a._exclusive(wait=False) as mine:
            assert mine
            assert b.run_pass().kind == "busy"
        assert b.run_pass().kind == "build"
    finally:
        a.close()
        b.close()


def test_can_search_and_search_agree(home, kb, searcher):
    kb.create_page("ENG", "Deploy Runbook", "deploy")
    assert searcher.can_search() is False
    assert searcher.search(Query("deploy")).outcome.degraded == NOT_SEARCHABLE_YET
    index(home)
    assert searcher.can_search() is True       # no waiting: the state file is what search reads too
    assert searcher.search(Query("deploy")).outcome.served_mode == "keyword"
    st = read_state(home.index_dir)
    shutil.rmtree(home.index_dir / st.dir)     # the index the state names is gone
    assert searcher.can_search() is False
    searcher.close()
    assert searcher.search(Query("deploy")).outcome.degraded == UNAVAILABLE
    shutil.rmtree(home.index_dir)
    assert searcher.can_search() is False
    assert searcher.search(Query("deploy")).outcome.degraded == NOT_SEARCHABLE_YET
    assert searcher.backend() == "native"


def test_a_company_without_a_backend_cannot_search(make_home):
    home = make_home(config_with(knowledge={"backend": "none", "scope": []}))
    with Node.open(home) as node:
        KnowledgeBase(node).create_page("ENG", "Deploy Runbook", "deploy")
        index(home)
        s = NativeSearcher(node)
        assert s.can_search() is False
        res = s.search(Query("deploy"))
        assert res.hits == [] and res.outcome.served_mode is None and res.outcome.degraded == UNAVAILABLE
        assert "knowledge.backend is 'none'" in res.outcome.message
        s.close()


# -- what the index derives, and its durability -------------------------------------------------------------


def test_an_escaped_identifier_is_found_whole_and_by_its_parts(home, kb, searcher):
    kb.create_page("ENG", "Window messages", "Send WM\\_PALETTECHANGED when the \\*palette\\* changes.")
    kb.create_page("ENG", "Unrelated", "nothing here about windows")
    index(home)
    for text in ("WM_PALETTECHANGED", "wm_palettechanged", "palettechanged", "WM\\_PALETTECHANGED"):
        res = searcher.search(Query(text, mode="keyword"))
        assert titles(res) == ["Window messages"], text
    (hit,) = searcher.search(Query("palettechanged", mode="keyword")).hits
    assert "WM_PALETTECHANGED" in hit.snippet and "*palette*" in hit.snippet


def test_an_index_of_the_previous_derivation_is_re_derived_with_escapes_and_rules(home, kb, searcher, monkeypatch):
    kb.create_page("ENG", "Window messages", "Send WM\\_PALETTECHANGED now.")
    kb.create_page("ENG", "Rule first", "---\n\nOpening paragraph about zebras.\n\n---\n\nrest")
    current = lexical.INDEX_DERIVATION
    monkeypatch.setattr(lexical, "INDEX_DERIVATION", current - 1)
    index(home)
    assert read_state(home.index_dir).derivation == current - 1
    monkeypatch.setattr(lexical, "INDEX_DERIVATION", current)
    report = index(home)                              # by itself: no one asked for a rebuild
    assert report.kind == "rebuild" and read_state(home.index_dir).derivation == current
    assert titles(searcher.search(Query("palettechanged", mode="keyword"))) == ["Window messages"]
    assert titles(searcher.search(Query("zebras", mode="keyword"))) == ["Rule first"]


def test_each_commit_reaches_the_disk_before_the_state_that_counts_on_it(home, kb, monkeypatch):
    kb.create_page("ENG", "Deploy Runbook", "deploy")
    index(home)
    st = read_state(home.index_dir)
    ixdir = home.index_dir / st.dir
    before = set(os.listdir(ixdir))
    kb.create_page("ENG", "Deploy FAQ", "deploy")
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd):
        synced.append(os.path.realpath(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    assert index(home).kind == "incremental"
    new_files = [str((ixdir / n).resolve()) for n in sorted(set(os.listdir(ixdir)) - before) if not n.endswith(".lock")]
    gen = lexical.latest_generation(lexical.open_index(ixdir))
    toc = str((ixdir / f"_{lexical.INDEX_NAME}_{gen}.toc").resolve())
    assert toc in new_files and len(new_files) >= 2       # the new TOC and the new segment's file(s)
    state = state_path(home.index_dir).resolve()   # its temporary file: .state.json.PID.RANDOM.tmp beside it
    state_at = next(i for i, f in enumerate(synced)
                    if f.startswith(str(state.parent / f".{state.name}.")) and f.endswith(".tmp"))
    for f in new_files + [str(ixdir.resolve())]:
        assert f in synced, f
        assert synced.index(f) < state_at, f              # before the state names the position
    assert len(synced[:state_at]) <= len(new_files) + 1  # cheap: the commit's files and the directory


def test_ancestors_come_from_the_knowledge_bases_walk_once_per_parent(home, kb, searcher, monkeypatch):
    top = kb.create_page("ENG", "Operations", "")
    for i in range(3):
        kb.create_page("ENG", f"Deploy {i}", "deploy", parent=top.id)
    index(home)
    walked = []
    real = KnowledgeBase.ancestors

    def spy(self, parent_id):
        walked.append(parent_id)
        return real(self, parent_id)

    monkeypatch.setattr(KnowledgeBase, "ancestors", spy)
    res = searcher.search(Query("deploy"))
    assert [h.ancestors for h in res.hits] == [["Operations"]] * 3
    assert walked == [top.id]
