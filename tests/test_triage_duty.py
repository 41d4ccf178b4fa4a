"""Triage recorded and acted on (core/bank/triage.py `triage`/`run`, core/duties/triage.py, issue 36) on real homes:
shadow records and changes nothing, on acts (accepts, folds, refuses; escalations and holds wait), off records
nothing and says so, the audit draw recomputed from each decision's id, LOW_AGREEMENT from a back-off state, a
decision that lost the race with the agent's edit (a no-op: the entry waits again), and the duty's pass through
the one runner with its budget and progress. The homes, repository and chat server are test_triage_engine's."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from chat_server import ChatServer
from mcp_client import anyio_backend  # noqa: F401 - a fixture, by name
from mcp_client import call, connect
from test_repos_support import GitRepo
from test_triage_engine import CLAIM, World, _home, four_modules, says

from core.bank.triage import Triage
from core.bank.triage_judge import TriageJudge
from core.chat.openai_http import ChatProvider, ChatReply
from core.duties import TRIAGE
from core.duties.runner import DutyReport, DutyRunner
from core.duties.triage import TriageDuty
from core.node import Node
from core.pages import records
from core.pages.service import KnowledgeBase
from core.pages.entry_model import SYSTEM_ACTOR
from core.pages.triage_model import (ACCEPT, AUDIT, CORROBORATE, CREDENTIAL, ESCALATE, LOW_AGREEMENT, NO_LLM, OFF,
                                     ON, REFUSE, SEVERAL_CLAIMS, SHADOW, UNGROUNDED, UNKNOWN_SOURCE)
from core.stats import drawn

FACT = "Cache entries expire by TTL_SECONDS."
# six facts that share no term: none is another's neighbour
UNRELATED = ["Cache entries expire by TTL_SECONDS.", "Sessions are stored in Redis.", "Deploys need the VPN.",
             "Invoices render through WeasyPrint.", "Nightly backups go to Glacier.", "Webhooks are signed with HMAC."]
TOKEN = "The deploy token is ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8" + "."


@pytest.fixture
def git(tmp_path: Path) -> GitRepo:
    return four_modules(tmp_path / "server")


@pytest.fixture
def make_world(tmp_path: Path, git: GitRepo):
    """A home in the given mode (and audit rate), with a chat server as its model."""
    opened: list[Any] = []

    def make(mode: str = SHADOW, audit_rate: float = 0.1, name: str = "home") -> World:
        server = ChatServer(model="judge-model").__enter__()
        opened.append(server)
        home = _home(tmp_path / name, git.path, llm=server.url, auto_triage=mode, audit_rate=audit_rate)
        node = Node.open(home)
        opened.append(node)
        w = World(node, git, server)
        opened.append(w.bank)
        return w

    yield make
    for thing in reversed(opened):
        if isinstance(thing, ChatServer):
            thing.__exit__(None, None, None)
        else:
            thing.close()


def _status(w: World, entry_id: str) -> str:
    return w.bank.show(entry_id).status


def _triage(w: World, entry_id: str):
    with Triage(w.bank) as t:
        return t.triage(entry_id)


# -- modes -----------------------------------------------------------------------------------------------------------

def test_shadow_records_the_decision_with_its_inputs_and_changes_nothing(make_world):
    w = make_world(SHADOW)
    entry_id = w.propose(FACT)
    w.server.script = [says(), says()]
    view = _triage(w, entry_id)
    assert (view.mode, view.decision, view.acted, view.audited, view.reasons) == (SHADOW, ACCEPT, False, False, [])
    assert view.actor == SYSTEM_ACTOR and view.entry_id == entry_id
    assert [j["n"] for j in view.inputs["judgments"]] == [1, 2] and view.inputs["citations"][0]["holds"]
    assert _status(w, entry_id) == "PROPOSED"
    with Triage(w.bank) as t:
        assert t.pending() == []                           # decided at its version: nothing waits
        again = t.run()
    assert (again.pending, again.decided, w.server.requests) == (0, [], 2)
    assert again.said == "no proposed entry waits for triage"


def test_on_acts_accept_fold_and_refuse_and_leaves_escalations_and_holds_waiting(make_world):
    w = make_world(ON, audit_rate=0.0)
    accepted = w.propose(FACT)
    old = w.add(CLAIM, actor="alex")
    folded = w.add("The cache holds an entry for 10 minutes.")
    refused = w.propose(TOKEN, by="agent")
    escalated = w.add("Sessions are stored in Redis.", cites=[])
    held = w.add("Cache hits are counted per table.")
    w.server.script = [says(), says(), says(), says()]   # the acceptance, then the agent's held one
    with Triage(w.bank) as t:
        assert set(t.pending()) == {accepted, folded.id, refused, escalated.id, held.id}
        report = t.run()
    assert report.counts == {ACCEPT: 2, CORROBORATE: 1, REFUSE: 1, ESCALATE: 1}
    assert report.calls == 4
    views = {v.entry_id: v for v in report.decided}
    assert views[accepted].acted and _status(w, accepted) == "STANDING"
    assert w.bank.show(accepted).history[-1]["action"] == "triage-accept"
    assert views[folded.id].acted and views[folded.id].fold_into == old.id and _status(w, folded.id) == "ARCHIVED"
    assert w.bank.show(old.id).corroborations == 1
    assert (views[refused].refusal, _status(w, refused)) == (CREDENTIAL, "ARCHIVED")
    assert (views[escalated.id].acted, views[escalated.id].reasons, _status(w, escalated.id)) == (
        False, [UNGROUNDED], "PROPOSED")
    assert (views[held.id].decision, views[held.id].held, views[held.id].acted, _status(w, held.id)) == (
        ACCEPT, [UNKNOWN_SOURCE], False, "PROPOSED")
    assert report.said == "triaged 5 in on mode (2 accept, 1 corroborate, 1 refuse, 1 escalate), 4 model calls"


def test_off_decides_nothing_records_nothing_and_says_so(make_world):
    w = make_world(OFF)
    entry_id = w.propose(FACT)
    before = w.node.applied_seq()
    with Triage(w.bank) as t:
        assert t.triage(entry_id) is None
        report = t.run()
    assert (report.mode, report.decided, report.pending) == (OFF, [], 0)
    assert "KNOWLEDGE_AUTO_TRIAGE = off" in report.said
    assert w.node.applied_seq() == before and w.server.requests == 0


# -- audits and agreement -----------------------------------------------------------------------------------------

def test_the_audit_draw_is_recomputed_from_each_decisions_id(make_world):
    w = make_world(ON, audit_rate=0.5)
    ids = [w.propose(body) for body in UNRELATED]
    w.server.default = says()
    with Triage(w.bank) as t:
        views = t.run().decided
    assert len(views) == 6 and all(v.acted and v.decision == ACCEPT for v in views)
    for v in views:
        assert v.audited == drawn(v.id, 0.5, "audit")
        assert (AUDIT in v.reasons) == v.audited
        opened = w.node.conn.execute("SELECT count(*) FROM triage_audits WHERE decision_id = ?", (v.id,)).fetchone()
        assert opened[0] == int(v.audited)
    assert {v.entry_id for v in views} == set(ids)


def test_every_acted_decision_of_an_audited_kind_is_audited_at_rate_one_never_a_credential(make_world):
    w = make_world(ON, audit_rate=1.0)
    accepted = w.propose(FACT)
    listed = w.propose("- Deploys need the VPN\n- The cache clears on Sunday\n- Staging uses Postgres 14", by="agent")
    token = w.propose(TOKEN, by="agent")
    w.server.script = [says(), says()]
    with Triage(w.bank) as t:
        views = {v.entry_id: v for v in t.run().decided}
    assert views[accepted].audited and views[accepted].reasons == [AUDIT]
    assert (views[listed].refusal, views[listed].audited) == (SEVERAL_CLAIMS, True)
    assert (views[token].refusal, views[token].audited, views[token].reasons) == (CREDENTIAL, False, [])


def test_shadow_is_never_audited(make_world):
    w = make_world(SHADOW, audit_rate=1.0)
    entry_id = w.propose(FACT)
    w.server.script = [says(), says()]
    view = _triage(w, entry_id)
    assert (view.decision, view.acted, view.audited) == (ACCEPT, False, False)


def test_a_type_backed_off_is_held_with_low_agreement_until_it_acts_again(make_world):
    w = make_world(ON, audit_rate=0.0)
    figures = {"kappa": 0.2, "verdicts": 25, "floor": 0.6, "min_samples": 20, "window_days": 30}
    w.node.submit_one(records.triage_state(SYSTEM_ACTOR, decision_type=ACCEPT, state="escalating", figures=figures))
    first = w.propose(FACT)
    w.server.default = says()
    view = _triage(w, first)
    assert (view.decision, view.held, view.reasons, view.acted) == (ACCEPT, [LOW_AGREEMENT], [LOW_AGREEMENT], False)
    assert view.inputs["backed_off"] == [ACCEPT] and _status(w, first) == "PROPOSED"
    w.node.submit_one(records.triage_state(SYSTEM_ACTOR, decision_type=ACCEPT, state="acting",
                                           figures=figures | {"kappa": 0.8}))
    second = w.propose("Expiry compares the entry's age with TTL_SECONDS.")
    view = _triage(w, second)
    assert (view.held, view.acted, _status(w, second)) == ([], True, "STANDING")


# -- the race with a change ---------------------------------------------------------------------------------------

class EditsFirst:
    """A chat endpoint that lets the agent edit the entry while the first judgment is asked, then answers through
    the real one: the decision was made on a version that is no longer the entry's."""

    def __init__(self, real: ChatProvider, edit: Any) -> None:
        self.real, self.edit, self.asked = real, edit, 0

    def complete(self, messages: list[dict[str, str]]) -> ChatReply:
        self.asked += 1
        if self.asked == 1:
            self.edit()
        return self.real.complete(messages)

    def close(self) -> None:
        self.real.close()


