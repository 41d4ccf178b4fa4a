"""Entries on the pages log (issue 35): each kind applied on a real home, every refusal in one line, repeats
folded, the supersede lifecycle, trust tiers against a real git repository, a LOCKED page, the budget, an agent
refused each person's action (by the API and, when it goes around it, by the applier), a purge, and entries
replicated to a second node through a shared log directory and given back after a `log repair`."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import new_home
from test_log_repair import _flip_seq, cli, ok
from test_repos_support import GitRepo, numbered

from core.bank.entries import EntryBank
from core.bank.trust import GROUNDED, HUMAN_VERIFIED, UNGROUNDED
from core.errors import CrewletError, Invalid, NotFound, Refused
from core.node import Node
from core.pages import records
from core.pages.service import KnowledgeBase
from core.paths import Home
from core.repos import Repositories, Repository
from core.store.digest import content_digest


@pytest.fixture
def page(kb):
    return kb.create_page("ENG", "Caching", "how the cache works", actor="alex").id


@pytest.fixture
def bank(node):
    return EntryBank(node)


def _count(node, table: str) -> int:
    return node.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert text and "\n" not in text
    return text


# -- adding ---------------------------------------------------------------------------------------------------

def test_an_agents_entry_is_proposed_and_a_persons_standing_with_who_and_when(bank, page, node):
    proposed = bank.add(page, "The cache holds for ten minutes.", kind="gotcha", scope="apps/server",
                        actor="eng-bot")
    standing = bank.add(page, "Deploys happen on Tuesdays.", kind="CONVENTION", actor="alex")
    assert (proposed.status, proposed.author, proposed.author_kind, proposed.kind, proposed.scope) == (
        "PROPOSED", "eng-bot", "agent", "GOTCHA", "apps/server")
    assert (standing.status, standing.author_kind, standing.page) == ("STANDING", "person", "ENG/Caching")
    assert [h["action"] for h in standing.history] == ["add"] and standing.history[0]["to_status"] == "STANDING"
    # the page's entries in use: the standing one only
    assert [e.id for e in bank.entries(page)] == [standing.id]
    assert {e.id for e in bank.entries(page, statuses=None)} == {standing.id, proposed.id}


@pytest.mark.parametrize("kwargs, error, code", [
    ({"body": "   "}, Invalid, "entry_empty"),
    ({"body": "x" * 1001}, Invalid, "entry_too_long"),
    ({"body": "A fact.", "kind": "RUMOUR"}, Invalid, "entry_invalid_kind"),
    ({"body": "- Deploys need the VPN\n- The cache clears on Sunday\n- Staging uses Postgres 14"}, Refused,
     "entry_several_claims"),
    ({"body": "The deploy token is ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8" + "."}, Refused, "entry_credential"),
])
def test_bad_input_is_refused_in_one_line_and_nothing_is_written(bank, page, node, kwargs, error, code):
    """The one-claim and credential check (core/text/claims.py) refuses before anything is appended."""
    before = node.applied_seq()
    with pytest.raises(error) as exc:
        bank.add(page, **kwargs, actor="eng-bot")
    assert exc.value.code == code
    _one_line(exc)
    assert node.applied_seq() == before and _count(node, "entries") == 0


def test_more_than_ten_citations_are_refused_naming_the_bound(bank, page, node):
    many = [{"link": f"acme/api#{i}", "kind": "issue"} for i in range(11)]
    with pytest.raises(Refused) as exc:
        bank.add(page, "Retries double the load.", citations=many, actor="eng-bot")
    assert "at most 10" in _one_line(exc) and _count(node, "entries") == 0


def test_an_entry_under_no_page_or_a_trashed_one_is_refused(bank, kb, node):
    with pytest.raises(NotFound):
        bank.add("ENG/Nowhere", "A fact.", actor="alex")
    gone = kb.create_page("ENG", "Gone", "", actor="alex")
    kb.trash_page(gone.id, actor="alex")
    with pytest.raises(Refused) as exc:
        bank.add(gone.id, "A fact.", actor="alex")
    assert exc.value.code == "trashed"
    # and the applier decides the same for a record that raced the trash
    out = node.submit_one(records.entry_add("alex", entry_id="e-trashed", page_id=gone.id, kind="FACT",
                                            body="A fact.", by="person"))
    assert (out.status, out.code) == ("refused", "trashed")


# -- repeats --------------------------------------------------------------------------------------------------

def test_an_exact_repeat_is_folded_into_a_corroboration(bank, page, node):
    first = bank.add(page, "Deploys happen on Tuesdays.", actor="alex")
    again = bank.add(page, "  deploys   HAPPEN on tuesdays. ", actor="eng-bot")
    assert again.id == first.id and again.folded
    assert (again.corroborations, again.corroborated_by) == (1, ["eng-bot"])
    assert _count(node, "entries") == 1
    # a repeat that raced the writer's look is folded by the applier: no second entry on any node
    out = node.submit_one(records.entry_add("eng-bot", entry_id="racing", page_id=page, kind="FACT",
                                            body="Deploys happen on TUESDAYS.", by="agent"))
    assert out.status == "applied" and out.result == {"entry_id": first.id, "page_id": page, "folded": True}
    assert bank.show(first.id).corroborations == 2 and _count(node, "entries") == 1


def test_a_repeat_of_an_entry_out_of_use_is_a_new_entry(bank, page):
    old = bank.add(page, "The queue drains nightly.", actor="eng-bot")
    bank.archive(old.id, actor="eng-bot")
    new = bank.add(page, "The queue drains nightly.", actor="eng-bot")
    assert new.id != old.id and not new.folded and new.status == "PROPOSED"


def test_the_same_words_in_scopes_that_do_not_meet_are_two_facts(bank, page, node):
    """"Staging deploys need the VPN" of apps/server is another fact than the same words of apps/web: a repeat is
    folded only where the two scopes meet (one holding the other, or either unscoped) — at the bank's look and in
    the applier alike."""
    server = bank.add(page, "Staging deploys need the VPN.", scope="apps/server", actor="alex")
    web = bank.add(page, "Staging deploys need the VPN.", scope="apps/web", actor="eng-bot", distinct=True)
    assert web.id != server.id and not web.folded and _count(node, "entries") == 2
    inner = bank.add(page, "staging deploys need the VPN.", scope="apps/server/api", actor="eng-bot")
    assert inner.id == server.id and inner.folded             # apps/server holds apps/server/api: they meet
    out = node.submit_one(records.entry_add("eng-bot", entry_id="racing", page_id=page, kind="FACT",
                                            body="Staging deploys need the VPN.", scope="apps/cli", by="agent"))
    assert out.status == "applied" and out.result.get("entry_id") == "racing" and not out.result.get("folded")


def test_an_open_page_takes_repeats_and_has_no_budget(node, page):
    bank = EntryBank(node, budget=1)
    bank.set_policy(page, "open", actor="alex")
    a = bank.add(page, "Scratch: the build takes 4 minutes.", actor="eng-bot")
    b = bank.add(page, "Scratch: the build takes 4 minutes.", actor="eng-bot")
    assert a.id != b.id and not b.folded


# -- policy and budget ----------------------------------------------------------------------------------------

def test_a_locked_page_refuses_every_agent_entry_and_takes_a_persons(bank, page, node):
    assert bank.policy(page) == "CURATED"                          # the default
    assert bank.set_policy(page, "locked", actor="alex") == "LOCKED" and bank.policy(page) == "LOCKED"
    with pytest.raises(Refused) as exc:
        bank.add(page, "The cache holds for ten minutes.", actor="eng-bot")
    assert exc.value.code == "locked" and "LOCKED" in _one_line(exc)
    assert bank.add(page, "The cache holds for ten minutes.", actor="alex").status == "STANDING"
    # an agent's record that raced the lock is refused where it applies
    out = node.submit_one(records.entry_add("eng-bot", entry_id="e-raced", page_id=page, kind="FACT",
                                            body="Another fact.", by="agent"))
    assert (out.status, out.code) == ("refused", "locked")
    # setting it again changes nothing
    assert node.submit_one(records.page_policy("alex", page_id=page, policy="LOCKED", by="person")).status == "noop"


def test_the_proposed_budget_holds_an_agent_on_a_curated_page(node, kb, page):
    bank = EntryBank(node, budget=2)
    first = bank.add(page, "Fact one.", actor="eng-bot")
    bank.add(page, "Fact two.", distinct=True, actor="eng-bot")
    with pytest.raises(Refused) as exc:
        bank.add(page, "Fact three.", distinct=True, actor="eng-bot")
    assert exc.value.code == "budget" and "PAGE_PROPOSED_ENTRY_BUDGET = 2" in _one_line(exc)
    other = kb.create_page("ENG", "Other", "", actor="alex").id
    assert bank.add(other, "Fact three.", distinct=True, actor="eng-bot").status == "PROPOSED"    # per page
    assert bank.add(page, "A person's fact.", actor="alex").status == "STANDING"   # a person has no budget
    bank.accept(first.id, actor="alex")                                            # decided: no longer waiting
    assert bank.add(page, "Fact four.", distinct=True, actor="eng-bot").status == "PROPOSED"


# -- who may do what ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("action", ["accept", "verify", "dispute"])
def test_an_agent_is_refused_each_persons_action_by_the_api_and_by_the_applier(bank, page, node, action):
    entry = bank.add(page, "The cache holds for ten minutes.", actor="eng-bot")
    with pytest.raises(Refused) as exc:
        getattr(bank, action)(entry.id, actor="eng-bot")
    assert exc.value.code == "forbidden" and "a person's" in _one_line(exc)
    out = node.submit_one(records.entry_status("eng-bot", entry_id=entry.id, action=action, by="agent"))
    assert (out.status, out.code) == ("refused", "forbidden")
    assert bank.show(entry.id).status == "PROPOSED"


def test_an_agent_is_refused_setting_a_pages_policy(bank, page, node):
    with pytest.raises(Refused) as exc:
        bank.set_policy(page, "open", actor="eng-bot")
    assert exc.value.code == "forbidden"
    _one_line(exc)
    out = node.submit_one(records.page_policy("eng-bot", page_id=page, policy="OPEN", by="agent"))
    assert (out.status, out.code) == ("refused", "forbidden") and bank.policy(page) == "CURATED"


def test_an_agent_archives_only_its_own_entry_while_proposed(bank, page, node):
    theirs = bank.add(page, "A person's fact.", actor="alex")
    mine = bank.add(page, "An agent's fact.", distinct=True, actor="eng-bot")
    accepted = bank.add(page, "An agent's accepted fact.", distinct=True, actor="eng-bot")
    bank.accept(accepted.id, actor="alex")
    for entry in (theirs, accepted):
        with pytest.raises(Refused) as exc:
            bank.archive(entry.id, actor="eng-bot")
        assert exc.value.code == "forbidden" and "only its own entries while proposed" in _one_line(exc)
    assert bank.archive(mine.id, actor="eng-bot", reason="wrong page").status == "ARCHIVED"
    # the applier holds the rule against a record that went around the API
    out = node.submit_one(records.entry_status("eng-bot", entry_id=theirs.id, action="archive", by="agent"))
    assert (out.status, out.code) == ("refused", "forbidden")


def test_status_changes_follow_the_status_now(bank, page, node):
    entry = bank.add(page, "The cache holds for ten minutes.", actor="eng-bot")
    bank.dispute(entry.id, actor="alex", reason="it is five")
    shown = bank.show(entry.id)
    assert (shown.status, shown.status_by, shown.status_reason) == ("DISPUTED", "alex", "it is five")
    with pytest.raises(Refused) as exc:
        bank.verify(entry.id, actor="alex")
    assert exc.value.code == "invalid_status" and "DISPUTED" in _one_line(exc)
    assert bank.accept(entry.id, actor="sam", reason="checked again").status == "STANDING"
    again = node.submit_one(records.entry_status("alex", entry_id=entry.id, action="accept", by="person"))
    assert again.status == "noop"
    assert [h["action"] for h in bank.show(entry.id).history] == ["add", "dispute", "accept"]
    with pytest.raises(NotFound):
        bank.accept("no-such-entry", actor="alex")


# -- supersede ------------------------------------------------------------------------------------------------

def test_a_correction_leaves_the_old_entry_in_use_until_a_person_accepts_it(bank, page):
    old = bank.add(page, "The cache holds for ten minutes.", actor="alex")
    fix = bank.supersede(old.id, "The cache holds for five minutes.", actor="eng-bot")
    assert (fix.status, fix.supersedes, fix.page_id) == ("PROPOSED", old.id, page)
    assert [e.id for e in bank.entries(page)] == [old.id]          # the old one is still what agents get
    reasons = {n.entry.id: n.reasons for n in bank.needs_person()}
    assert any("only a person's acceptance retires it" in r for r in reasons[fix.id])
    bank.accept(fix.id, actor="sam")
    retired = bank.show(old.id)
    assert (retired.status, retired.superseded_by) == ("SUPERSEDED", fix.id)
    assert retired.history[-1]["action"] == "supersede" and retired.history[-1]["actor"] == "sam"
    assert [e.id for e in bank.entries(page)] == [fix.id]
    with pytest.raises(Refused) as exc:                            # kept for the record, corrected no more
        bank.supersede(old.id, "The cache holds for one minute.", actor="eng-bot")
    assert exc.value.code == "out_of_use"


def test_a_persons_correction_retires_the_old_entry_at_once(bank, page):
    old = bank.add(page, "The cache holds for ten minutes.", actor="eng-bot")
    fix = bank.supersede(old.id, "The cache holds for five minutes.", actor="alex")
    assert fix.status == "STANDING" and bank.show(old.id).status == "SUPERSEDED"


def test_a_correction_that_says_the_same_is_refused(bank, page):
    old = bank.add(page, "The cache holds for ten minutes.", actor="alex")
    with pytest.raises(Refused) as exc:
        bank.supersede(old.id, "the cache holds for TEN minutes.", actor="eng-bot")
    assert exc.value.code == "same_body"


# -- citations and tiers against a real repository -----------------------------------------------------------

@pytest.fixture
def repo(tmp_path: Path):
    g = GitRepo(tmp_path / "server")
    g.write("src/cache.py", "TTL_SECONDS = 600\n" + numbered(9))
    sha = g.commit("first")
    repos = Repositories({"server": Repository("server", g.path)})
    yield g, sha, repos
    repos.close()


def test_a_citation_read_at_write_grounds_an_accepted_entry_and_a_changed_file_ungrounds_it(node, page, repo,
                                                                                        monkeypatch):
    g, sha, repos = repo
    bank = EntryBank(node, repositories=repos)
    cite = {"repository": "server", "path": "src/cache.py", "lines": [1, 1], "commit": sha, "quote": "TTL_SECONDS"}
    entry = bank.add(page, "The cache holds for ten minutes.", citations=[cite], actor="eng-bot")
    [c] = entry.citations
    assert (c.result, c.commit, entry.tier) == ("held", sha, UNGROUNDED)      # proposed: not served as grounded
    assert c.blob == g.git("rev-parse", f"{sha}:src/cache.py").strip()
    assert bank.accept(entry.id, actor="alex").tier == GROUNDED
    monkeypatch.setenv("CREWLET_NOW", "2100-01-01T00:00:00Z")
    assert bank.show(entry.id).citations[0].said(entry.created_at + 3 * 3600 * 1000) == (
        f"held, checked 3 h ago at {sha[:7]}")
    assert bank.show(entry.id, at_head=True).tier == GROUNDED               # the head still holds that blob
    g.write("src/cache.py", "TTL_SECONDS = 300\n" + numbered(9))
    g.commit("shorter")
    served = bank.show(entry.id, at_head=True)
    assert served.tier == UNGROUNDED and served.citations[0].changed_since
    assert "the file changed since" in served.citations[0].said(entry.created_at)
    assert bank.verify(entry.id, actor="sam").tier == HUMAN_VERIFIED


def test_a_citation_that_does_not_hold_refuses_the_write_naming_it(node, page, repo):
    g, sha, repos = repo
    bank = EntryBank(node, repositories=repos)
    before = node.applied_seq()
    bad = {"repository": "server", "path": "src/cache.py", "lines": [1, 1], "commit": sha, "quote": "TTL_MINUTES"}
    with pytest.raises(Refused) as exc:
        bank.add(page, "The cache holds for ten minutes.", citations=[{"link": "acme/api#1", "kind": "issue"}, bad],
                 actor="eng-bot")
    assert exc.value.code == "citation_failed" and _one_line(exc).startswith("citation 2 (src/cache.py)")
    assert node.applied_seq() == before


def test_a_repository_that_cannot_be_read_writes_the_entry_with_its_citation_not_read_yet(node, page, tmp_path):
    repos = Repositories({"server": Repository("server", tmp_path / "not-a-checkout")})
    bank = EntryBank(node, repositories=repos)
    cite = {"repository": "server", "path": "src/cache.py", "lines": [1, 1], "commit": "a" * 40}
    entry = bank.add(page, "The cache holds for ten minutes.", citations=[cite], actor="alex")
    assert entry.citations[0].result == "not_read_yet" and entry.tier == UNGROUNDED
    # the recheck duty reads it later: held, and the entry is grounded
    bank.record_check(entry.id, 1, "held", commit="a" * 40, blob="b" * 40)
    assert bank.show(entry.id).tier == GROUNDED
    repos.close()


def test_a_recheck_that_finds_the_code_changed_or_gone_asks_a_person(bank, page):
    entry = bank.add(page, "Retries double the load.", citations=[{"link": "acme/api#12", "kind": "issue"},
                                                                  {"link": "acme/api#13", "kind": "issue"}],
                     actor="alex")
    assert entry.tier == GROUNDED                                   # links read at write hold
    bank.record_check(entry.id, 1, "moved", commit="c" * 40, blob="d" * 40,
                      anchor={"path": "api/retry.py", "lines": [4, 6]})
    assert bank.show(entry.id).tier == GROUNDED and bank.needs_person() == []
    bank.record_check(entry.id, 2, "gone", commit="c" * 40)
    shown = bank.show(entry.id)
    assert shown.tier == UNGROUNDED and [len(c.checks) for c in shown.citations] == [2, 2]
    assert shown.citations[0].anchor == {"path": "api/retry.py", "lines": [4, 6]}
    [asked] = bank.needs_person()
    assert asked.entry.id == entry.id and asked.reasons == ["citation 2: the cited lines are gone"]
    with pytest.raises(Refused) as exc:
        bank.record_check(entry.id, 3, "held")
    assert exc.value.code == "invalid"


# -- serves, purge -------------------------------------------------------------------------------------------

def test_a_serve_is_recorded_with_who_which_tool_and_rank(bank, page, node):
    a = bank.add(page, "Fact one.", actor="alex")
    b = bank.add(page, "Fact two.", distinct=True, actor="alex")
    bank.record_serve("eng-bot", "load_context", [b, a], query="cache", run="run-7")
    rows = [tuple(r) for r in node.conn.execute("SELECT entry_id, actor, via, query, rank, run FROM entry_serves "
                                                "ORDER BY rank")]
    assert rows == [(b.id, "eng-bot", "load_context", "cache", 1, "run-7"),
                    (a.id, "eng-bot", "load_context", "cache", 2, "run-7")]


def test_a_purge_takes_every_row_under_the_page_with_it(bank, kb, page, node):
    entry = bank.add(page, "Fact one.", citations=[{"link": "acme/api#1", "kind": "issue"}], actor="eng-bot")
    bank.add(page, "fact ONE.", actor="alex")
    bank.set_policy(page, "open", actor="alex")
    bank.record_serve("eng-bot", "get_page", [entry])
    tables = ("entries", "entry_history", "entry_corroborations", "citation_checks", "entry_serves", "page_policies")
    assert all(_count(node, t) for t in tables)
    kb.trash_page(page, actor="alex")
    kb.purge_page(page, actor="alex")
    assert {t: _count(node, t) for t in tables} == dict.fromkeys(tables, 0)


# -- on a second node, and back after a repair ---------------------------------------------------------------

def test_entries_reach_a_second_node_and_come_back_after_a_log_repair(tmp_path):
    a = new_home(tmp_path / "A")
    shared = tmp_path / "shared"
    ok(cli(a.root, "sync", "join", str(shared)))
    ok(cli(tmp_path / "B", "sync", "join", str(shared), "--operator", "sam"))
    b = Home(tmp_path / "B")
    with Node.open(Home(a.root)) as node:
        bank = EntryBank(node)
        page = KnowledgeBase(node).create_page("ENG", "Caching", "", actor="alex").id
        old = bank.add(page, "The cache holds for ten minutes.", citations=[{"link": "acme/api#3", "kind": "issue"}],
                       actor="alex")
        fix = bank.supersede(old.id, "The cache holds for five minutes.", actor="eng-bot")
        bank.add(page, "the cache holds for FIVE minutes.", actor="eng-bot")        # folded
        bank.set_policy(page, "locked", actor="alex")
    with Node.open(b) as node:                     # B applies A's records from the shared log: sam accepts there
        bank = EntryBank(node)
        assert bank.show(fix.id).corroborations == 1
        bank.accept(fix.id, actor="sam")
        assert bank.policy(page) == "LOCKED"
        accept_seq = node.conn.execute("SELECT seq FROM applied_ops WHERE type = 'entry.status'").fetchone()[0]
    with Node.open(Home(a.root)) as na, Node.open(b) as nb:
        assert EntryBank(na).show(old.id).status == "SUPERSEDED"
        before = content_digest(na.conn).content
        assert before == content_digest(nb.conn).content
    _flip_seq(shared / "pages.log", accept_seq)
    out = json.loads(ok(cli(a.root, "log", "repair", "--yes", "--json")))
    assert out["records_lost"] == 0 and not out["rebuilt"]
    assert [(r["seq"], r["how"], r["what"]) for r in out["rewritten"]] == [(accept_seq, "recovered",
                                                                            "entry.status ENG/Caching")]
    with Node.open(Home(a.root)) as na, Node.open(b) as nb:
        assert na.damage is None and nb.damage is None
        assert content_digest(na.conn).content == before == content_digest(nb.conn).content
        shown = EntryBank(na).show(fix.id)
        assert (shown.status, shown.history[-1]["actor"]) == ("STANDING", "sam")
        after = content_digest(na.conn).content
    # a third node made from a snapshot of A holds the entries without applying their records
    snap = tmp_path / "a.snapshot"
    ok(cli(a.root, "sync", "snapshot", str(snap), "--json"))
    joined = json.loads(ok(cli(tmp_path / "C", "sync", "join", str(shared), "--snapshot", str(snap), "--json")))
    assert joined["joined"] == "new"
    with Node.open(Home(tmp_path / "C")) as nc:
        assert content_digest(nc.conn).content == after
        assert [e.id for e in EntryBank(nc).entries(page)] == [fix.id]


def test_an_entry_says_itself_in_json_with_ages_against_crewlet_now(bank, page, monkeypatch):
    """Ages are said on the bank's calendar (core.clock.calendar_now_ms: CREWLET_NOW for drills and tests)."""
    entry = bank.add(page, "Retries double the load.", citations=[{"link": "acme/api#12", "kind": "issue"}],
                     actor="alex")
    from datetime import datetime, timezone

    later = datetime.fromtimestamp((entry.created_at + 2 * 86400 * 1000) / 1000, tz=timezone.utc).isoformat()
    monkeypatch.setenv("CREWLET_NOW", later)
    said = json.loads(json.dumps(bank.show(entry.id).to_json()))
    assert (said["tier"], said["status"], said["page"]) == ("GROUNDED", "STANDING", "ENG/Caching")
    assert said["citations"][0]["said"] == "held, checked 2 d ago"
    assert [h["action"] for h in said["history"]] == ["add"]
    monkeypatch.setenv("CREWLET_NOW", "next tuesday")          # not a date-time: warned, and the real clock applies
    assert bank.show(entry.id).to_json()["citations"][0]["said"] == "held, checked just now"


