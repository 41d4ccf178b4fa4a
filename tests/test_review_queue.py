"""The review queue (spec 003, "The review queue"; core/bank/review.py) on a real home: proposed entries with the
reasons triage attached (or none yet: `triaged: false`), filtered by reason, then the open audits; a person's
accept, dispute, verify, archive and audit answer through the store, each refused to an agent in one line with
nothing written; and "Can triage decide alone?" per type."""
from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import config_with

from core.bank.entries import EntryBank
from core.bank.review import Review
from core.errors import Invalid, NotFound, Refused
from core.node import Node
from core.pages import records
from core.pages.entry_model import SYSTEM_ACTOR
from core.pages.triage_model import (ACCEPT, ACTING, AGREE, AUDIT, CITATION_FAILED, CORROBORATE, DECISIONS, DISAGREE,
                                     ESCALATE, FROM_AUDIT, NO_LLM, ON, PIN_REQUEST, REASONS, REFUSE, SEVERAL_CLAIMS,
                                     SHADOW, UNKNOWN_SOURCE)

AGENTS = {"ops-bot": {"kind": "agent", "admin": False, "space": "ENG"}}


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert text and "\n" not in text
    return text


KNOWLEDGE_VARS = ("KNOWLEDGE_AUTO_TRIAGE", "KNOWLEDGE_KAPPA_FLOOR", "KNOWLEDGE_KAPPA_MIN_SAMPLES",
                  "KNOWLEDGE_KAPPA_WINDOW_DAYS", "KNOWLEDGE_AUDIT_RATE")


def node_with(make_home: Any, monkeypatch: pytest.MonkeyPatch, **knowledge: Any) -> Node:
    """A node on a new home with the test's `[knowledge]` settings and a second agent (the environment's own
    settings cleared: they would win over the file)."""
    for var in (*KNOWLEDGE_VARS, "CREWLET_NOW"):
        monkeypatch.delenv(var, raising=False)
    cfg = config_with(knowledge=knowledge)
    cfg["actors"] = {**cfg["actors"], **AGENTS}
    return Node.open(make_home(cfg))


@pytest.fixture
def open_node(make_home, monkeypatch):
    opened: list[Node] = []

    def _open(**knowledge: Any) -> Node:
        opened.append(node_with(make_home, monkeypatch, **knowledge))
        return opened[-1]

    yield _open
    for n in opened:
        n.close()


@pytest.fixture
def bank(open_node):
    return EntryBank(open_node())


@pytest.fixture
def page(bank):
    return bank.kb.create_page("ENG", "Caching", "how the cache works", actor="alex").id


def _appended(bank: EntryBank) -> int:
    return bank.node.applied_seq()


def decide(bank: EntryBank, entry_id: str, decision: str, *, mode: str = SHADOW, acted: bool = False,
           reasons: tuple[str, ...] = (), held: tuple[str, ...] = (UNKNOWN_SOURCE,), fold_into: str | None = None,
           refusal: str | None = None, audited: bool = False, inputs: dict | None = None) -> str:
    """A triage decision about the entry as it stands, written with the triage.decide builder as triage writes it;
    returns its id."""
    version = bank.conn.execute("SELECT version FROM entries WHERE id = ?", (entry_id,)).fetchone()[0]
    if decision == REFUSE and refusal is None:
        refusal = SEVERAL_CLAIMS
    rec = records.triage_decide(SYSTEM_ACTOR, entry_id=entry_id, entry_version=version, mode=mode, decision=decision,
                                acted=acted, reasons=list(reasons), held=list(held), fold_into=fold_into,
                                refusal=refusal, inputs=inputs or {"rules": []}, audited=audited)
    out = bank.node.submit_one(rec)
    assert (out.status, out.reason) == ("applied", None), out
    return rec.op_id


# -- the queue before triage decides ----------------------------------------------------------------------------

def test_proposed_entries_wait_oldest_first_and_say_they_are_not_triaged_yet(bank, page):
    first = bank.add(page, "The cache holds for ten minutes.", distinct=True, actor="eng-bot")
    second = bank.add(page, "The queue drains at midnight.", distinct=True, actor="ops-bot")
    bank.add(page, "Deploys happen on Tuesdays.", distinct=True, actor="alex")        # a person's: standing
    archived = bank.add(page, "Staging runs Postgres 14.", distinct=True, actor="eng-bot")
    bank.archive(archived.id, actor="eng-bot")

    queue = Review(bank).queue()
    assert [q.entry.id for q in queue.entries] == [first.id, second.id]
    assert all(q.decision is None and q.reasons == [] for q in queue.entries)
    assert queue.proposals == [] and queue.audits == []
    out = json.loads(json.dumps(queue.to_json()))
    assert out["proposals"] == [] and out["audits"] == [] and out["reason"] is None
    assert [(e["entry"]["id"], e["triaged"], e["reasons"], e["decision"]) for e in out["entries"]] == [
        (first.id, False, [], None), (second.id, False, [], None)]


