"""Triage's decisions (core/bank/triage.py, issue 36) on real homes with a real git repository of four modules, the
neighbour check of the bank (by words: vectors off) and a chat model on 127.0.0.1 (tests/chat_server.py) answering
the two judgments as each test wants: every acceptance condition failing once, each reason triage produces, the
policy refusals, repeats folded, the judgments disagreeing or broken (never guessed), no model configured, and the
model calls a decision costs. `decide` reads only; the recording side is tests/test_triage_duty.py."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from chat_server import ChatServer, Reply
from conftest import config_with, new_home
from test_repos_support import GitRepo, numbered

from core.bank.entries import EntryBank, _check_record
from core.bank.triage import Triage
from core.errors import Invalid
from core.node import Node
from core.pages import records
from core.pages.entry_model import SYSTEM_ACTOR
from core.pages.service import KnowledgeBase
from core.pages.triage_model import (ACCEPT, BROAD_SCOPE, CITATION_FAILED, CONTRADICTS_LOCKED, CONTRADICTS_VERIFIED,
                                     CORROBORATE, CREDENTIAL, ESCALATE, EXTERNAL_INPUT, JUDGES_DISAGREE, NO_LLM,
                                     PIN_REQUEST, REFUSE, SEVERAL_CLAIMS, SUPERSEDE_REQUEST, UNGROUNDED,
                                     UNKNOWN_SOURCE)
from core.repos import check_citations

CACHE = "TTL_SECONDS = 600\n" + numbered(20) + "def expire(entry):\n    return entry.age > TTL_SECONDS\n"
CLAIM = "The cache holds an entry for ten minutes."
SCOPE = "apps/a"            # reaches one module; "apps" and no scope reach all four


def _home(tmp_path: Path, repo: Path, *, llm: str | None, **knowledge: Any):
    config = config_with(repositories={"server": {"path": str(repo)}},
                         knowledge={"vectors": False, **knowledge})
    if llm is not None:
        config["providers"] = {"llm": {"base_url": llm, "model": "judge-model", "timeout_s": 20}}
    return new_home(tmp_path / "home", config)


def four_modules(path: Path) -> GitRepo:
    """A repository of four modules (apps/a … apps/d), apps/a holding the cache the entries cite."""
    g = GitRepo(path)
    for name in "abcd":
        g.write(f"apps/{name}/package.json", json.dumps({"name": name}) + "\n")
    g.write("apps/a/cache.py", CACHE)
    g.commit("four modules")
    return g


@pytest.fixture
def git(tmp_path: Path) -> GitRepo:
    return four_modules(tmp_path / "server")


class World:
    def __init__(self, node: Node, git: GitRepo, server: ChatServer | None) -> None:
        self.node, self.git, self.server = node, git, server
        self.bank = EntryBank(node)
        self.page = KnowledgeBase(node).create_page("ENG", "Caching", "how the cache works", actor="alex").id

    def cite(self, lines: tuple[int, int] = (1, 1), quote: str | None = "TTL_SECONDS = 600") -> dict:
        out = {"repository": "server", "path": "apps/a/cache.py", "lines": list(lines),
               "commit": self.git.git("rev-parse", "HEAD").strip()}
        return out | ({"quote": quote} if quote else {})

    def add(self, body: str, *, actor: str = "eng-bot", cites: list[dict] | None = None, scope: str | None = SCOPE,
            page: str | None = None, **kw: Any):
        return self.bank.add(page or self.page, body, citations=[self.cite()] if cites is None else cites,
                             scope=scope, actor=actor, distinct=True, **kw)

    def propose(self, body: str, *, by: str = "system", kind: str = "FACT", cites: list[dict] | None = None,
                scope: str | None = SCOPE) -> str:
        """A proposed entry written by a record, as another writer would: crewlet's own (issue 37's proposals), or
        a body an older node let through. Its citations are read as EntryBank reads them at write."""
        cits = [self.cite()] if cites is None else cites
        checks = check_citations(cits, self.bank.repositories)
        entry_id = records.new_id()
        out = self.node.submit_one(records.entry_add(
            SYSTEM_ACTOR if by == "system" else "eng-bot", entry_id=entry_id, page_id=self.page, kind=kind,
            body=body, by=by, scope=scope, citations=[dict(c.citation.to_json()) for c in checks if c.citation],
            checks=[_check_record(c) for c in checks]))
        assert out.status == "applied", out
        return entry_id

    def decide(self, entry_id: str, **kw: Any):
        with Triage(self.bank, **kw) as triage:
            return triage.decide(entry_id)


def says(one_claim: bool = True, accept: bool = True, relations: dict | None = None, reason: str = "fine") -> Reply:
    return Reply(json.dumps({"one_claim": one_claim, "accept": accept, "relations": relations or {},
                             "reason": reason}))


@pytest.fixture
def world(tmp_path: Path, git: GitRepo):
    with ChatServer(model="judge-model") as server, Node.open(_home(tmp_path, git.path, llm=server.url)) as node:
        w = World(node, git, server)
        try:
            yield w
        finally:
            w.bank.close()


@pytest.fixture
def no_model(tmp_path: Path, git: GitRepo):
    with Node.open(_home(tmp_path, git.path, llm=None)) as node:
        w = World(node, git, None)
        try:
            yield w
        finally:
            w.bank.close()


def _user_prompts(server: ChatServer) -> list[str]:
    return [b["messages"][1]["content"] for b in server.bodies]


# -- accepting ----------------------------------------------------------------------------------------------------

def test_an_entry_meeting_every_condition_is_accepted_after_two_separate_judgments(world):
    entry_id = world.propose("Cache entries expire by TTL_SECONDS.")
    world.server.script = [says(reason="one grounded fact"), says(reason="specific")]
    before = world.node.applied_seq()
    out = world.decide(entry_id)
    assert (out.decision, out.reasons, out.held, out.fold_into, out.refusal) == (ACCEPT, [], [], None, None)
    # two calls, each its own judgment of the same entry
    assert out.calls == world.server.requests == 2
    prompts = _user_prompts(world.server)
    assert prompts[0].startswith("Judgment 1 of 2.") and prompts[1].startswith("Judgment 2 of 2.")
    assert all("Cache entries expire by TTL_SECONDS." in p and "apps/a/cache.py lines 1-1" in p for p in prompts)
    # why, for a person: what each judgment said, each citation's check, the modules the scope reaches
    assert [(j["n"], j["accept"], j["reason"], j["model"]) for j in out.inputs["judgments"]] == [
        (1, True, "one grounded fact", "judge-model"), (2, True, "specific", "judge-model")]
    assert out.inputs["citations"] == [{"index": 1, "cites": out.inputs["citations"][0]["cites"], "result": "held",
                                        "holds": True, "external": False}]
    assert out.inputs["scope"]["modules"] == ["server:apps/a"] and out.inputs["model"] == "judge-model"
    assert out.entry_version == world.node.conn.execute("SELECT version FROM entries WHERE id = ?",
                                                        (entry_id,)).fetchone()[0]
    assert world.node.applied_seq() == before             # decide writes nothing


def test_an_agents_entry_accepted_on_its_merits_is_held_unknown_source(world):
    entry = world.add("Cache entries expire by TTL_SECONDS.")
    world.server.script = [says(), says()]
    out = world.decide(entry.id)
    assert (out.decision, out.held, out.reasons, out.calls) == (ACCEPT, [UNKNOWN_SOURCE], [UNKNOWN_SOURCE], 2)
    assert "written by an agent" in _user_prompts(world.server)[0]


def test_a_decision_on_an_entry_not_proposed_is_refused_in_one_line(world):
    standing = world.add(CLAIM, actor="alex")
    with pytest.raises(Invalid) as exc:
        world.decide(standing.id)
    assert "STANDING" in str(exc.value) and "\n" not in str(exc.value) and world.server.requests == 0


# -- each acceptance condition failing once -------------------------------------------------------------------------

def test_one_claim_both_judgments_see_several_claims_refused(world):
    entry_id = world.propose("Cache entries expire by TTL_SECONDS.")
    world.server.script = [says(one_claim=False, accept=False), says(one_claim=False, accept=False)]
    out = world.decide(entry_id)
    assert (out.decision, out.refusal, out.reasons, out.calls) == (REFUSE, SEVERAL_CLAIMS, [], 2)


def test_one_claim_the_judgments_differ_escalated(world):
    entry_id = world.propose("Cache entries expire by TTL_SECONDS.")
    world.server.script = [says(one_claim=False, accept=False), says()]
    out = world.decide(entry_id)
    assert (out.decision, out.reasons) == (ESCALATE, [JUDGES_DISAGREE])


def test_a_credential_or_several_claims_in_the_body_is_refused_by_rule_without_the_model(world):
    """Bodies the write check would refuse, as a record from another writer carries them."""
    token = world.propose("The deploy token is ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8" + ".", by="agent")
    listed = world.propose("- Deploys need the VPN\n- The cache clears on Sunday\n- Staging uses Postgres 14",
                           by="agent")
    out = world.decide(token)
    assert (out.decision, out.refusal, out.calls) == (REFUSE, CREDENTIAL, 0)
    assert "ghp_" not in json.dumps(out.inputs)                # the credential is named, never repeated
    out = world.decide(listed)
    assert (out.decision, out.refusal, out.calls) == (REFUSE, SEVERAL_CLAIMS, 0)
    assert "list" in out.inputs["policy"]["several_claims"] and world.server.requests == 0


def test_every_citation_holds_none_is_ungrounded_and_one_not_holding_failed(world):
    bare = world.add("Cache entries expire by TTL_SECONDS.", cites=[])
    out = world.decide(bare.id)
    assert (out.decision, out.reasons, out.calls) == (ESCALATE, [UNGROUNDED], 0)
    assert out.inputs["settled"] == "escalated by code: UNGROUNDED"
    cited = world.add("Expiry compares the entry's age with TTL_SECONDS.")
    world.bank.record_check(cited.id, 1, "changed", message="the cited lines changed")
    out = world.decide(cited.id)
    assert (out.decision, out.reasons, out.calls) == (ESCALATE, [CITATION_FAILED], 0)
    assert [(c["result"], c["holds"]) for c in out.inputs["citations"]] == [("changed", False)]


def test_contradicting_a_verified_entry_escalates(world):
    old = world.add(CLAIM, actor="alex")
    world.bank.verify(old.id, actor="alex")
    new = world.add("The cache holds an entry for five minutes.")
    out = world.decide(new.id)
    assert (out.decision, out.reasons, out.calls) == (ESCALATE, [CONTRADICTS_VERIFIED], 0)
    [said] = out.inputs["neighbours"]
    assert (said["id"], said["verified"], said["relation"], said["by"]) == (old.id, True, "contradiction",
                                                                             "rule value_changed")
    assert out.inputs["rules"] == [{"neighbour": old.id, "relation": "contradiction", "rule": "value_changed",
                                    "confidence": 0.9}]


def test_contradicting_an_entry_on_a_locked_page_escalates(world):
    locked = KnowledgeBase(world.node).create_page("ENG", "Runbook", "", actor="alex").id
    world.add(CLAIM, actor="alex", page=locked)
    world.bank.set_policy(locked, "locked", actor="alex")
    new = world.add("The cache holds an entry for five minutes.")
    out = world.decide(new.id)
    assert (out.decision, out.reasons) == (ESCALATE, [CONTRADICTS_LOCKED])
    assert out.inputs["neighbours"][0]["locked"] is True


def test_a_convention_is_a_pin_request(world):
    entry = world.add("Name cache keys after the table they cache.", kind="CONVENTION")
    out = world.decide(entry.id)
    assert (out.decision, out.reasons, out.calls) == (ESCALATE, [PIN_REQUEST], 0)


def test_a_scope_reaching_more_than_three_modules_is_broad_and_an_unscoped_entry_reaches_every_module(world):
    wide = world.add("Cache entries expire by TTL_SECONDS.", scope="apps")
    out = world.decide(wide.id)
    assert (out.decision, out.reasons) == (ESCALATE, [BROAD_SCOPE])
    assert out.inputs["scope"]["modules"] == [f"server:apps/{m}" for m in "abcd"]
    unscoped = world.add("Expiry compares the entry's age with TTL_SECONDS.", scope=None)
    out = world.decide(unscoped.id)
    assert (out.decision, out.reasons) == (ESCALATE, [BROAD_SCOPE])
    assert len(out.inputs["scope"]["modules"]) == 4 and "every module" in out.inputs["scope"]["note"]


def test_a_repository_that_cannot_be_read_leaves_the_scope_uncounted_and_escalates(world, tmp_path):
    entry = world.add("Cache entries expire by TTL_SECONDS.")
    (world.git.path / ".git").rename(tmp_path / "moved-away")
    world.bank.close()                               # opened again at the next read: the repository is gone
    out = world.decide(entry.id)
    assert out.decision == ESCALATE and BROAD_SCOPE in out.reasons
    assert out.inputs["scope"]["counted"] is False and "could not be read" in out.inputs["scope"]["note"]


@pytest.mark.parametrize("first, second", [(True, False), (False, True), (False, False)])
def test_two_judgments_must_accept(world, first, second):
    entry_id = world.propose("Cache entries expire by TTL_SECONDS.")
    world.server.script = [says(accept=first), says(accept=second)]
    out = world.decide(entry_id)
    assert (out.decision, out.reasons, out.calls) == (ESCALATE, [JUDGES_DISAGREE], 2)
    assert [j["accept"] for j in out.inputs["judgments"]] == [first, second]


# -- policy, repeats and neighbours ---------------------------------------------------------------------------------

def test_a_citation_from_outside_the_company_is_external_input(world):
    entry = world.add("Cache entries expire by TTL_SECONDS.",
                      cites=[world.cite(), {"link": "https://github.com/someone/fork/issues/3", "kind": "issue",
                                            "external": True}])
    out = world.decide(entry.id)
    assert (out.decision, out.reasons, out.calls) == (ESCALATE, [EXTERNAL_INPUT], 0)
    assert out.inputs["policy"]["external"] == [2]


def test_an_exact_repeat_of_an_entry_in_use_is_folded_into_it_without_the_model(world):
    open_page = KnowledgeBase(world.node).create_page("ENG", "Scratch", "", actor="alex").id
    world.bank.set_policy(open_page, "open", actor="alex")
    old = world.add(CLAIM, actor="alex", page=open_page)
    again = world.add("  the cache holds an entry for TEN minutes. ", page=open_page, cites=[])
    assert again.id != old.id and again.status == "PROPOSED"       # an OPEN page writes repeats
    out = world.decide(again.id)
    assert (out.decision, out.fold_into, out.reasons, out.calls) == (CORROBORATE, old.id, [], 0)
    assert out.inputs["repeat"] == old.id and out.inputs["settled"] == f"an exact repeat of entry {old.id}"


def test_a_duplicate_by_rule_is_folded_into_its_neighbour_without_the_model(world):
    old = world.add(CLAIM, actor="alex")
    new = world.add("The cache holds an entry for 10 minutes.")
    out = world.decide(new.id)
    assert (out.decision, out.fold_into, out.calls) == (CORROBORATE, old.id, 0)
    assert out.inputs["rules"][0]["rule"] == "same_words" and world.server.requests == 0


def test_a_replacement_by_rule_or_by_its_own_supersedes_is_a_supersede_request(world):
    world.add(CLAIM, actor="alex")
    new = world.add("The cache now holds an entry for five minutes.")
    out = world.decide(new.id)
    assert (out.decision, out.reasons, out.calls) == (ESCALATE, [SUPERSEDE_REQUEST], 0)
    assert out.inputs["neighbours"][0]["relation"] == "replacement"
    other = world.add("Sessions last one hour.", actor="alex")
    correction = world.bank.supersede(other.id, "Sessions last two hours.", citations=[world.cite()],
                                      actor="eng-bot")
    out = world.decide(correction.id)
    assert (out.decision, out.reasons) == (ESCALATE, [SUPERSEDE_REQUEST])
    assert {(n["id"], n["by"]) for n in out.inputs["neighbours"]} >= {(other.id, "supersedes")}


def test_a_neighbour_the_rules_cannot_relate_goes_to_both_judgments_in_the_same_two_calls(world):
    old = world.add(CLAIM, actor="alex")
    other = world.add("The cache holds an entry until it is evicted.", actor="alex")
    new = world.add("Cached entries expire after ten minutes.")
    world.server.script = [says(relations={old.id: "duplicate", other.id: "different"}),
                           says(relations={old.id: "duplicate", other.id: "different"})]
    out = world.decide(new.id)
    undecided = [r["neighbour"] for r in out.inputs["rules"] if r["relation"] is None]
    assert old.id in undecided
    assert (out.decision, out.fold_into, out.calls) == (CORROBORATE, old.id, 2)     # 2 calls, not 2 a neighbour
    assert all(f"id {n}" in p for p in _user_prompts(world.server) for n in undecided)
    said = {n["id"]: n for n in out.inputs["neighbours"]}
    assert (said[old.id]["relation"], said[old.id]["by"]) == ("duplicate", "both judgments")


def test_judgments_that_differ_on_a_pair_escalate(world):
    old = world.add(CLAIM, actor="alex")
    new = world.add("Cached entries expire after ten minutes.")
    world.server.script = [says(relations={old.id: "duplicate"}), says(relations={old.id: "refinement"})]
    out = world.decide(new.id)
    assert (out.decision, out.reasons) == (ESCALATE, [JUDGES_DISAGREE])
    assert out.inputs["neighbours"][0]["by"] == "the judgments differ: duplicate / refinement"


def test_judged_contradiction_of_a_verified_entry_escalates(world):
    old = world.add(CLAIM, actor="alex")
    world.bank.verify(old.id, actor="alex")
    new = world.add("Cached entries expire after ten minutes.")
    world.server.script = [says(accept=False, relations={old.id: "contradiction"}),
                           says(accept=False, relations={old.id: "contradiction"})]
    out = world.decide(new.id)
    assert (out.decision, out.reasons) == (ESCALATE, [CONTRADICTS_VERIFIED, JUDGES_DISAGREE])


def test_an_escalation_by_code_with_an_undecided_neighbour_still_asks_whether_it_is_a_duplicate(world):
    old = world.add(CLAIM, actor="alex")
    new = world.add("Cached entries expire after ten minutes.", cites=[])
    world.server.script = [says(relations={old.id: "duplicate"}), says(relations={old.id: "duplicate"})]
    out = world.decide(new.id)
    assert (out.decision, out.fold_into, out.calls) == (CORROBORATE, old.id, 2)
    assert out.inputs["outranked"] == [UNGROUNDED]


# -- no model, a broken model -------------------------------------------------------------------------------------

def test_without_a_model_a_decision_that_needs_one_escalates_no_llm(no_model):
    entry_id = no_model.propose("Cache entries expire by TTL_SECONDS.")
    out = no_model.decide(entry_id)
    assert (out.decision, out.reasons, out.calls) == (ESCALATE, [NO_LLM], 0)
    assert out.inputs["model"] == "none configured ([providers.llm])"
    # one settled without it says nothing of a model
    bare = no_model.add("Expiry compares the entry's age with TTL_SECONDS.", cites=[])
    assert no_model.decide(bare.id).reasons == [UNGROUNDED]


def test_judge_none_given_is_no_model_even_where_one_is_configured(world):
    entry_id = world.propose("Cache entries expire by TTL_SECONDS.")
    out = world.decide(entry_id, judge=None)
    assert (out.reasons, out.calls, world.server.requests) == ([NO_LLM], 0, 0)


@pytest.mark.parametrize("reply, said", [
    (Reply(garbage=b"<html>busy</html>"), "(garbage)"),
    (Reply(refusal="I cannot help with that."), "refused to judge: I cannot help with that."),
    (Reply(status=500), "(http)"),
    (Reply("The entry looks fine to me, accept it."), "holds no JSON judgment"),
    (Reply('{"one_claim": "yes", "accept": true, "relations": {}}'), "one_claim is 'yes'"),
])
def test_a_broken_answer_escalates_with_the_failure_said_and_never_guessed(world, reply, said):
    entry_id = world.propose("Cache entries expire by TTL_SECONDS.")
    world.server.script = [reply, says()]
    out = world.decide(entry_id)
    assert (out.decision, out.reasons) == (ESCALATE, [JUDGES_DISAGREE])
    first, second = out.inputs["judgments"]
    assert said in first["failed"] and first["n"] == 1
    assert second == {"n": 2, "asked": False, "why": "judgment 1 failed: no acceptance can follow"}
    assert out.calls == world.server.requests == 1


def test_a_judgment_that_leaves_out_a_neighbour_or_names_no_relation_fails(world):
    old = world.add(CLAIM, actor="alex")
    new = world.add("Cached entries expire after ten minutes.")
    world.server.script = [says(relations={old.id: "duplicate"}), says(relations={old.id: "same"})]
    out = world.decide(new.id)
    assert (out.decision, out.reasons, out.calls) == (ESCALATE, [JUDGES_DISAGREE], 2)
    assert f"relation for neighbour {old.id} is 'same'" in out.inputs["judgments"][1]["failed"]
    world.server.script = [says(relations={})]
    out = world.decide(new.id)
    assert f"no relation for neighbour {old.id}" in out.inputs["judgments"][0]["failed"]


def test_a_neighbour_the_rules_related_is_shown_to_the_judgments_without_asking_its_relation(world):
    """A contradiction of an entry no person verified is no reason of the spec's: the judgments see it, and decline."""
    old = world.add(CLAIM, actor="alex")
    new = world.add("The cache holds an entry for five minutes.")
    world.server.script = [says(accept=False, reason="it contradicts the entry in use"),
                           says(accept=False, reason="contradicts")]
    out = world.decide(new.id)
    assert (out.decision, out.reasons, out.calls) == (ESCALATE, [JUDGES_DISAGREE], 2)
    prompt = _user_prompts(world.server)[0]
    assert f"- id {old.id} (FACT, scope server:apps/a, the rules found: contradiction)" in prompt
    assert 'No relation is asked of you: answer "relations": {}.' in prompt
    assert out.inputs["neighbours"][0]["by"] == "rule value_changed"


def test_a_citation_not_read_yet_is_citation_failed(world, tmp_path):
    cite = world.cite()
    world.bank.close()
    (world.git.path / ".git").rename(tmp_path / "away")            # unreadable while the entry is written
    entry = world.add("Cache entries expire by TTL_SECONDS.", cites=[cite])
    (tmp_path / "away").rename(world.git.path / ".git")
    world.bank.close()
    out = world.decide(entry.id)
    assert (out.decision, out.reasons) == (ESCALATE, [CITATION_FAILED])
    assert [(c["result"], c["holds"]) for c in out.inputs["citations"]] == [("not_read_yet", False)]


def test_the_same_words_in_a_scope_that_does_not_meet_are_not_a_repeat(world):
    open_page = KnowledgeBase(world.node).create_page("ENG", "Scratch", "", actor="alex").id
    world.bank.set_policy(open_page, "open", actor="alex")
    world.add("Staging deploys need the VPN.", actor="alex", page=open_page, scope="apps/b")
    again = world.add("Staging deploys need the VPN.", page=open_page)               # apps/a
    world.server.script = [says(), says()]
    out = world.decide(again.id)
    assert (out.decision, out.inputs["repeat"], out.inputs["neighbours"]) == (ACCEPT, None, [])