def test_a_decision_on_an_entry_changed_meanwhile_is_a_noop_and_the_entry_waits_again(make_world):
    w = make_world(SHADOW)
    entry = w.add(FACT)
    llm = w.node.company.llm
    chat = EditsFirst(ChatProvider(llm), lambda: w.bank.edit(entry.id, body="Cache entries expire by TTL_SECONDS, always.", actor="eng-bot"))
    w.server.default = says()
    with Triage(w.bank, judge=TriageJudge(llm, chat=chat)) as t:
        report = t.run()
        assert (report.counts, report.decided, report.calls) == ({"stale": 1}, [], 2)
        assert t.pending() == [entry.id]                   # triaged again at its new version
        view = t.run().decided[0]
    assert view.entry_version == w.node.conn.execute("SELECT version FROM entries WHERE id = ?",
                                                     (entry.id,)).fetchone()[0]


# -- the duty -----------------------------------------------------------------------------------------------------

def _pass(node: Node, duty: TriageDuty, progress: list | None = None) -> DutyReport:
    runner = DutyRunner(node, [duty], label="test")
    try:
        report = runner.run_one(duty, stop=threading.Event(),
                                progress=(lambda name, done, total, label: progress.append((name, done, total)))
                                if progress is not None else None)
    finally:
        runner.close()
    assert report.ran and not report.error, report.line()
    return report


