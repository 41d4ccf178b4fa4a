"""Agreement and back-off (spec 003, "Audits and agreement"; core/bank/agreement.py): kappa per decision type
one-vs-rest against a table worked by hand, the latest verdict per decision counted once, the window's cut-off,
and the hysteresis — below the floor over at least the minimum stops a type, at or above over at least the minimum
resumes it, fewer verdicts or an undefined kappa change nothing, escalation never backs off."""
from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from conftest import config_with, new_home
from test_review_queue import AGENTS, KNOWLEDGE_VARS, decide, node_with
from test_sync import cli, ok

from core.bank.agreement import DAY_MS, Agreement, Verdict, counted, next_state, settle, type_kappa
from core.bank.entries import EntryBank
from core.bank.review import Review
from core.clock import now_ms
from core.node import Node
from core.paths import Home
from core.store.digest import content_digest
from core.pages.entry_model import SYSTEM_ACTOR
from core.pages.triage_model import (ACCEPT, ACTING, CORROBORATE, ESCALATE, ESCALATING, FROM_ACTION, FROM_AUDIT,
                                     LOW_AGREEMENT, ON, REFUSE, UNKNOWN_SOURCE)

NOW = 1_750_000_000_000

# Ten verdicts, (triage's decision, the person's outcome as a type), one per decision:
#
#   1 accept      accept         6 refuse       refuse
#   2 accept      accept         7 escalate     accept    (a person accepted what triage escalated)
#   3 accept      accept         8 escalate     escalate  (a person edited it, then accepted it)
#   4 accept      refuse         9 escalate     accept
#   5 corroborate corroborate   10 refuse       accept    (a person put a refused entry into use)
HAND_WORKED = [(ACCEPT, ACCEPT), (ACCEPT, ACCEPT), (ACCEPT, ACCEPT), (ACCEPT, REFUSE), (CORROBORATE, CORROBORATE),
               (REFUSE, REFUSE), (ESCALATE, ACCEPT), (ESCALATE, ESCALATE), (ESCALATE, ACCEPT), (REFUSE, ACCEPT)]

# Per type, one-vs-rest (a: triage said T, b: the person's outcome is T):
#
#   accept:       a&b = {1,2,3} 3   a&!b = {4} 1   !a&b = {7,9,10} 3   !a&!b = {5,6,8} 3
#                 p_o = (3+3)/10 = 0.6;  p_e = 0.4·0.6 + 0.6·0.4 = 0.48
#                 kappa = (0.6-0.48)/(1-0.48) = 0.12/0.52 = 3/13 = 0.2307…
#   corroborate:  a&b = {5} 1, the other 9 neither;  p_o = 1;  p_e = 0.1·0.1 + 0.9·0.9 = 0.82
#                 kappa = (1-0.82)/(1-0.82) = 1
#   refuse:       a&b = {6} 1   a&!b = {10} 1   !a&b = {4} 1   !a&!b 7
#                 p_o = 0.8;  p_e = 0.2·0.2 + 0.8·0.8 = 0.68;  kappa = 0.12/0.32 = 3/8 = 0.375
#   escalate:     a&b = {8} 1   a&!b = {7,9} 2   !a&b 0   !a&!b 7
#                 p_o = 0.8;  p_e = 0.3·0.1 + 0.7·0.9 = 0.66;  kappa = 0.14/0.34 = 7/17 = 0.4117…
HAND_KAPPA = {ACCEPT: 3 / 13, CORROBORATE: 1.0, REFUSE: 3 / 8, ESCALATE: 7 / 17}


def verdicts(pairs: list[tuple[str, str]], *, at: int = NOW, first_seq: int = 1) -> list[Verdict]:
    return [Verdict(f"d{first_seq + i}", decision, label, at, first_seq + i)
            for i, (decision, label) in enumerate(pairs)]


