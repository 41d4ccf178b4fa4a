"""Triage's records on the pages log (issue 36, core/pages/triage_handlers.py), through a real node's submit path on
real SQLite: a decision recorded in shadow changes nothing, one acted on in mode on accepts, folds or refuses the
entry (a system history row), a stale one is a no-op; an audit opens only on what triage acted on and may audit, a
person alone answers it, and disagreeing undoes the decision; a decision type's back-off state; the verdict a
person's action gives the entry's latest decision (one per decision, none from an agent); the rows the same on a
second node, and given back by a repair when the entry's page was purged since."""
from __future__ import annotations

import json
from typing import Any

import pytest
from test_log_repair import _flip_seq
from test_sync import cli, ok

from core.bank.entries import EntryBank
from core.log import FileLog
from core.node import Node
from core.pages import records
from core.pages.service import KnowledgeBase
from core.pages.triage_handlers import UNDO
from core.store.digest import content_digest

TRIAGE = "crewlet"       # triage writes as crewlet itself (entry_model.SYSTEM_ACTOR)
TRIAGE_TABLES = ("triage_decisions", "triage_audits", "triage_verdicts", "triage_states")


@pytest.fixture
def page(kb: KnowledgeBase) -> str:
    return kb.create_page("ENG", "Caching", "how the cache works", actor="alex").id


@pytest.fixture
def bank(node: Node) -> EntryBank:
    return EntryBank(node)


def _entry(node: Node, entry_id: str) -> dict[str, Any]:
    row = node.conn.execute("SELECT * FROM entries WHERE id = ?", (entry_id,)).fetchone()
    return dict(row)


def _proposed(bank: EntryBank, page: str, body: str) -> str:
    return bank.add(page, body, distinct=True, actor="eng-bot").id


def _decide(node: Node, entry_id: str, decision: str, *, version: int | None = None, **how: Any) -> Any:
    """Submit what triage decided about `entry_id` (by default acted on in mode on, at the entry's version now)."""
    if version is None:
        version = _entry(node, entry_id)["version"]
    parts = {"mode": "on", "acted": True, "reasons": [], "held": [], "fold_into": None, "refusal": None,
             "inputs": {"rules": ["test"]}, "audited": False, **how}
    rec = records.triage_decide(TRIAGE, entry_id=entry_id, entry_version=version, decision=decision, **parts)
    out = node.submit_one(rec)
    out.op_id = rec.op_id
    return out


def _answer(node: Node, decision_id: str, answer: str, *, actor: str = "alex", by: str = "person") -> Any:
    return node.submit_one(records.triage_audit(actor, decision_id=decision_id, answer=answer, by=by))


def _rows(node: Node, sql: str, *args: Any) -> list[tuple]:
    return [tuple(r) for r in node.conn.execute(sql, args)]


def _history(node: Node, entry_id: str) -> list[tuple]:
    return _rows(node, "SELECT actor, actor_kind, action, from_status, to_status, reason FROM entry_history "
                       "WHERE entry_id = ? ORDER BY seq", entry_id)


def _verdicts(node: Node, entry_id: str) -> list[tuple]:
    return _rows(node, "SELECT decision, label, verdict, source, actor FROM triage_verdicts WHERE entry_id = ? "
                       "ORDER BY seq", entry_id)


# -- decisions ---------------------------------------------------------------------------------------------------

def test_a_decision_recorded_in_shadow_changes_nothing_on_the_entry(node, bank, page):
    entry = _proposed(bank, page, "The cache holds for ten minutes.")
    before, history = _entry(node, entry), _history(node, entry)
    out = _decide(node, entry, "accept", mode="shadow", acted=False, reasons=["NO_LLM", "UNGROUNDED"],
                  held=["UNKNOWN_SOURCE"], inputs={"neighbours": [{"id": "x", "score": 0.4}], "judgments": []})
    assert (out.status, out.result["status"], out.result["acted"]) == ("applied", "PROPOSED", False)
    assert _entry(node, entry) == before and _history(node, entry) == history
    [row] = node.conn.execute("SELECT * FROM triage_decisions WHERE entry_id = ?", (entry,)).fetchall()
    assert (row["op_id"], row["mode"], row["decision"], row["acted"], row["audited"]) == (
        out.op_id, "shadow", "accept", 0, 0)
    # the reasons in the spec's table order, the holds among them
    assert json.loads(row["reasons"]) == ["UNGROUNDED", "NO_LLM", "UNKNOWN_SOURCE"]
    assert json.loads(row["held"]) == ["UNKNOWN_SOURCE"]
    assert json.loads(row["inputs"]) == {"neighbours": [{"id": "x", "score": 0.4}], "judgments": []}
    assert _rows(node, "SELECT * FROM triage_audits") == []