def test_a_person_verifying_a_proposed_correction_accepts_it_and_retires_the_old(bank, page):
    old = bank.add(page, "The cache holds for ten minutes.", actor="alex")
    fix = bank.supersede(old.id, "The cache holds for five minutes.", actor="eng-bot")
    shown = bank.verify(fix.id, actor="sam", reason="read cache.py")
    assert (shown.status, shown.verified_by, shown.tier) == ("STANDING", "sam", HUMAN_VERIFIED)
    assert bank.show(old.id).status == "SUPERSEDED"


# -- edits ----------------------------------------------------------------------------------------------------

def test_an_agent_changes_its_own_entry_while_proposed_and_a_person_any_in_the_bank(bank, page, node):
    mine = bank.add(page, "The queue drains nightly.", actor="eng-bot")
    edited = bank.edit(mine.id, body="The queue drains every night at 02:00.", kind="gotcha", actor="eng-bot",
                       reason="the hour")
    assert (edited.body, edited.kind, edited.status) == ("The queue drains every night at 02:00.", "GOTCHA", "PROPOSED")
    assert edited.history[-1] | {"at": 0, "seq": 0} == {
        "seq": 0, "actor": "eng-bot", "actor_kind": "agent", "at": 0, "action": "edit", "from_status": "PROPOSED",
        "to_status": "PROPOSED", "reason": "the hour"}
    theirs = bank.add(page, "Deploys happen on Tuesdays.", actor="alex")
    with pytest.raises(Refused) as exc:
        bank.edit(theirs.id, body="Deploys happen on Fridays.", actor="eng-bot")
    assert exc.value.code == "forbidden" and "only its own entries while proposed" in _one_line(exc)
    bank.accept(mine.id, actor="alex")
    with pytest.raises(Refused) as exc:                         # accepted: no longer the agent's to change
        bank.edit(mine.id, body="The queue drains at 03:00.", actor="eng-bot")
    assert exc.value.code == "forbidden"
    assert bank.edit(mine.id, scope="apps/worker", actor="sam").scope == "apps/worker"
    # the applier holds the rule against a record that went around the API
    out = node.submit_one(records.entry_edit("eng-bot", entry_id=theirs.id, body="Deploys happen on Fridays.",
                                             kind="FACT", scope=None, by="agent"))
    assert (out.status, out.code) == ("refused", "forbidden")