@pytest.mark.parametrize("decision_type", [ACCEPT, CORROBORATE, REFUSE, ESCALATE])
def test_kappa_per_type_one_vs_rest_is_the_hand_worked_figure(decision_type: str) -> None:
    window = counted(verdicts(HAND_WORKED), NOW, 30)
    assert len(window) == 10
    assert type_kappa(decision_type, window) == pytest.approx(HAND_KAPPA[decision_type], abs=1e-12)


def test_a_decision_counts_once_by_its_latest_verdict() -> None:
    """Decision 4 (an acceptance a person archived: refuse) was first agreed with in its audit; only the later
    verdict counts, so the table above stands however many verdicts a decision gathered before it."""
    rows = verdicts(HAND_WORKED, first_seq=100)
    audit_agreed = Verdict("d103", ACCEPT, ACCEPT, NOW, 50)      # the same decision, an earlier verdict
    window = counted([audit_agreed, *rows], NOW, 30)
    assert len(window) == 10 and [v for v in window if v.decision_id == "d103"][0].label == REFUSE
    assert type_kappa(ACCEPT, window) == pytest.approx(3 / 13, abs=1e-12)
    # and the other way round: a later agreement replaces the refusal, and acceptance is the table's with 4 agreed
    later = Verdict("d103", ACCEPT, ACCEPT, NOW, 500)
    window = counted([later, *rows], NOW, 30)           # log order decides, not the order rows come in
    assert len(window) == 10
    # accept now: a&b 4, a&!b 0, !a&b 3, !a&!b 3 -> p_o 0.7, p_e 0.4·0.7 + 0.6·0.3 = 0.46, kappa 0.24/0.54 = 4/9
    assert type_kappa(ACCEPT, window) == pytest.approx(4 / 9, abs=1e-12)


def test_the_window_cuts_off_older_verdicts() -> None:
    """Verdicts at exactly `now - window` still count; a millisecond older does not."""
    edge = verdicts([(ACCEPT, ACCEPT)], at=NOW - 30 * DAY_MS, first_seq=1)
    older = verdicts([(ACCEPT, REFUSE)], at=NOW - 30 * DAY_MS - 1, first_seq=2)
    recent = verdicts([(REFUSE, REFUSE)], at=NOW - DAY_MS, first_seq=3)
    window = counted([*edge, *older, *recent], NOW, 30)
    assert [v.decision_id for v in window] == ["d1", "d3"]
    # with those two, accept and refuse agree perfectly; the old disagreement is gone
    assert type_kappa(ACCEPT, window) == pytest.approx(1.0)
    assert counted([*edge, *older, *recent], NOW, 7) == recent


def test_kappa_is_undefined_without_verdicts_or_with_one_label_throughout() -> None:
    assert type_kappa(ACCEPT, []) is None
    # every decision a fold and every person agreed: for corroborate both raters say "yes" throughout (p_e = 1)
    same = counted(verdicts([(CORROBORATE, CORROBORATE)] * 25), NOW, 30)
    assert type_kappa(CORROBORATE, same) is None
    # and for accept both say "no" throughout: undefined too, not a disagreement
    assert type_kappa(ACCEPT, same) is None


@pytest.mark.parametrize("state, kappa, n, expected", [
    (ACTING, 0.59, 20, ESCALATING),       # below the floor over the minimum: stops acting
    (ACTING, -0.2, 35, ESCALATING),
    (ACTING, 0.59, 19, ACTING),           # one verdict short: stays
    (ACTING, 0.60, 20, ACTING),           # at the floor: acts
    (ACTING, None, 40, ACTING),           # undefined: stays
    (ESCALATING, 0.60, 20, ACTING),       # at the floor over the minimum: acts again
    (ESCALATING, 0.95, 19, ESCALATING),   # recovering needs the minimum too: old verdicts leaving changes nothing
    (ESCALATING, 0.59, 50, ESCALATING),
    (ESCALATING, None, 50, ESCALATING),
])
def test_the_hysteresis(state: str, kappa: float | None, n: int, expected: str) -> None:
    assert next_state(state, kappa, n, floor=0.6, min_samples=20) == expected