def test_an_unknown_reason_is_refused_naming_the_known_ones(bank, page):
    bank.add(page, "The cache holds for ten minutes.", distinct=True, actor="eng-bot")
    with pytest.raises(Invalid) as exc:
        Review(bank).queue(reason="SLOW")
    text = _one_line(exc)
    assert exc.value.code == "unknown_reason" and "'SLOW'" in text
    assert all(r in text for r in REASONS)
    # a known one in any case is the table's spelling; an entry triage has not decided about has no reason yet
    queue = Review(bank).queue(reason="no_llm")
    assert queue.reason == "NO_LLM" and queue.entries == []


# -- a person's actions, and an agent refused each ------------------------------------------------------------

def test_a_persons_actions_go_through_the_store(bank, page):
    review = Review(bank)
    ids = [bank.add(page, body, distinct=True, actor="eng-bot").id for body in (
        "The cache holds for ten minutes.", "The queue drains at midnight.", "Staging runs Postgres 14.",
        "Builds cache their wheels.")]
    assert review.accept(ids[0], actor="alex").status == "STANDING"
    assert review.dispute(ids[1], actor="alex", reason="the queue drains hourly").status == "DISPUTED"
    verified = review.verify(ids[2], actor="sam")
    assert (verified.status, verified.verified_by) == ("STANDING", "sam")
    assert review.archive(ids[3], actor="alex").status == "ARCHIVED"
    assert review.queue().entries == []
    # none of them had a triage decision: no verdict, no back-off change
    assert bank.conn.execute("SELECT count(*) FROM triage_verdicts").fetchone()[0] == 0
    assert bank.conn.execute("SELECT count(*) FROM triage_states").fetchone()[0] == 0


@pytest.mark.parametrize("action", ["accept", "dispute", "verify"])
def test_an_agent_is_refused_each_persons_action_in_one_line_and_nothing_is_written(bank, page, action):
    entry = bank.add(page, "The cache holds for ten minutes.", distinct=True, actor="eng-bot")
    before = _appended(bank)
    with pytest.raises(Refused) as exc:
        getattr(Review(bank), action)(entry.id, actor="eng-bot")
    assert exc.value.code == "forbidden"
    assert _one_line(exc) == f"to {action} an entry is a person's: eng-bot is an agent"
    assert _appended(bank) == before and bank.show(entry.id).status == "PROPOSED"
    # the store's own answer when the record reaches it anyway: the same words, the entry unchanged
    out = bank.node.submit_one(records.entry_status("eng-bot", entry_id=entry.id, action=action, by="agent"))
    assert (out.status, out.code, out.reason) == ("refused", "forbidden", str(exc.value))
    assert bank.show(entry.id).status == "PROPOSED"


def test_an_agent_archives_only_its_own_proposed_entry(bank, page):
    theirs = bank.add(page, "The cache holds for ten minutes.", distinct=True, actor="ops-bot")
    persons = bank.add(page, "Deploys happen on Tuesdays.", distinct=True, actor="alex")
    review = Review(bank)
    for entry in (theirs, persons):
        before = _appended(bank)
        with pytest.raises(Refused) as exc:
            review.archive(entry.id, actor="eng-bot")
        assert exc.value.code == "forbidden" and "only its own entries while proposed" in _one_line(exc)
        assert _appended(bank) == before and bank.show(entry.id).status == entry.status
        out = bank.node.submit_one(records.entry_status("eng-bot", entry_id=entry.id, action="archive", by="agent"))
        assert (out.status, out.code, out.reason) == ("refused", "forbidden", str(exc.value))
        assert bank.show(entry.id).status == entry.status
    # its own, while proposed, it may — and an agent's action is no verdict on triage's decision about it
    mine = bank.add(page, "The queue drains at midnight.", distinct=True, actor="eng-bot")
    decide(bank, mine.id, ACCEPT)
    assert review.archive(mine.id, actor="eng-bot").status == "ARCHIVED"
    assert bank.conn.execute("SELECT count(*) FROM triage_verdicts").fetchone()[0] == 0


def test_an_audit_answer_is_checked_before_anything_is_written(bank, page):
    review = Review(bank)
    before = _appended(bank)
    with pytest.raises(Invalid) as exc:
        review.answer_audit("d-1", "maybe", actor="alex")
    assert exc.value.code == "invalid_answer" and "agree or disagree" in _one_line(exc)
    with pytest.raises(Refused) as exc:
        review.answer_audit("d-1", "agree", actor="eng-bot")
    assert exc.value.code == "forbidden" and "eng-bot is not a person" in _one_line(exc)
    with pytest.raises(NotFound) as exc:
        review.answer_audit("d-1", "agree", actor="alex")
    assert exc.value.code == "no_decision" and "d-1" in _one_line(exc)
    assert _appended(bank) == before