def test_an_edit_that_repeats_another_entry_or_says_nothing_new_is_refused(bank, page, node):
    bank.add(page, "Deploys happen on Tuesdays.", actor="alex")
    other = bank.add(page, "Deploys happen on Fridays.", distinct=True, actor="alex")
    with pytest.raises(Refused) as exc:
        bank.edit(other.id, body="deploys happen on TUESDAYS.", actor="alex")
    assert exc.value.code == "repeat"
    with pytest.raises(Refused) as exc:
        bank.edit(other.id, body="- Deploys happen on Fridays\n- Builds run nightly\n- Caches clear on Sunday",
                  actor="alex")
    assert exc.value.code == "entry_several_claims"
    same = node.submit_one(records.entry_edit("alex", entry_id=other.id, body="Deploys happen on Fridays.",
                                              kind="FACT", scope=None, by="person"))
    assert same.status == "noop"
    # the exact-repeat fold reads what an entry says now
    bank.edit(other.id, body="Deploys happen on Mondays.", actor="alex")
    assert bank.add(page, "deploys happen on mondays.", actor="eng-bot").id == other.id


def test_a_pages_entries_in_use_rank_verified_then_grounded_then_the_others(bank, page):
    link = [{"link": "acme/api#12", "kind": "issue"}]
    plain = bank.add(page, "Builds run nightly.", actor="alex")                       # UNGROUNDED: cites nothing
    grounded = bank.add(page, "Retries double the load.", citations=link, actor="alex")
    verified = bank.add(page, "Deploys happen on Tuesdays.", actor="alex")
    bank.verify(verified.id, actor="sam")
    bank.add(page, "The cache holds for ten minutes.", citations=link, actor="eng-bot")  # proposed: not in use
    assert [(e.id, e.tier) for e in bank.entries(page)] == [
        (verified.id, HUMAN_VERIFIED), (grounded.id, GROUNDED), (plain.id, UNGROUNDED)]