def test_an_acceptance_triage_acted_on_makes_the_entry_standing_with_a_system_history_row(node, bank, page):
    entry = _proposed(bank, page, "The cache holds for ten minutes.")
    out = _decide(node, entry, "accept")
    assert (out.status, out.result["status"]) == ("applied", "STANDING")
    row = _entry(node, entry)
    assert (row["status"], row["status_by"], row["status_reason"]) == ("STANDING", TRIAGE, "accepted by triage")
    assert _history(node, entry)[-1] == (TRIAGE, "system", "triage-accept", "PROPOSED", "STANDING",
                                         "accepted by triage")
    assert bank.show(entry).in_use


def test_a_fold_triage_acted_on_archives_the_entry_and_corroborates_the_one_it_repeats(node, bank, page):
    kept = bank.add(page, "Deploys happen on Tuesdays.", actor="alex").id
    repeat = _proposed(bank, page, "Deploys go out every Tuesday.")
    out = _decide(node, repeat, "corroborate", fold_into=kept)
    assert (out.status, out.result["status"]) == ("applied", "ARCHIVED")
    assert _entry(node, repeat)["status_reason"] == f"folded into {kept} by triage"
    assert _history(node, repeat)[-1][:5] == (TRIAGE, "system", "triage-fold", "PROPOSED", "ARCHIVED")
    # it counts once more for the entry it repeats, with who wrote the repeat
    assert _rows(node, "SELECT op_id, entry_id, actor FROM entry_corroborations") == [(out.op_id, kept, "eng-bot")]
    assert bank.show(kept).corroborations == 1


def test_a_fold_into_an_entry_out_of_use_or_missing_is_refused_and_writes_nothing(node, bank, page):
    gone = bank.add(page, "Deploys happen on Tuesdays.", actor="alex").id
    bank.archive(gone, actor="alex")
    repeat = _proposed(bank, page, "Deploys go out every Tuesday.")
    before = content_digest(node.conn).tables
    out = _decide(node, repeat, "corroborate", fold_into=gone)
    assert (out.status, out.code) == ("refused", "out_of_use") and gone in out.reason
    out = _decide(node, repeat, "corroborate", fold_into="no-such-entry")
    assert (out.status, out.code) == ("refused", "not_found")
    after = content_digest(node.conn).tables
    assert {t: d for t, d in after.items() if t != "applied_ops"} == {
        t: d for t, d in before.items() if t != "applied_ops"}


@pytest.mark.parametrize("refusal, said", [("several_claims", "refused by triage: several claims"),
                                           ("credential", "refused by triage: credential")])
def test_a_refusal_triage_acted_on_archives_the_entry(node, bank, page, refusal, said):
    entry = _proposed(bank, page, "The cache holds for ten minutes.")
    out = _decide(node, entry, "refuse", refusal=refusal)
    assert (out.status, out.result["status"]) == ("applied", "ARCHIVED")
    assert _entry(node, entry)["status_reason"] == said
    assert _history(node, entry)[-1] == (TRIAGE, "system", "triage-refuse", "PROPOSED", "ARCHIVED", said)


def test_a_stale_decision_is_a_no_op(node, bank, page):
    """Triage read the entry at one version; it changed since (an edit, a person's action): the decision is a
    no-op, nothing written but its outcome, and triage decides again on what the entry is now."""
    edited = _proposed(bank, page, "The cache holds for ten minutes.")
    read_at = _entry(node, edited)["version"]
    bank.edit(edited, body="The cache holds for five minutes.", actor="eng-bot")
    accepted = _proposed(bank, page, "Retries double the load.")
    bank.accept(accepted, actor="alex")
    before = content_digest(node.conn).tables
    out = _decide(node, edited, "accept", version=read_at)
    assert (out.status, out.result["entry_id"], "status" in out.result) == ("noop", edited, False)
    assert "changed since triage read it" in out.reason
    out = _decide(node, accepted, "refuse", refusal="several_claims")      # at its version now, but STANDING
    assert out.status == "noop" and "STANDING" in out.reason
    after = content_digest(node.conn).tables
    assert {t: d for t, d in after.items() if t != "applied_ops"} == {
        t: d for t, d in before.items() if t != "applied_ops"}
    # at the version now, while proposed, it is recorded — once: a second decision at the same version is nothing
    assert _decide(node, edited, "escalate", mode="shadow", acted=False, reasons=["NO_LLM"]).status == "applied"
    again = _decide(node, edited, "escalate", mode="shadow", acted=False, reasons=["NO_LLM"])
    assert again.status == "noop" and "decided at version" in again.reason