# -- Can triage decide alone? ---------------------------------------------------------------------------------

def test_status_with_no_verdicts_says_every_type_acting_never_changed(open_node):
    bank = EntryBank(open_node(kappa_floor=0.5, kappa_min_samples=4, kappa_window_days=14))
    status = Review(bank).status()
    assert (status.mode, status.floor, status.min_samples, status.window_days) == ("shadow", 0.5, 4, 14)
    assert [t.decision_type for t in status.types] == list(DECISIONS)
    assert all((t.kappa, t.verdicts, t.state, t.since, t.acts) == (None, 0, ACTING, None, False)
               for t in status.types)                     # shadow: nothing acts
    out = status.to_json()
    assert out["types"][0] == {"decision_type": ACCEPT, "kappa": None, "verdicts": 0, "decided": 0,
                               "state": ACTING, "since": None, "acts": False}
    assert (out["open_audits"], out["waiting"]) == (0, 0)


@pytest.mark.parametrize("mode, acting", [("on", True), ("shadow", False), ("off", False)])
def test_only_in_mode_on_does_a_type_act_and_never_escalation(open_node, mode, acting):
    bank = EntryBank(open_node(auto_triage=mode))
    status = Review(bank).status()
    assert status.mode == mode
    assert {t.decision_type: t.acts for t in status.types} == {ACCEPT: acting, CORROBORATE: acting,
                                                               REFUSE: acting, ESCALATE: False}


# -- the queue with triage's decisions ---------------------------------------------------------------------------

def test_each_entry_shows_its_latest_decisions_reasons_and_filters_by_them(bank, page):
    review = Review(bank)
    pinned = bank.add(page, "Every handler logs its request id.", kind="convention", distinct=True, actor="eng-bot")
    unread = bank.add(page, "The cache holds for ten minutes.", distinct=True, actor="eng-bot")
    waiting = bank.add(page, "The queue drains at midnight.", distinct=True, actor="eng-bot")
    decide(bank, pinned.id, ESCALATE, reasons=(PIN_REQUEST, NO_LLM), inputs={"rules": [], "note": "a convention"})
    first = decide(bank, unread.id, ESCALATE, reasons=(CITATION_FAILED,))
    # edited since: the decision is about an earlier version until triage decides again, and then it is the latest
    bank.edit(unread.id, body="The cache holds for fifteen minutes.", actor="eng-bot")
    [stale] = [q for q in review.queue().entries if q.entry.id == unread.id]
    assert (stale.stale, stale.reasons, stale.to_json()["stale"]) == (True, [CITATION_FAILED, UNKNOWN_SOURCE], True)
    latest = decide(bank, unread.id, ACCEPT)

    queue = review.queue()
    assert [(q.entry.id, q.reasons) for q in queue.entries] == [
        (pinned.id, [PIN_REQUEST, NO_LLM, UNKNOWN_SOURCE]), (unread.id, [UNKNOWN_SOURCE]), (waiting.id, [])]
    assert queue.entries[1].decision is not None and queue.entries[1].decision.id == latest != first
    shown = queue.to_json()["entries"]
    assert [(e["triaged"], e["stale"]) for e in shown] == [(True, False), (True, False), (False, False)]
    assert shown[0]["decision"]["inputs"] == {"rules": [], "note": "a convention"}
    assert (shown[0]["decision"]["decision"], shown[0]["decision"]["mode"], shown[0]["decision"]["held"]) == (
        ESCALATE, SHADOW, [UNKNOWN_SOURCE])

    assert review.latest(unread.id) == queue.entries[1].decision and review.latest(waiting.id) is None
    with pytest.raises(NotFound) as exc:
        review.latest("e-none")
    assert "e-none" in _one_line(exc)

    assert [q.entry.id for q in review.queue(reason="NO_LLM").entries] == [pinned.id]
    assert [q.entry.id for q in review.queue(reason="unknown_source").entries] == [pinned.id, unread.id]
    assert review.queue(reason=CITATION_FAILED).entries == []      # the older decision's reason no longer applies


@pytest.fixture
def on_bank(open_node):
    return EntryBank(open_node(auto_triage="on"))


