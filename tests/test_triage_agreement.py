"""Agreement and back-off (spec 003, "Audits and agreement"; core/bank/agreement.py): kappa per decision type
one-vs-rest against a table worked by hand, the latest verdict per decision counted once, the window's cut-off,
and the hysteresis — below the floor over at least the minimum stops a type, at or above over at least the minimum
resumes it, fewer verdicts or an undefined kappa change nothing, escalation never backs off."""
from __future__ import annotations

import pytest

from core.bank.agreement import DAY_MS, Verdict, counted, next_state, type_kappa
from core.pages.triage_model import ACCEPT, ACTING, CORROBORATE, ESCALATE, ESCALATING, REFUSE

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
    window = counted([*rows, later], NOW, 30)
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