def test_the_duty_triages_what_waits_a_budget_a_pass_saying_its_progress(make_world):
    w = make_world(SHADOW)
    ids = [w.add(f"Entries of table {n} carry no citation.", cites=[]).id for n in range(3)]
    duty = TriageDuty(w.node, budget=2)
    try:
        assert duty.name == TRIAGE and duty.scope == "fleet"
        seen: list = []
        first = _pass(w.node, duty, seen)
        assert first.result.more and first.result.counts == {ESCALATE: 2}
        assert seen[-1] == (TRIAGE, 2, 2) and (TRIAGE, 0, 2) in seen
        second = _pass(w.node, duty)
        assert not second.result.more and second.result.counts == {ESCALATE: 1}
        third = _pass(w.node, duty)
        assert third.result.summary == "no proposed entry waits for triage" and not third.result.worked
    finally:
        duty.close()
    decided = w.node.conn.execute("SELECT entry_id, reasons FROM triage_decisions").fetchall()
    assert sorted(r[0] for r in decided) == sorted(ids) and {r[1] for r in decided} == {'["UNGROUNDED"]'}


def test_the_duty_says_off_and_without_a_model_escalates_no_llm(tmp_path, git):
    with Node.open(_home(tmp_path / "off", git.path, llm=None, auto_triage=OFF)) as node:
        w = World(node, git, None)
        w.propose(FACT)
        duty = TriageDuty(node)
        try:
            assert _pass(w.node, duty).result.summary.startswith("off (KNOWLEDGE_AUTO_TRIAGE = off)")
        finally:
            duty.close()
            w.bank.close()
        assert node.conn.execute("SELECT count(*) FROM triage_decisions").fetchone()[0] == 0
    with Node.open(_home(tmp_path / "bare", git.path, llm=None)) as node:
        w = World(node, git, None)
        entry_id = w.propose(FACT)
        duty = TriageDuty(node)
        try:
            assert _pass(w.node, duty).result.counts == {ESCALATE: 1}
        finally:
            duty.close()
            w.bank.close()
        row = node.conn.execute("SELECT reasons FROM triage_decisions WHERE entry_id = ?", (entry_id,)).fetchone()
        assert row[0] == f'["{NO_LLM}"]'


