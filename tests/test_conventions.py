"""Conventions from review (issue 37; spec 003 "Upkeep"): `crewlet run finish … --finding`, `crewlet upkeep run`,
the review queue, over a real home and a real git repository (test_runs.py's).

The same finding (folded: whitespace, case, trailing punctuation) in KNOWLEDGE_CONVENTION_MIN_RUNS separate runs in
one module becomes a PROPOSED CONVENTION there, by crewlet — not after one run fewer, not across two modules; an
accepted one whose harmful outcomes exceed its helpful ones by KNOWLEDGE_CONVENTION_HARM_MARGIN is archived, its
owners told (the review queue's HARMFUL_SIGNAL, and an issue: here a page under ENG's GAPS folder); a person puts
it back, and upkeep leaves it then."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_runs import Bank
from test_runs import repo  # noqa: F401 - a fixture, by name
from test_repos_support import GitRepo

from core.bank.entries import EntryBank
from core.bank.review import Review
from core.node import Node

RULE = "Use the cache helper, never a raw redis client."


@pytest.fixture
def b(tmp_path: Path, repo: GitRepo) -> Bank:  # noqa: F811 - the fixture above, by name
    bank = Bank(tmp_path, repo, holdout_rate=0.0, convention_min_runs=3, convention_harm_margin=3)
    with Node.open(bank.home) as node, EntryBank(node) as eb:
        eb.link_page("ENG/Caching", module="apps/server", actor="alex")
        web = eb.kb.create_page("ENG", "Web", "The web app.", actor="alex").id
        eb.link_page(web, module="apps/web", actor="alex")
    return bank


def finished_run(b: Bank, module: str, *findings: str, checks: str = "passed", review: str = "failed",
                 pr: str = "none", context: bool = False) -> str:
    run_id = b.json("run", "start", "--agent", "eng-bot", "--modules", module)["id"]
    if context:
        b.json("run", "context", run_id)
    args = [arg for f in findings for arg in ("--finding", f"{module}:{f}")]
    b.json("run", "finish", run_id, "--checks", checks, "--review", review, "--pr", pr, *args)
    return run_id


def conventions(b: Bank) -> list[tuple]:
    return b.rows("SELECT id, kind, body, scope, status, author, author_kind, page_id FROM entries "
                  "WHERE author = 'crewlet' ORDER BY created_at")


def test_a_finding_in_n_runs_of_one_module_is_proposed_there_not_after_n_minus_one_nor_across_modules(b):
    finished_run(b, "apps/server", RULE)
    finished_run(b, "apps/server", "  use the cache helper,   NEVER a raw redis client ")      # the same, folded
    finished_run(b, "apps/web", RULE)             # a third run, in another module: counts there, not here
    finished_run(b, "apps/server", "Use the cache helper, or a raw redis client.")   # reworded: another finding
    out = b.json("upkeep", "run")
    assert (out["proposed"], out["archived"]) == ([], []) and conventions(b) == []

    third = finished_run(b, "apps/server", RULE + "  ")
    out = b.json("upkeep", "run")
    assert [(p["module"], p["body"], len(p["runs"])) for p in out["proposed"]] == [("server:apps/server", RULE, 3)]
    assert third in out["proposed"][0]["runs"]
    [(entry_id, kind, body, scope, status, author, by, page_id)] = conventions(b)
    caching = b.rows("SELECT id FROM pages WHERE title = 'Caching'")[0][0]
    assert (kind, body, scope, status, author, by, page_id) == (
        "CONVENTION", RULE, "server:apps/server", "PROPOSED", "crewlet", "system", caching)
    with Node.open(b.home) as node, EntryBank(node) as eb:          # it waits for a person, as any proposed entry
        assert [q.entry.id for q in Review(eb).queue().entries] == [entry_id]
    assert b.json("upkeep", "run")["proposed"] == []                # proposed once
    assert len(conventions(b)) == 1


def test_a_module_no_page_is_linked_to_gets_no_proposal_and_the_report_says_so(tmp_path, repo):  # noqa: F811
    bank = Bank(tmp_path, repo, holdout_rate=0.0, convention_min_runs=2)
    for _ in range(2):
        finished_run(bank, "apps/web", RULE)
    out = bank.json("upkeep", "run")
    assert out["proposed"] == [] and [u["module"] for u in out["unplaced"]] == ["server:apps/web"]
    assert "no page is linked to server:apps/web" in bank.cli("upkeep", "run").stdout


def accepted_convention(b: Bank) -> str:
    for _ in range(3):
        finished_run(b, "apps/server", RULE)
    entry_id = b.json("upkeep", "run")["proposed"][0]["entry_id"]
    with Node.open(b.home) as node, EntryBank(node) as eb:
        Review(eb).accept(entry_id, actor="alex")
    return entry_id


def figures(b: Bank, entry_id: str) -> dict[str, int]:
    return dict(b.rows("SELECT effect, count(*) FROM entry_outcomes WHERE entry_id = ? GROUP BY effect", (entry_id,)))


def harmful_in_queue(b: Bank) -> dict[str, Any]:
    return {h["entry_id"]: h for h in b.json("review", "--reason", "HARMFUL_SIGNAL")["harmful"]}


def test_an_accepted_convention_past_the_harm_margin_is_archived_its_owners_told_and_a_person_puts_it_back(b):
    entry_id = accepted_convention(b)
    # given to a run on its module: checks passed (helpful), review failed (harmful) — even
    finished_run(b, "apps/server", context=True)
    assert figures(b, entry_id) == {"helpful": 1, "harmful": 1}
    # a run on apps/web is not given it (its scope): its failures do not count for it
    finished_run(b, "apps/web", checks="failed", pr="closed", context=True)
    assert b.json("upkeep", "run")["archived"] == []
    assert entry_id not in harmful_in_queue(b)
    # checks failed, review failed, pr closed: 4 harmful against 1 helpful, 3 more = the margin
    finished_run(b, "apps/server", checks="failed", pr="closed", context=True)
    assert figures(b, entry_id) == {"helpful": 1, "harmful": 4}
    out = b.json("upkeep", "run")
    [archived] = out["archived"]
    assert (archived["entry_id"], archived["helpful"], archived["harmful"]) == (entry_id, 1, 4)
    [(status, status_by, reason)] = b.rows("SELECT status, status_by, status_reason FROM entries WHERE id = ?",
                                           (entry_id,))
    assert (status, status_by) == ("ARCHIVED", "crewlet")
    assert "harmful outcomes 4 exceed helpful 1 by 3 (KNOWLEDGE_CONVENTION_HARM_MARGIN = 3)" in reason
    # its owners are told: the review queue, and an issue with the space of its page (no Plane: a GAPS page)
    told = harmful_in_queue(b)[entry_id]
    assert (told["archived_by_upkeep"], told["harmful"], told["helpful"], told["reasons"]) == (
        True, 4, 1, ["HARMFUL_SIGNAL"])
    issue = archived["issue"]
    assert issue["where"] == "page" and issue["ref"] == f"ENG/Convention archived: {RULE}"
    [(title, parent, body)] = b.rows("SELECT p.title, g.title, p.body FROM pages p JOIN pages g ON g.id = p.parent_id "
                                     "WHERE p.id = ?", (issue["page"],))
    assert (title, parent) == (f"Convention archived: {RULE}", "GAPS") and entry_id in body
    assert b.rows("SELECT kind, space FROM upkeep_issues") == [("convention", "ENG")]
    assert (f"HARMFUL_SIGNAL entry {entry_id}: 4 harmful outcomes, 1 helpful — archived by upkeep; accept to put it "
            "back") in b.cli("review").stdout
    assert b.json("upkeep", "run")["archived"] == []           # archived once, told once

    # a person puts it back: in use again, its count starting from that accept; upkeep leaves it
    with Node.open(b.home) as node, EntryBank(node) as eb:
        assert Review(eb).accept(entry_id, actor="alex", reason="still right").status == "STANDING"
    assert b.json("upkeep", "run")["archived"] == []
    assert entry_id not in harmful_in_queue(b)
    assert b.rows("SELECT status FROM entries WHERE id = ?", (entry_id,)) == [("STANDING",)]


def test_a_persons_convention_is_never_archived_by_upkeep(b):
    with Node.open(b.home) as node, EntryBank(node) as eb:
        mine = eb.add("ENG/Caching", "Name every cache key with its module.", kind="CONVENTION",
                      scope="apps/server", actor="alex").id
    for _ in range(2):
        finished_run(b, "apps/server", checks="failed", pr="closed", context=True)
    assert figures(b, mine)["harmful"] == 6
    assert b.json("upkeep", "run")["archived"] == []
    # its signal shows in the review queue for a person to decide (triage sees only proposed entries)
    assert harmful_in_queue(b)[mine]["archived_by_upkeep"] is False