def test_every_read_checks_its_actor(bank, page):
    entry = bank.add(page, "Builds run nightly.", actor="alex")
    for read in (lambda: bank.show(entry.id, actor="nobody"), lambda: bank.entries(page, actor="nobody"),
                 lambda: bank.needs_person(actor="nobody"), lambda: bank.policy(page, actor="nobody")):
        with pytest.raises(CrewletError) as exc:      # a handle the company does not configure
            read()
        assert "nobody" in str(exc.value) and "\n" not in str(exc.value)
    assert bank.show(entry.id, actor="eng-bot").id == entry.id


def test_the_budget_and_the_repositories_come_from_company_toml(make_home, tmp_path):
    """PAGE_PROPOSED_ENTRY_BUDGET under [knowledge] and [repositories.NAME]: read by the bank when not given."""
    from conftest import config_with

    g = GitRepo(tmp_path / "server")
    g.write("src/cache.py", "TTL_SECONDS = 600\n")
    sha = g.commit("first")
    home = make_home(config_with(knowledge={"page_proposed_entry_budget": 1},
                                 repositories={"server": {"path": str(g.path)}}))
    with Node.open(home) as node, EntryBank(node) as bank:
        page = KnowledgeBase(node).create_page("ENG", "Caching", "", actor="alex").id
        cite = {"repository": "server", "path": "src/cache.py", "lines": [1, 1], "commit": sha}
        entry = bank.add(page, "The cache holds for ten minutes.", citations=[cite], actor="eng-bot")
        assert entry.citations[0].result == "held" and entry.citations[0].commit == sha
        with pytest.raises(Refused) as exc:
            bank.add(page, "The cache is per process.", actor="eng-bot")
        assert exc.value.code == "budget" and "PAGE_PROPOSED_ENTRY_BUDGET = 1" in _one_line(exc)