def test_a_minimum_of_zero_still_needs_a_defined_kappa() -> None:
    assert next_state(ACTING, None, 0, floor=0.6, min_samples=0) == ACTING
    assert next_state(ACTING, 0.1, 1, floor=0.6, min_samples=0) == ESCALATING


# -- on a real home: verdicts from people's actions, back-off and resume through settle -----------------------

@pytest.fixture
def bank_with(make_home, monkeypatch) -> Iterator:
    opened: list[EntryBank] = []

    def _open(**knowledge) -> EntryBank:
        opened.append(EntryBank(node_with(make_home, monkeypatch, **knowledge)))
        return opened[-1]

    yield _open
    for b in opened:
        b.node.close()


class Desk:
    """A page, agents' entries on it, triage's decisions about them and a person's actions, as they happen."""

    def __init__(self, bank: EntryBank) -> None:
        self.bank, self.review = bank, Review(bank)
        self.page = bank.kb.create_page("ENG", "Services", "what runs where", actor="alex").id
        self.target = bank.add(self.page, "The gateway listens on port 443.", distinct=True, actor="alex").id
        self.made = 0

    def entry(self) -> str:
        self.made += 1
        return self.bank.add(self.page, f"Service number {self.made} listens on port {8000 + self.made}.",
                             distinct=True, actor="eng-bot").id

    def decided(self, decision: str, *, mode: str = "shadow", held: tuple[str, ...] = (UNKNOWN_SOURCE,)) -> str:
        entry_id = self.entry()
        decide(self.bank, entry_id, decision, mode=mode, held=held,
               fold_into=self.target if decision == CORROBORATE else None)
        return entry_id

    def person(self, entry_id: str, outcome: str) -> None:
        """A person's action that reads as `outcome`: accept (accepted or verified, unchanged), refuse/corroborate
        (kept out of use), escalate (a person's edit, then accepted)."""
        if outcome == ESCALATE:
            self.bank.edit(entry_id, body=f"{self.bank.show(entry_id).body} Its health check is /ready.",
                           actor="alex")
            self.review.accept(entry_id, actor="alex")
        elif outcome == ACCEPT:
            self.review.accept(entry_id, actor="alex")
        else:
            self.review.archive(entry_id, actor="sam")

    def states(self) -> list[tuple[str, str, dict, str]]:
        return [(r[0], r[1], json.loads(r[2]), r[3]) for r in self.bank.conn.execute(
            "SELECT decision_type, state, figures, actor FROM triage_states ORDER BY seq")]


def test_kappa_from_peoples_real_actions_is_the_hand_worked_figure(bank_with):
    """The ten verdicts of the table at the top, each from a person's action on an agent's entry triage decided
    about in shadow: accepted, verified, disputed, archived, edited then accepted."""
    desk = Desk(bank_with())
    ids = [desk.decided(decision) for decision, _label in HAND_WORKED]
    actions = ["accept", "accept", "verify", "dispute", "archive", "archive", "accept", None, "verify", "accept"]
    for entry_id, action in zip(ids, actions):
        if action is None:
            desk.person(entry_id, ESCALATE)
        else:
            getattr(desk.review, action)(entry_id, actor="alex")
    rows = desk.bank.conn.execute("SELECT decision, label, source FROM triage_verdicts ORDER BY seq").fetchall()
    assert [(r[0], r[1]) for r in rows] == HAND_WORKED and {r[2] for r in rows} == {FROM_ACTION}

    status = desk.review.status()
    assert {t.decision_type: t.verdicts for t in status.types} == dict.fromkeys(HAND_KAPPA, 10)
    assert {t.decision_type: t.decided for t in status.types} == {ACCEPT: 4, CORROBORATE: 1, REFUSE: 2, ESCALATE: 3}
    for t in status.types:
        assert t.kappa == pytest.approx(HAND_KAPPA[t.decision_type], abs=1e-12)
    # accept is far below the floor (0.23 < 0.6) but over 10 verdicts, not the minimum's 20: nothing changes
    assert desk.states() == [] and {t.state for t in status.types} == {ACTING}