def test_an_entry_under_a_page_in_the_trash_does_not_wait_for_triage(make_world):
    w = make_world(SHADOW)
    gone = KnowledgeBase(w.node).create_page("ENG", "Gone", "", actor="alex").id
    entry = w.add("Sessions are stored in Redis.", page=gone, cites=[])
    with Triage(w.bank) as t:
        assert t.pending() == [entry.id]
        KnowledgeBase(w.node).trash_page(gone, actor="alex")
        assert t.pending() == []
        assert t.run().said == "no proposed entry waits for triage"


async def test_an_agents_entry_added_through_mcp_is_triaged_by_the_duty_in_shadow_and_waits(tmp_path, git):
    with ChatServer(model="judge-model") as server:
        home = _home(tmp_path, git.path, llm=server.url)
        with Node.open(home) as node:
            KnowledgeBase(node).create_page("ENG", "Caching", "", actor="alex")
        sha = git.git("rev-parse", "HEAD").strip()
        async with connect(home.root, "eng-bot") as client:
            _text, data = await call(client, "add_entry", page="ENG/Caching", body=FACT, scope="apps/a",
                                     citations=[{"repository": "server", "path": "apps/a/cache.py", "lines": [1, 1],
                                                 "commit": sha}])
        entry_id = data["entry"]["id"]
        server.script = [says(), says()]
        with Node.open(home) as node:
            duty = TriageDuty(node)
            try:
                report = _pass(node, duty)
            finally:
                duty.close()
            assert report.result.counts == {ACCEPT: 1, "calls": 2}
            row = node.conn.execute("SELECT mode, decision, acted, held FROM triage_decisions WHERE entry_id = ?",
                                    (entry_id,)).fetchone()
            assert tuple(row) == (SHADOW, ACCEPT, 0, f'["{UNKNOWN_SOURCE}"]')
            status = node.conn.execute("SELECT status FROM entries WHERE id = ?", (entry_id,)).fetchone()[0]
            assert status == "PROPOSED"


def test_a_run_asked_to_stop_stops_before_the_next_entry_and_says_more_wait(make_world):
    w = make_world(SHADOW)
    w.add("Sessions are stored in Redis.", cites=[])
    stop = threading.Event()
    stop.set()
    with Triage(w.bank) as t:
        report = t.run(stop=stop)
        assert (report.decided, report.more, report.pending) == ([], True, 1)
        assert len(t.pending()) == 1