@pytest.mark.parametrize("how", [
    {"mode": "shadow", "acted": False, "audited": True},                       # nothing acted on: nothing to audit
    {"decision": "refuse", "refusal": "credential", "audited": True},          # never shown to a person
    {"decision": "escalate", "acted": False, "audited": True},                 # a person decides it anyway
    {"decision": "escalate", "acted": True},                                   # an escalation is never acted on
    {"mode": "shadow", "acted": True},                                         # shadow acts on nothing
    {"held": ["UNKNOWN_SOURCE"], "acted": True},                               # a hold keeps it from acting
    {"mode": "off", "acted": False},                                           # off records nothing
    {"decision": "promote"},
    {"decision": "refuse", "refusal": "rude"},
    {"decision": "refuse"},                                                    # a refusal says why
    {"decision": "corroborate"},                                               # a fold names its target
    {"decision": "accept", "fold_into": "x"},
    {"reasons": ["BECAUSE"]},
    {"held": ["NO_LLM"], "acted": False, "reasons": ["NO_LLM"]},               # NO_LLM escalates, it holds nothing
])
def test_a_decision_against_triage_s_rules_is_refused_as_invalid(node, bank, page, how):
    entry = _proposed(bank, page, "The cache holds for ten minutes.")
    how = {"decision": "accept", **how}
    out = _decide(node, entry, how.pop("decision"), **how)
    assert (out.status, out.code) == ("refused", "invalid"), out
    assert "\n" not in out.reason
    assert _rows(node, "SELECT * FROM triage_decisions") == []


def test_an_acted_acceptance_of_a_correction_is_refused(node, bank, page):
    """Only a person's acceptance retires what a correction supersedes (SUPERSEDE_REQUEST)."""
    old = bank.add(page, "The cache holds for ten minutes.", actor="alex").id
    fix = bank.supersede(old, "The cache holds for five minutes.", actor="eng-bot").id
    out = _decide(node, fix, "accept")
    assert (out.status, out.code) == ("refused", "invalid") and "SUPERSEDE_REQUEST" in out.reason
    assert (_entry(node, old)["status"], _entry(node, fix)["status"]) == ("STANDING", "PROPOSED")


def test_a_decision_drawn_for_audit_opens_one(node, bank, page):
    entry = _proposed(bank, page, "The cache holds for ten minutes.")
    out = _decide(node, entry, "accept", audited=True)
    assert out.status == "applied" and out.result["audited"] is True
    assert _rows(node, "SELECT decision_id, entry_id, answer, answered_by FROM triage_audits") == [
        (out.op_id, entry, None, None)]


# -- audits ------------------------------------------------------------------------------------------------------

def _audited(node: Node, bank: EntryBank, page: str, decision: str) -> tuple[str, str, str | None]:
    """An entry triage acted on with `decision`, drawn for audit: (entry, decision id, the entry it folded into)."""
    target = None
    how: dict[str, Any] = {}
    if decision == "corroborate":
        target = bank.add(page, "Deploys happen on Tuesdays.", actor="alex").id
        how["fold_into"] = target
    if decision == "refuse":
        how["refusal"] = "several_claims"
    entry = _proposed(bank, page, "Deploys go out every Tuesday.")
    out = _decide(node, entry, decision, audited=True, **how)
    assert out.status == "applied", out
    return entry, out.op_id, target


@pytest.mark.parametrize("decision, left", [("accept", "STANDING"), ("corroborate", "ARCHIVED"),
                                            ("refuse", "ARCHIVED")])