def test_a_decision_an_audit_and_then_a_person_judged_counts_once_by_the_later(bank_with):
    bank = bank_with(auto_triage="on")
    desk = Desk(bank)
    entry_id = desk.entry()
    d = decide(bank, entry_id, ACCEPT, mode=ON, acted=True, held=(), audited=True)
    desk.review.answer_audit(d, "agree", actor="alex")
    desk.review.archive(entry_id, actor="sam")           # later, a person took it out of use after all
    rows = bank.conn.execute("SELECT label, source FROM triage_verdicts ORDER BY seq").fetchall()
    assert [tuple(r) for r in rows] == [(ACCEPT, FROM_AUDIT), (REFUSE, FROM_ACTION)]
    with bank.node.lock:
        window = counted(Agreement(bank.conn, bank.kb.company.bank).verdicts(), now_ms(), 30)
    assert [(v.decision_id, v.label) for v in window] == [(d, REFUSE)]
    assert Review(bank).status().types[0].verdicts == 1


def test_back_off_below_the_floor_and_resume_at_it_each_recorded_with_its_figures(bank_with):
    """Floor 0.6 over at least 8 verdicts, triage on. Eight verdicts: 2 refusals and 2 folds people agreed with,
    1 acceptance they agreed with, 3 escalations they accepted. Accept, one-vs-rest: a&b 1, a&!b 0, !a&b 3,
    !a&!b 4 -> p_o 5/8, p_e (1/8)(4/8) + (7/8)(4/8) = 1/2, kappa 0.25: it stops acting at the 8th, not before.
    Escalate's kappa is 0 (3 escalations, none agreed with): measured, never backs off."""
    bank = bank_with(auto_triage="on", kappa_floor=0.6, kappa_min_samples=8)
    desk = Desk(bank)
    plan = [(REFUSE, REFUSE)] * 2 + [(CORROBORATE, CORROBORATE)] * 2 + [(ACCEPT, ACCEPT)] + [(ESCALATE, ACCEPT)] * 3
    for i, (decision, outcome) in enumerate(plan):
        desk.person(desk.decided(decision, mode=ON), outcome)
        if i < 7:
            assert desk.states() == [], f"no change on {i + 1} verdicts"
    [(kind, state, figures, actor)] = desk.states()
    assert (kind, state, actor) == (ACCEPT, ESCALATING, SYSTEM_ACTOR)
    assert figures["kappa"] == pytest.approx(0.25) and figures["verdicts"] == 8
    assert (figures["floor"], figures["min_samples"], figures["window_days"]) == (0.6, 8, 30)

    status = desk.review.status()
    by_type = {t.decision_type: t for t in status.types}
    since = bank.conn.execute("SELECT at FROM triage_states").fetchone()[0]
    assert (by_type[ACCEPT].state, by_type[ACCEPT].since, by_type[ACCEPT].acts) == (ESCALATING, since, False)
    assert [(by_type[t].kappa, by_type[t].state, by_type[t].acts) for t in (CORROBORATE, REFUSE)] == [
        (1.0, ACTING, True), (1.0, ACTING, True)]
    assert (by_type[ESCALATE].kappa, by_type[ESCALATE].state, by_type[ESCALATE].since) == (0.0, ACTING, None)
    with bank.node.lock:
        assert Agreement(bank.conn, bank.kb.company.bank).backed_off() == {ACCEPT}

    # the verdicts leaving the window is no evidence: with none left, the state stays
    assert settle(bank, now_ms() + 31 * DAY_MS) == [] and len(desk.states()) == 1

    # acceptances people agree with, held back meanwhile (LOW_AGREEMENT). With k more, accept's kappa is
    # a&b 1+k, !a&b 3, !a&!b 4 over 8+k: k = 7 -> p_o 12/15, p_e (8·11 + 7·4)/225, kappa 0.587 (stays);
    # k = 8 -> p_o 13/16, p_e (9·12 + 7·4)/256 = 136/256, kappa (208 - 136)/(256 - 136) = 0.6: at the floor
    for k in range(1, 9):
        desk.person(desk.decided(ACCEPT, mode=ON, held=(UNKNOWN_SOURCE, LOW_AGREEMENT)), ACCEPT)
        if k < 8:
            assert len(desk.states()) == 1, f"still escalating after {k}"
    assert Review(bank).status().types[0].kappa == pytest.approx(0.6)
    (_k, _s, _f, _a), (kind, state, figures, actor) = desk.states()
    assert (kind, state, actor, figures["verdicts"], figures["from"]) == (ACCEPT, ACTING, SYSTEM_ACTOR, 16, ESCALATING)
    assert figures["kappa"] == pytest.approx(0.6)
    again = {t.decision_type: t for t in Review(bank).status().types}[ACCEPT]
    assert (again.state, again.acts) == (ACTING, True)
    assert again.since == bank.conn.execute("SELECT max(at) FROM triage_states").fetchone()[0]
    # settling again finds nothing due, and writes nothing
    assert settle(bank) == [] and len(desk.states()) == 2


