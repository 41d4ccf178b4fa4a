"""Consolidation (spec 003, "Consolidation"; issue 37; docs/consolidation.md) on real homes: a real git repository
the entries cite, the real Whoosh index for search and recall_knowledge, load_context as an agent gets it.

A proposal stores the new body and the entries it folds, and the page does not change; the review queue lists it
first; an agent's decision is refused (by the bank and by the store); accepting saves the body and makes the entries
CONSOLIDATED in one record — still served (load_context, recall, search) as evidence for the page, ranked below
it, never decayed; accepting is refused when the page changed since or an entry is no longer STANDING; a revert
restores the old body and the entries as STANDING; undoing it folds back only the ones still STANDING — with the
served entries checked at each step. And the CLI and the MCP tool over the same."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import config_with, new_home
from mcp_client import anyio_backend  # noqa: F401 - a fixture, by name
from mcp_client import call, connect
from test_app_support import app_for, wait_screen, wait_until
from test_repos_support import GitRepo, numbered
from typer.testing import CliRunner

from core.ask.recall import recall
from core.bank.consolidation import Consolidation
from core.bank.context import load_context
from core.bank.decay import decide as decay_decide
from core.bank.entries import EntryBank
from core.bank.review import Review
from core.bank.trust import GROUNDED
from core.errors import Invalid, Refused
from core.node import Node
from core.pages import records
from core.pages.entry_model import ARCHIVED, CONSOLIDATED, STANDING
from core.paths import Home
from core.search.indexer import Indexer
from core.search.native import NativeSearcher
from core.search.seam import Query
from crewlet_tui.cli import app as cli_app

QUESTION = "session cache ten minutes tenant prefix"
FACTS = ("The session cache holds an entry for ten minutes.",
         "Session cache keys carry the tenant id as their prefix.",
         "The session cache evicts the least recently used key first.")
OLD_BODY = "\n\n".join(["# Caching", "The session cache sits in front of the database."]
                       + [f"Paragraph {i} is about the billing reports, the invoices and the ledgers." for i in range(30)])
NEW_BODY = OLD_BODY + ("\n\nThe session cache holds an entry for ten minutes; its keys carry the tenant id as their "
                       "prefix, and it evicts the least recently used key first.")
YEARS = 10 * 365 * 86_400_000


class World:
    """A home whose [repositories.server] is a real git checkout; ENG/Caching with three grounded entries (each
    citing the code, accepted by a person) and ENG/Other with one, for decay's comparison."""

    def __init__(self, tmp_path: Path) -> None:
        g = GitRepo(tmp_path / "server")
        g.write("src/cache.py", "TTL_SECONDS = 600\nPREFIX = 'tenant'\nPOLICY = 'lru'\n" + numbered(9))
        sha = g.commit("first")
        self.home: Home = new_home(tmp_path / "home", config_with(repositories={"server": {"path": str(g.path)}}))
        self.node = Node.open(self.home)
        self.bank = EntryBank(self.node)
        self.kb = self.bank.kb
        self.c = Consolidation(self.bank)
        self.page = self.kb.create_page("ENG", "Caching", OLD_BODY, actor="alex").id
        other = self.kb.create_page("ENG", "Other", "Elsewhere.", actor="alex").id

        def grounded(page: str, body: str, line: int) -> str:
            cite = {"repository": "server", "path": "src/cache.py", "lines": [line, line], "commit": sha}
            return self.bank.add(page, body, citations=[cite], distinct=True, actor="alex").id

        self.e = [grounded(self.page, body, i) for i, body in enumerate(FACTS, 1)]
        self.control = grounded(other, "Invoices are kept for seven years.", 4)
        self.reindex()

    def reindex(self) -> None:
        with Indexer(self.home) as ix:
            ix.run_pass()

    def close(self) -> None:
        self.bank.close()
        self.node.close()

    def body(self) -> str:
        return self.kb.get_page(self.page, actor="alex").body

    def statuses(self) -> list[str]:
        return [self.bank.show(i).status for i in self.e]

    def served(self) -> dict[str, Any]:
        """What an agent is served now: load_context's entries (id -> status, evidence_for), recall's order and
        the keyword search's order (a page as 'page', an entry by its id)."""
        self.reindex()
        ctx = load_context(self.bank, "server:src", actor="eng-bot", record=False).to_json()
        found = recall(self.node, QUESTION, "eng-bot").found
        searcher = NativeSearcher(self.node)
        try:
            hits = searcher.search(Query(QUESTION, mode="keyword", actor="eng-bot", limit=20)).hits
        finally:
            searcher.close()
        return {
            "context": {e["id"]: (e["status"], e["evidence_for"]) for e in ctx["entries"] if e["id"] != self.control},
            "recall": [r.entry.id if r.entry else ("page" if r.hit.page_id == self.page else "other") for r in found],
            "recall_status": {r.entry.id: r.entry.status for r in found if r.entry},
            "search": [h.entry_id or ("page" if h.page_id == self.page else "other") for h in hits],
        }