def test_agreeing_with_an_audit_keeps_the_decision_and_gives_it_an_accepted_verdict(node, bank, page, decision, left):
    entry, decision_id, _target = _audited(node, bank, page, decision)
    corroborations = _rows(node, "SELECT * FROM entry_corroborations")
    out = _answer(node, decision_id, "agree", actor="sam")
    assert (out.status, out.result["status"]) == ("applied", left)
    assert _entry(node, entry)["status"] == left and _rows(node, "SELECT * FROM entry_corroborations") == corroborations
    assert _rows(node, "SELECT answer, answered_by, answer_op FROM triage_audits WHERE decision_id = ?",
                 decision_id) == [("agree", "sam", out.op_id)]
    assert _verdicts(node, entry) == [(decision, decision, "accepted", "audit", "sam")]


@pytest.mark.parametrize("decision, undone, label", [("accept", "ARCHIVED", "refuse"),
                                                     ("corroborate", "STANDING", "accept"),
                                                     ("refuse", "STANDING", "accept")])
def test_disagreeing_with_an_audit_undoes_the_decision(node, bank, page, decision, undone, label):
    entry, decision_id, target = _audited(node, bank, page, decision)
    left = _entry(node, entry)["status"]
    out = _answer(node, decision_id, "disagree")
    assert (out.status, out.result["status"]) == ("applied", undone)
    row = _entry(node, entry)
    assert (row["status"], row["status_by"]) == (undone, "alex")
    assert _history(node, entry)[-1][:5] == ("alex", "person", UNDO, left, undone)
    assert _verdicts(node, entry) == [(decision, label, "rejected", "audit", "alex")]
    if target is not None:     # an undone fold no longer counts for the entry it was folded into
        assert bank.show(target).corroborations == 0


def test_an_audit_is_a_person_s_to_answer(node, bank, page):
    _entry_id, decision_id, _ = _audited(node, bank, page, "accept")
    for actor, by in (("eng-bot", "agent"), (TRIAGE, "system")):
        out = _answer(node, decision_id, "disagree", actor=actor, by=by)
        assert (out.status, out.code) == ("refused", "forbidden")
        assert actor in out.reason and "\n" not in out.reason
    assert _rows(node, "SELECT answer FROM triage_audits") == [(None,)]
    assert _rows(node, "SELECT * FROM triage_verdicts") == []


def test_an_answered_audit_stays_answered(node, bank, page):
    entry, decision_id, _ = _audited(node, bank, page, "accept")
    assert _answer(node, decision_id, "agree").status == "applied"
    same = _answer(node, decision_id, "agree", actor="sam")
    assert same.status == "noop"
    other = _answer(node, decision_id, "disagree", actor="sam")
    assert (other.status, other.code) == ("refused", "answered") and "agree by alex" in other.reason
    assert _entry(node, entry)["status"] == "STANDING" and len(_verdicts(node, entry)) == 1
    missing = _answer(node, "no-such-decision", "agree")
    assert (missing.status, missing.code) == ("refused", "not_found")
    assert (_answer(node, decision_id, "maybe").code) == "invalid"


def test_a_disagreement_with_what_a_person_changed_since_is_refused(node, bank, page):
    entry, decision_id, _ = _audited(node, bank, page, "accept")
    bank.dispute(entry, actor="sam", reason="not sure")
    out = _answer(node, decision_id, "disagree")
    assert (out.status, out.code) == ("refused", "changed_since") and "DISPUTED" in out.reason
    assert _rows(node, "SELECT answer FROM triage_audits") == [(None,)]


# -- back-off states ---------------------------------------------------------------------------------------------

def test_a_back_off_state_is_written_only_when_it_changes(node):
    def state(decision_type: str, to: str) -> Any:
        return node.submit_one(records.triage_state(TRIAGE, decision_type=decision_type, state=to,
                                                    figures={"kappa": 0.31, "verdicts": 24, "floor": 0.6}))

    assert state("accept", "acting").status == "noop"            # every type acts until told otherwise
    assert state("accept", "escalating").status == "applied"
    assert state("accept", "escalating").status == "noop"
    assert state("refuse", "escalating").status == "applied"      # each type its own
    assert state("accept", "acting").status == "applied"
    out = state("escalate", "escalating")
    assert (out.status, out.code) == ("refused", "invalid") and "never backs off" in out.reason
    assert (state("accept", "asleep").code) == "invalid"
    rows = _rows(node, "SELECT decision_type, state, figures, actor FROM triage_states ORDER BY seq")
    assert [r[:2] for r in rows] == [("accept", "escalating"), ("refuse", "escalating"), ("accept", "acting")]
    assert json.loads(rows[0][2]) == {"floor": 0.6, "kappa": 0.31, "verdicts": 24} and rows[0][3] == TRIAGE


