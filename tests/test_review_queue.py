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
from core.errors import Invalid, Refused
from core.node import Node
from core.pages import records
from core.pages.triage_model import ACCEPT, ACTING, CORROBORATE, DECISIONS, ESCALATE, REASONS, REFUSE

AGENTS = {"ops-bot": {"kind": "agent", "admin": False, "space": "ENG"}}


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert text and "\n" not in text
    return text


@pytest.fixture
def open_node(make_home, monkeypatch):
    """A node on a home with `knowledge` settings of the test's (the environment's own cleared: it would win)."""
    opened: list[Node] = []
    for var in ("KNOWLEDGE_AUTO_TRIAGE", "KNOWLEDGE_KAPPA_FLOOR", "KNOWLEDGE_KAPPA_MIN_SAMPLES",
                "KNOWLEDGE_KAPPA_WINDOW_DAYS", "KNOWLEDGE_AUDIT_RATE"):
        monkeypatch.delenv(var, raising=False)

    def _open(**knowledge: Any) -> Node:
        cfg = config_with(knowledge=knowledge)
        cfg["actors"] = {**cfg["actors"], **AGENTS}
        n = Node.open(make_home(cfg))
        opened.append(n)
        return n

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
    # its own, while proposed, it may
    mine = bank.add(page, "The queue drains at midnight.", distinct=True, actor="eng-bot")
    assert review.archive(mine.id, actor="eng-bot").status == "ARCHIVED"


def test_an_audit_answer_is_checked_before_anything_is_written(bank, page):
    review = Review(bank)
    before = _appended(bank)
    with pytest.raises(Invalid) as exc:
        review.answer_audit("d-1", "maybe", actor="alex")
    assert exc.value.code == "invalid_answer" and "agree or disagree" in _one_line(exc)
    with pytest.raises(Refused) as exc:
        review.answer_audit("d-1", "agree", actor="eng-bot")
    assert exc.value.code == "forbidden" and "eng-bot is an agent" in _one_line(exc)
    with pytest.raises(Exception) as exc:
        review.answer_audit("d-1", "agree", actor="alex")
    assert getattr(exc.value, "code", None) == "no_decision" and "d-1" in _one_line(exc)
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


def test_in_mode_on_every_type_but_escalation_acts(open_node):
    bank = EntryBank(open_node(auto_triage="on"))
    acts = {t.decision_type: t.acts for t in Review(bank).status().types}
    assert acts == {ACCEPT: True, CORROBORATE: True, REFUSE: True, ESCALATE: False}