@pytest.fixture
def w(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("CREWLET_NOW", raising=False)
    world = World(tmp_path)
    yield world
    world.close()


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert text and "\n" not in text
    return text


def _below_page(order: list[str], ids: list[str]) -> None:
    assert "page" in order, order
    for i in ids:
        assert i in order and order.index(i) > order.index("page"), (i, order)


def test_accepted_reverted_and_the_revert_undone_with_what_is_served_at_each_step(w):
    before = w.served()
    # standing: each served beside the page, as itself (the entries are short and outrank the long page)
    assert before["context"] == {i: (STANDING, None) for i in w.e}
    assert set(w.e) <= set(before["search"]) and before["search"].index(w.e[0]) < before["search"].index("page")
    assert before["recall"].index(w.e[0]) < before["recall"].index("page")

    # proposed by an agent: stored, the page and the entries unchanged, first in the review queue
    p = w.c.propose("ENG/Caching", NEW_BODY, w.e, actor="eng-bot", message="three facts, one paragraph")
    assert (p.state, p.base_revision, p.entries, p.proposed_kind) == ("OPEN", 1, w.e, "agent")
    assert w.body() == OLD_BODY and w.statuses() == [STANDING] * 3
    queue = Review(w.bank).queue()
    assert [q["id"] for q in queue.proposals] == [p.id] and queue.proposals[0]["title"] == "ENG/Caching"
    assert w.served()["context"] == before["context"]

    # an agent may not decide: refused by the bank, and by the store were the record written anyway
    seq = w.node.applied_seq()
    with pytest.raises(Refused) as exc:
        w.c.decide(p.id, "accept", actor="eng-bot")
    assert "person's" in _one_line(exc) and w.node.applied_seq() == seq
    out = w.node.submit_one(records.consolidation_decide("eng-bot", proposal_id=p.id, action="accept", by="agent"))
    assert (out.status, out.code) == ("refused", "forbidden")
    assert w.body() == OLD_BODY and w.statuses() == [STANDING] * 3 and w.c.show(p.id).state == "OPEN"

    # accepted: one record saves the body and consolidates the entries
    seq = w.node.applied_seq()
    p = w.c.decide(p.id, "accept", actor="alex")
    assert w.node.applied_seq() == seq + 1
    assert (p.state, p.applied_revision, p.folded) == ("ACCEPTED", 2, w.e)
    assert w.body() == NEW_BODY and w.statuses() == [CONSOLIDATED] * 3
    assert [r.kind for r in w.kb.history(w.page)][:1] == ["consolidate"]
    assert all(w.bank.show(i).tier == GROUNDED for i in w.e)          # they keep their tier
    assert Review(w.bank).queue().proposals == []
    s = w.served()
    assert s["context"] == {i: (CONSOLIDATED, w.page) for i in w.e}   # still served, as evidence for the page
    _below_page(s["search"], w.e)
    _below_page(s["recall"], w.e)
    assert s["recall_status"] == {i: CONSOLIDATED for i in w.e}
    # never decayed: years unserved, the consolidated ones are not looked at; the standing control is archived
    decided = {d.entry_id: d.outcome for d in decay_decide(w.node.conn, w.kb.company.bank,
                                                           w.node.conn.execute("SELECT max(at) FROM entry_history")
                                                           .fetchone()[0] + YEARS)}
    assert decided == {w.control: "archived"}

    # reverted: the old body, the entries standing again and served beside the page as before
    p = w.c.decide(p.id, "revert", actor="alex")
    assert (p.state, p.reverted_revision, p.folded) == ("REVERTED", 3, [])
    assert w.body() == OLD_BODY and w.statuses() == [STANDING] * 3
    s = w.served()
    assert s["context"] == before["context"] and s["recall_status"] == {i: STANDING for i in w.e}
    assert s["search"].index(w.e[0]) < s["search"].index("page")

    # one is archived meanwhile; undoing the revert folds back the two still standing, never the archived one
    w.bank.archive(w.e[2], actor="alex", reason="no longer true")
    p = w.c.decide(p.id, "undo-revert", actor="alex")
    assert (p.state, p.applied_revision, p.folded) == ("ACCEPTED", 4, w.e[:2])
    assert w.body() == NEW_BODY and w.statuses() == [CONSOLIDATED, CONSOLIDATED, ARCHIVED]
    s = w.served()
    assert s["context"] == {i: (CONSOLIDATED, w.page) for i in w.e[:2]}
    assert w.e[2] not in s["search"] and w.e[2] not in s["recall"]
    _below_page(s["search"], w.e[:2])
    _below_page(s["recall"], w.e[:2])
    assert [d["action"] for d in p.decisions] == ["accept", "revert", "undo_revert"]

    # a consolidated entry is still corrected as a standing one: a person disputes it, then a revert leaves it be
    w.bank.dispute(w.e[0], actor="alex", reason="it is five minutes")
    p = w.c.decide(p.id, "revert", actor="alex")
    assert w.statuses() == ["DISPUTED", STANDING, ARCHIVED] and w.body() == OLD_BODY


def test_accepting_is_refused_when_the_page_changed_since(w):
    p = w.c.propose(w.page, NEW_BODY, w.e[:2], actor="eng-bot")
    w.kb.save_page(w.page, OLD_BODY + "\n\nA person's edit.", base_revision=1, actor="sam")
    assert w.c.show(p.id).stale
    with pytest.raises(Refused) as exc:
        w.c.decide(p.id, "accept", actor="alex")
    assert "changed since the proposal" in _one_line(exc) and exc.value.code == "page_changed"
    assert w.body().endswith("A person's edit.") and w.statuses() == [STANDING] * 3
    assert w.c.show(p.id).state == "OPEN"
    s = w.served()
    assert s["context"] == {i: (STANDING, None) for i in w.e}
    assert w.c.decide(p.id, "decline", actor="alex").state == "DECLINED"
    assert Review(w.bank).queue().proposals == []


def test_accepting_is_refused_when_the_page_is_generated_now(w):
    """A page made generated after the proposal: its body is its builds', never folded into; taken over, a new
    proposal goes through."""
    from core.pages.generated_handlers import page_generated

    p = w.c.propose(w.page, NEW_BODY, w.e[:2], actor="eng-bot")
    made = w.node.submit_one(page_generated("alex", page_id=w.page, action="make", by_kind="person",
                                            question="What does the session cache keep?"))
    assert made.status == "applied", made.reason
    with pytest.raises(Refused) as exc:
        w.c.decide(p.id, "accept", actor="alex")
    assert exc.value.code == "generated" and "is a generated page now" in _one_line(exc)
    assert w.body() == OLD_BODY and w.statuses() == [STANDING] * 3 and w.c.show(p.id).state == "OPEN"
    taken = w.node.submit_one(page_generated("alex", page_id=w.page, action="takeover", by_kind="person"))
    assert taken.status == "applied", taken.reason
    assert w.c.decide(p.id, "accept", actor="alex").state == "ACCEPTED"


@pytest.mark.parametrize("how", ["archive", "dispute", "supersede"])
def test_accepting_is_refused_when_an_entry_it_folds_is_no_longer_standing(w, how):
    p = w.c.propose(w.page, NEW_BODY, w.e, actor="eng-bot")
    if how == "supersede":
        w.bank.supersede(w.e[1], "Session cache keys carry the region as their prefix.", distinct=True, actor="alex")
    else:
        getattr(w.bank, how)(w.e[1], actor="alex", reason="checked")
    with pytest.raises(Refused) as exc:
        w.c.decide(p.id, "accept", actor="alex")
    assert f"entry {w.e[1]} is" in _one_line(exc) and "no longer STANDING" in str(exc.value)
    assert w.body() == OLD_BODY and [w.bank.show(i).status for i in (w.e[0], w.e[2])] == [STANDING, STANDING]
    assert w.served()["context"].get(w.e[0]) == (STANDING, None)


def test_a_revert_and_its_undoing_are_refused_when_the_page_changed_after_them(w):
    p = w.c.propose(w.page, NEW_BODY, w.e, actor="alex")
    w.c.decide(p.id, "accept", actor="alex")
    w.kb.save_page(w.page, NEW_BODY + "\n\nLater.", base_revision=2, actor="sam")
    with pytest.raises(Refused) as exc:
        w.c.decide(p.id, "revert", actor="alex")
    assert "a revert would undo that change" in _one_line(exc)
    assert w.statuses() == [CONSOLIDATED] * 3 and w.body().endswith("Later.")


def test_a_proposal_is_refused_in_one_line_for_what_it_cannot_fold(w):
    other = w.kb.create_page("ENG", "Third", "x", actor="alex").id
    foreign = w.bank.add(other, "The third page's fact stands apart.", distinct=True, actor="alex").id
    proposed = w.bank.add(w.page, "The session cache is warmed at boot.", distinct=True, actor="eng-bot").id
    seq = w.node.applied_seq()
    for ids, words in (([foreign], "under another page"), ([proposed], "is PROPOSED"), ([], "name the entries")):
        with pytest.raises((Refused, Invalid)) as exc:
            w.c.propose(w.page, NEW_BODY, ids, actor="eng-bot")
        assert words in _one_line(exc)
    with pytest.raises(Invalid):
        w.c.propose(w.page, "   ", w.e, actor="eng-bot")
    assert w.node.applied_seq() == seq
    # the store refuses what the bank would: a proposal against a revision that is not the page's
    out = w.node.submit_one(records.consolidation_propose("eng-bot", proposal_id="p-x", page_id=w.page, base_revision=7,
                                                          body=NEW_BODY, entries=w.e, by="agent"))
    assert (out.status, out.code) == ("refused", "stale_revision")


def test_a_person_consolidating_from_the_page_proposes_and_accepts_in_one_step(w):
    p = w.c.consolidate_now(w.page, NEW_BODY, w.e[:1], actor="alex")
    assert p.state == "ACCEPTED" and w.statuses() == [CONSOLIDATED, STANDING, STANDING]
    # an agent's is only a proposal
    q = w.c.consolidate_now(w.page, NEW_BODY + " More.", w.e[1:2], actor="eng-bot")
    assert q.state == "OPEN" and w.body() == NEW_BODY


def test_the_cli_proposes_lists_and_refuses_an_agent_s_decision(w, tmp_path):
    w.close()
    runner = CliRunner()
    body = tmp_path / "body.md"
    body.write_text(NEW_BODY)

    def run(*args: str, actor: str | None = None):
        pre = ["--home", str(w.home.root)] + (["--as", actor] if actor else [])
        return runner.invoke(cli_app, [*pre, *args])

    r = run("page", "consolidate", "ENG/Caching", "--body-file", str(body), "--entries", ",".join(w.e), "--json",
            actor="eng-bot")
    assert r.exit_code == 0, r.output
    pid = json.loads(r.stdout)["id"]
    listing = run("review")
    assert listing.exit_code == 0 and "1 page proposal" in listing.stdout and pid in listing.stdout
    assert listing.stdout.index(pid) < listing.stdout.index("proposed entries")
    refused = run("review", "proposal", pid, "accept", actor="eng-bot")
    assert refused.exit_code == 1 and "person's" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    bad = run("review", "proposal", pid, "maybe")
    assert bad.exit_code == 2
    ok = run("review", "proposal", pid, "accept", "--json")
    assert ok.exit_code == 0, ok.output
    data = json.loads(ok.stdout)
    assert (data["state"], data["folded"]) == ("ACCEPTED", w.e)
    again = run("review", "proposal", pid, "accept")
    assert again.exit_code == 0      # accepted already: nothing to do, said
    w.node = Node.open(w.home)
    w.bank = EntryBank(w.node)
    w.kb = w.bank.kb
    assert w.body() == NEW_BODY and w.statuses() == [CONSOLIDATED] * 3


@pytest.mark.anyio
async def test_the_mcp_tool_stores_a_proposal_and_the_page_does_not_change(w):
    w.close()
    async with connect(w.home.root, "eng-bot") as client:
        text, data = await call(client, "consolidate_page", page="ENG/Caching", body=NEW_BODY, entry_ids=w.e)
    assert "does not change" in text and data["proposal"]["state"] == "OPEN"
    w.node = Node.open(w.home)
    w.bank = EntryBank(w.node)
    w.kb = w.bank.kb
    assert w.body() == OLD_BODY and w.statuses() == [STANDING] * 3
    assert [q["id"] for q in Review(w.bank).queue().proposals] == [data["proposal"]["id"]]


@pytest.mark.anyio
async def test_the_page_screen_folds_the_standing_entries_and_a_person_s_save_accepts_in_one_step(w):
    w.bank.archive(w.e[2], actor="alex", reason="no longer true")       # not standing: not offered
    w.close()
    app = app_for(w.home, "alex")
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_page(w.page)
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: app.screen.entries is not None, what="the entries read")
        await pilot.press("f")
        await wait_screen(pilot, "EditScreen")
        text = app.screen.editor.text
        assert text.startswith(OLD_BODY) and f"- {FACTS[0]}" in text and f"- {FACTS[1]}" in text
        assert FACTS[2] not in text
        app.screen.editor.text = NEW_BODY
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen.id == "save-note", what="the note asked")
        await pilot.press("enter")
        bank = app.session.bank
        await wait_until(pilot, lambda: bank.show(w.e[0]).status == CONSOLIDATED, what="the entries consolidated")
        assert bank.kb.get_page(w.page, actor="alex").body == NEW_BODY
        assert [bank.show(i).status for i in w.e] == [CONSOLIDATED, CONSOLIDATED, ARCHIVED]
        assert Consolidation(bank).of_page(w.page)[0].state == "ACCEPTED"