# -- verdicts from people's actions ------------------------------------------------------------------------------

# (triage's decision, what a person does, whether the person edits it first) -> (label, verdict), worked by hand
# from spec 003: a person left it in use unchanged = accept; out of use = refuse against an acceptance, agreement
# with anything else; edited and in use = escalate's agreement, else the label "edited"
VERDICT_CASES = [
    ("accept", "accept", False, "accept", "accepted"),
    ("accept", "archive", False, "refuse", "rejected"),
    ("accept", "dispute", False, "refuse", "rejected"),
    ("accept", "accept", True, "edited", "edited"),
    ("escalate", "verify", False, "accept", "rejected"),
    ("escalate", "archive", False, "escalate", "accepted"),
    ("escalate", "accept", True, "escalate", "accepted"),
    ("refuse", "archive", False, "refuse", "accepted"),
    ("refuse", "accept", False, "accept", "rejected"),
    ("corroborate", "dispute", False, "corroborate", "accepted"),
    ("corroborate", "accept", True, "edited", "edited"),
]


@pytest.mark.parametrize("decision, action, edit, label, verdict", VERDICT_CASES)
def test_a_person_s_action_on_an_entry_triage_decided_about_is_a_verdict(node, bank, page, decision, action, edit,
                                                                          label, verdict):
    target = bank.add(page, "Deploys happen on Tuesdays.", actor="alex").id
    entry = _proposed(bank, page, "Deploys go out every Tuesday.")
    how: dict[str, Any] = {"mode": "shadow", "acted": False}
    if decision == "corroborate":
        how["fold_into"] = target
    elif decision == "refuse":
        how["refusal"] = "several_claims"
    elif decision == "escalate":
        how["reasons"] = ["NO_LLM"]
    decided = _decide(node, entry, decision, **how)
    if edit:
        bank.edit(entry, body="Deploys go out every Tuesday morning.", actor="sam")
    rec = records.entry_status("sam", entry_id=entry, action=action, by="person")
    out = node.submit_one(rec)
    assert out.status == "applied", out
    assert out.result["verdict"] == {"decision_id": decided.op_id, "label": label, "verdict": verdict}
    assert _rows(node, "SELECT op_id, decision_id, decision, label, verdict, source, actor FROM triage_verdicts") == [
        (rec.op_id, decided.op_id, decision, label, verdict, "action", "sam")]


def test_an_agent_s_action_gives_no_verdict_and_a_decision_gets_one_from_people_s_actions(node, bank, page):
    entry = _proposed(bank, page, "The cache holds for ten minutes.")
    _decide(node, entry, "accept", mode="shadow", acted=False)
    bank.edit(entry, body="The cache holds for five minutes.", actor="eng-bot")     # an agent's edit is no person's
    bank.archive(entry, actor="eng-bot")
    assert _verdicts(node, entry) == []
    bank.accept(entry, actor="alex")            # a person takes it back into use: its first verdict, unedited
    bank.dispute(entry, actor="sam")            # a second action judges the same decision: no second verdict
    assert _verdicts(node, entry) == [("accept", "accept", "accepted", "action", "alex")]
    # an entry triage never decided about gives none
    other = _proposed(bank, page, "Retries double the load.")
    bank.accept(other, actor="alex")
    assert _verdicts(node, other) == []


def test_a_verdict_follows_the_latest_decision(node, bank, page):
    """Two decisions about one entry (it changed in between): a person's action judges the later one."""
    entry = _proposed(bank, page, "The cache holds for ten minutes.")
    _decide(node, entry, "escalate", mode="shadow", acted=False, reasons=["NO_LLM"])
    bank.edit(entry, body="The cache holds for five minutes.", actor="eng-bot")
    later = _decide(node, entry, "accept", mode="shadow", acted=False)
    bank.accept(entry, actor="alex")
    assert _rows(node, "SELECT decision_id, decision, verdict FROM triage_verdicts") == [
        (later.op_id, "accept", "accepted")]