def test_every_node_shows_the_same_figures_and_a_change_settled_on_two_is_recorded_once(tmp_path, monkeypatch):
    """Two nodes on a shared log directory. A's people give eight verdicts (the back-off plan above) without
    settling the last; B, caught up, settles the change; A, not yet looking, settles it too: its record applies
    after B's and is a no-op. Both then show the same queue, the same kappa and state with the same since."""
    for var in (*KNOWLEDGE_VARS, "CREWLET_NOW"):
        monkeypatch.delenv(var, raising=False)
    config = config_with(knowledge={"auto_triage": "on", "kappa_min_samples": 8})
    config["actors"] = {**config["actors"], **AGENTS}
    a = new_home(tmp_path / "A", config)
    shared = tmp_path / "shared"
    ok(cli(a.root, "sync", "join", str(shared)))
    ok(cli(tmp_path / "B", "sync", "join", str(shared), "--operator", "sam"))
    a, b = Home(a.root), Home(tmp_path / "B")
    plan = [(REFUSE, REFUSE)] * 2 + [(CORROBORATE, CORROBORATE)] * 2 + [(ACCEPT, ACCEPT)] + [(ESCALATE, ACCEPT)] * 3
    with Node.open(a) as na:
        bank_a = EntryBank(na)
        desk = Desk(bank_a)
        for decision, outcome in plan[:-1]:
            desk.person(desk.decided(decision, mode=ON), outcome)
        last = desk.decided(ESCALATE, mode=ON)
        waiting = desk.decided(ESCALATE, mode=ON)                     # one left in the queue
        bank_a.accept(last, actor="alex")                             # the 8th verdict, not settled here
        assert desk.states() == []
        with Node.open(b) as nb:
            bank_b = EntryBank(nb)
            [written] = settle(bank_b)
            assert (written["decision_type"], written["state"], written["figures"]["verdicts"]) == (
                ACCEPT, ESCALATING, 8)
            assert settle(bank_a) == []        # A had not seen B's record: its own applied after it, a no-op
            assert [(k, st) for k, st, _f, _a in desk.states()] == [(ACCEPT, ESCALATING)]
            seen_a, seen_b = Review(bank_a), Review(bank_b)
            assert seen_a.status().to_json() == seen_b.status().to_json()
            assert seen_a.status().types[0].state == ESCALATING
            queue_a, queue_b = seen_a.queue().to_json(), seen_b.queue().to_json()
            assert [e["entry"]["id"] for e in queue_a["entries"]] == [waiting]
            assert [(e["entry"]["id"], e["reasons"], e["decision"]) for e in queue_a["entries"]] == [
                (e["entry"]["id"], e["reasons"], e["decision"]) for e in queue_b["entries"]]
    for home in (a, b):             # each catches up to the other's last record
        Node.open(home).close()
    assert content_digest(a.db_file) == content_digest(b.db_file)