def test_open_audits_follow_the_entries_and_are_the_audit_reason(on_bank):
    bank = on_bank
    page = bank.kb.create_page("ENG", "Caching", "", actor="alex").id
    target = bank.add(page, "The cache holds for ten minutes.", distinct=True, actor="alex")
    accepted = bank.add(page, "The queue drains at midnight.", distinct=True, actor="eng-bot")
    folded = bank.add(page, "The cache keeps entries for ten minutes.", distinct=True, actor="eng-bot")
    waiting = bank.add(page, "Staging runs Postgres 14.", distinct=True, actor="eng-bot")
    d_accept = decide(bank, accepted.id, ACCEPT, mode=ON, acted=True, held=(), audited=True)
    d_fold = decide(bank, folded.id, CORROBORATE, mode=ON, acted=True, held=(), fold_into=target.id, audited=True)
    decide(bank, waiting.id, ESCALATE, mode=ON, reasons=(NO_LLM,))
    assert (bank.show(accepted.id).status, bank.show(folded.id).status) == ("STANDING", "ARCHIVED")

    queue = Review(bank).queue()
    assert [q.entry.id for q in queue.entries] == [waiting.id]
    assert [(a.decision.id, a.entry.id) for a in queue.audits] == [(d_accept, accepted.id), (d_fold, folded.id)]
    assert "accepted this entry on its own" in queue.audits[0].question
    assert target.id in queue.audits[1].question and "disagree puts it into use" in queue.audits[1].question
    shown = queue.to_json()["audits"]
    assert [a["reasons"] for a in shown] == [[AUDIT], [AUDIT]] and shown[0]["answers"] == [AGREE, DISAGREE]
    assert shown[0]["decision"]["answer"] is None and shown[0]["decision"]["audited"] is True

    only = Review(bank).queue(reason="audit")
    assert only.entries == [] and len(only.audits) == 2
    assert Review(bank).queue(reason=NO_LLM).audits == []
    assert Review(bank).status().open_audits == 2


def test_answering_an_audit_keeps_or_undoes_and_gives_a_verdict(on_bank):
    bank = on_bank
    review = Review(bank)
    page = bank.kb.create_page("ENG", "Caching", "", actor="alex").id
    target = bank.add(page, "The cache holds for ten minutes.", distinct=True, actor="alex")
    accepted = bank.add(page, "The queue drains at midnight.", distinct=True, actor="eng-bot")
    folded = bank.add(page, "The cache keeps entries for ten minutes.", distinct=True, actor="eng-bot")
    d_accept = decide(bank, accepted.id, ACCEPT, mode=ON, acted=True, held=(), audited=True)
    d_fold = decide(bank, folded.id, CORROBORATE, mode=ON, acted=True, held=(), fold_into=target.id, audited=True)

    kept = review.answer_audit(d_accept, "agree", actor="alex")
    assert (kept.id, kept.answer) == (d_accept, AGREE) and bank.show(accepted.id).status == "STANDING"
    undone = review.answer_audit(d_fold, " Disagree ", actor="sam")
    assert undone.answer == DISAGREE and bank.show(folded.id).status == "STANDING"      # put into use
    assert review.queue().audits == [] and review.status().open_audits == 0
    verdicts = bank.conn.execute("SELECT decision_id, decision, label, source, actor FROM triage_verdicts "
                                 "ORDER BY seq").fetchall()
    assert [tuple(v) for v in verdicts] == [(d_accept, ACCEPT, ACCEPT, FROM_AUDIT, "alex"),
                                           (d_fold, CORROBORATE, ACCEPT, FROM_AUDIT, "sam")]
    # the same answer again changes nothing; the other is refused in one line
    assert review.answer_audit(d_accept, "agree", actor="alex").answer == AGREE
    with pytest.raises(Refused) as exc:
        review.answer_audit(d_accept, "disagree", actor="alex")
    assert exc.value.code == "answered" and "answered agree by alex" in _one_line(exc)
    assert bank.show(accepted.id).status == "STANDING"


def test_an_agent_is_refused_an_audit_answer_in_the_stores_words_and_nothing_is_written(on_bank):
    bank = on_bank
    page = bank.kb.create_page("ENG", "Caching", "", actor="alex").id
    accepted = bank.add(page, "The queue drains at midnight.", distinct=True, actor="eng-bot")
    d_accept = decide(bank, accepted.id, ACCEPT, mode=ON, acted=True, held=(), audited=True)
    before = _appended(bank)
    with pytest.raises(Refused) as exc:
        Review(bank).answer_audit(d_accept, "disagree", actor="eng-bot")
    assert exc.value.code == "forbidden" and _appended(bank) == before
    # the store refuses the record itself in the same words, and the audit stays open, the entry as triage left it
    out = bank.node.submit_one(records.triage_audit("eng-bot", decision_id=d_accept, answer="disagree", by="agent"))
    assert (out.status, out.code, out.reason) == ("refused", "forbidden", _one_line(exc))
    assert [a.decision.id for a in Review(bank).queue().audits] == [d_accept]
    assert bank.show(accepted.id).status == "STANDING"
    assert bank.conn.execute("SELECT count(*) FROM triage_verdicts").fetchone()[0] == 0