# -- on a second node, and back after a repair -------------------------------------------------------------------

def _write_triage(home) -> dict[str, str]:
    """On `home`: an entry of every triage outcome, an audit of each answer, a back-off state, a person's verdict."""
    with Node.open(home) as node, EntryBank(node) as bank:
        kb = KnowledgeBase(node)
        page = kb.create_page("ENG", "Caching", "", actor="alex").id
        other = kb.create_page("ENG", "Deploys", "", actor="alex").id           # a fold's target under another page
        kept = bank.add(other, "Deploys happen on Tuesdays.", actor="alex").id
        shadowed = _proposed(bank, page, "The cache holds for ten minutes.")
        _decide(node, shadowed, "accept", mode="shadow", acted=False, held=["UNKNOWN_SOURCE"])
        bank.accept(shadowed, actor="alex")
        accepted = _proposed(bank, page, "Retries double the load.")
        a = _decide(node, accepted, "accept", audited=True)
        _answer(node, a.op_id, "disagree")
        folded = _proposed(bank, page, "Deploys go out every Tuesday.")
        f = _decide(node, folded, "corroborate", fold_into=kept, audited=True)
        _answer(node, f.op_id, "agree", actor="sam")
        refused = _proposed(bank, page, "The queue drains nightly.")
        _decide(node, refused, "refuse", refusal="several_claims", audited=True)       # left open
        withdrawn = _proposed(bank, page, "The worker restarts hourly.")
        _decide(node, withdrawn, "accept", mode="shadow", acted=False, held=["UNKNOWN_SOURCE"])
        bank.archive(withdrawn, actor="eng-bot")                  # an agent's withdrawal of its own: no verdict
        node.submit_one(records.triage_state(TRIAGE, decision_type="corroborate", state="escalating",
                                             figures={"kappa": 0.2, "verdicts": 21}))
        assert _rows(node, "SELECT count(*) FROM triage_verdicts") == [(3,)]
        return {"page": page, "kept": kept}


def _triage_rows(home) -> tuple[str, dict[str, list[tuple]]]:
    with Node.open(home) as node:
        assert node.damage is None, node.damage
        return content_digest(node.conn).content, {t: _rows(node, f"SELECT * FROM {t} ORDER BY 1, 2") for t in
                                                   (*TRIAGE_TABLES, "entries", "entry_corroborations")}


def test_the_triage_rows_are_the_same_on_a_second_node_through_a_shared_directory(tmp_path):
    from test_entries_replicated import _shared_fleet

    a, b, _shared, _sha = _shared_fleet(tmp_path)
    _write_triage(a)
    on_a, on_b = _triage_rows(a), _triage_rows(b)
    assert on_a == on_b
    assert all(on_b[1][t] for t in TRIAGE_TABLES), {t: len(on_b[1][t]) for t in TRIAGE_TABLES}


def _triage_seqs(log, *also: str) -> dict[int, str]:
    with FileLog(log, readonly=True) as flog:
        return {r.seq: r.type for r, _ in flog.read() if r.type.startswith("triage.") or r.type in also}


def test_triage_records_of_a_page_purged_since_are_given_back_each_in_turn(tmp_path):
    """The entries' page purged since (its triage rows went with it): one flipped byte in each triage record (and
    each status record, a person's with its verdict, an agent's without) in turn, each given back as a stand-in the
    purge then removes, nothing lost, nothing rebuilt, the digest kept."""
    from test_entries_replicated import _shared_fleet

    a, b, shared, _sha = _shared_fleet(tmp_path)
    ids = _write_triage(a)
    with Node.open(a) as node:
        kb = KnowledgeBase(node)
        kb.trash_page(ids["page"], actor="alex")
        kb.purge_page(ids["page"], actor="alex")
        assert all(_rows(node, f"SELECT count(*) FROM {t}") == [(0,)] for t in TRIAGE_TABLES[:3])
        assert _rows(node, "SELECT actor FROM entry_corroborations") == [("eng-bot",)]
    before = (_triage_rows(a), _triage_rows(b))
    assert before[0] == before[1]
    # and the status records whose verdicts the replay derives again, and the adds of the entries triage decided
    # about (a fold's corroboration of an entry under a page that stays outlives the purge)
    seqs = _triage_seqs(shared / "pages.log", "entry.status", "entry.add")
    assert set(seqs.values()) == {"triage.decide", "triage.audit", "triage.state", "entry.status", "entry.add"}
    for seq, kind in sorted(seqs.items()):
        _flip_seq(shared / "pages.log", seq)
        res = cli(a.root, "log", "repair", "--yes", "--json")
        out = json.loads(res.stdout)
        assert (res.exit_code, out["records_lost"], out["rebuilt"]) == (0, 0, False), (
            seq, kind, [r["why"] for r in out["rewritten"]])
    assert (_triage_rows(a), _triage_rows(b)) == before


def test_a_repair_gives_back_each_triage_record_from_its_rows(tmp_path):
    """The rows still there: each triage record flipped in turn is given back from them (as itself), and a fresh
    replay of the repaired log holds what A and B hold."""
    from test_entries_replicated import _shared_fleet

    a, b, shared, _sha = _shared_fleet(tmp_path)
    _write_triage(a)
    before = _triage_rows(a)
    for seq, kind in sorted(_triage_seqs(shared / "pages.log").items()):
        _flip_seq(shared / "pages.log", seq)
        out = json.loads(ok(cli(a.root, "log", "repair", "--yes", "--json")))
        assert (out["records_lost"], out["rebuilt"]) == (0, False), (seq, kind, out)
    assert _triage_rows(a) == before == _triage_rows(b)
    ok(cli(tmp_path / "R", "sync", "join", str(shared)))
    from core.paths import Home

    assert _triage_rows(Home(tmp_path / "R")) == before


def test_an_audit_of_an_entry_under_a_page_in_the_trash_is_agreed_with_but_not_undone(node, kb, bank, page):
    entry, decision_id, _ = _audited(node, bank, page, "accept")
    kb.trash_page(page, actor="alex")
    out = _answer(node, decision_id, "disagree")
    assert (out.status, out.code) == ("refused", "trashed")
    assert _answer(node, decision_id, "agree").status == "applied"       # it changes no entry
    assert _verdicts(node, entry) == [("accept", "accept", "accepted", "audit", "alex")]


def test_a_decision_about_an_entry_under_a_page_in_the_trash_is_refused(node, kb, bank, page):
    entry = _proposed(bank, page, "The cache holds for ten minutes.")
    kb.trash_page(page, actor="alex")
    out = _decide(node, entry, "accept", mode="shadow", acted=False)
    assert (out.status, out.code) == ("refused", "trashed")
    assert (_decide(node, "no-such-entry", "accept", version=1).code) == "not_found"
    assert _rows(node, "SELECT * FROM triage_decisions") == []


def test_what_depends_on_order_is_decided_in_log_order_whichever_node_wrote_it(tmp_path):
    """B writes without having looked at A's latest records: triage on B decides about an entry a person on A has
    edited since (stale: a no-op on both), and a person on B disagrees with an audit a person on A agreed with first
    (refused as answered on both); the rows and digests agree."""
    from test_entries_replicated import _shared_fleet

    a, b, _shared, _sha = _shared_fleet(tmp_path)
    with Node.open(a) as node, EntryBank(node) as bank:
        page = KnowledgeBase(node).create_page("ENG", "Caching", "", actor="alex").id
        edited = _proposed(bank, page, "The cache holds for ten minutes.")
        audited = _proposed(bank, page, "Retries double the load.")
        decision_id = _decide(node, audited, "accept", audited=True).op_id
    with Node.open(b) as node:                      # B has read both entries as they are now
        read_at = _entry(node, edited)["version"]
    with Node.open(b, catch_up=False) as nb, Node.open(a) as na:
        EntryBank(na).edit(edited, body="The cache holds for five minutes.", actor="alex")
        assert _answer(na, decision_id, "agree").status == "applied"
        stale = _decide(nb, edited, "accept", version=read_at, mode="shadow", acted=False)
        assert stale.status == "noop" and "changed since triage read it" in stale.reason
        late = _answer(nb, decision_id, "disagree", actor="sam")
        assert (late.status, late.code) == ("refused", "answered")
    on_a, on_b = _triage_rows(a), _triage_rows(b)
    assert on_a == on_b
    assert on_b[1]["triage_decisions"] and on_b[1]["triage_verdicts"][0][5] == "accepted"
