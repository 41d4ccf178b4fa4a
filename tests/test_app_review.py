"""The review queue in the app (issue 36; spec 003, "The review queue", "Audits and agreement"): the Review screen,
opened from the Spaces screen (v) and the palette, lists the page proposals (none: consolidation is not built), then
the proposed entries with the reasons triage attached and its decision, then the open audits; a person accepts an
entry or answers an audit from it, and the store holds the outcome; an agent is refused in one line; the triage
panel answers "Can triage decide alone?" with the figures Review.status() gives.

On a real home whose company.toml names a real git repository the entries cite, triage run by the real engine
(core/bank/triage.py, no model configured: a step that needs one escalates with NO_LLM) or, for what only mode on
with two accepting judgments would do, a decision written with the triage.decide builder as triage writes it.
Driven by Pilot; ages on the bank's calendar (CREWLET_NOW)."""
from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import config_with
from rich.console import Console
from test_app_small_terminal import footer_problems, status_problems
from test_app_support import app_for, new_home, wait_rendered, wait_screen, wait_until
from test_repos_support import GitRepo, numbered
from textual.widgets import OptionList

from core.bank.agreement import settle
from core.bank.entries import EntryBank
from core.bank.review import Review
from core.bank.triage import Triage
from core.node import Node
from core.pages import records
from core.pages.entry_model import SYSTEM_ACTOR
from core.pages.service import KnowledgeBase
from core.pages.triage_model import (ACCEPT, BROAD_SCOPE, CITATION_FAILED, CORROBORATE, ESCALATE, NO_LLM, ON,
                                     PIN_REQUEST, REFUSE, SEVERAL_CLAIMS, SHADOW, UNGROUNDED, UNKNOWN_SOURCE)
from crewlet_tui.entry_words import age, now_ms
from crewlet_tui.widgets.triage_panel import TriagePanel

SIZE = (100, 32)
HOUR_MS = 3600 * 1000
KNOWLEDGE_VARS = ("KNOWLEDGE_AUTO_TRIAGE", "KNOWLEDGE_KAPPA_FLOOR", "KNOWLEDGE_KAPPA_MIN_SAMPLES",
                  "KNOWLEDGE_KAPPA_WINDOW_DAYS", "KNOWLEDGE_AUDIT_RATE")


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat()


def decide(bank: EntryBank, entry_id: str, decision: str, *, mode: str = SHADOW, acted: bool = False,
           reasons: tuple[str, ...] = (), held: tuple[str, ...] = (), fold_into: str | None = None,
           refusal: str | None = None, audited: bool = False) -> str:
    """A triage decision about the entry as it stands, written with the triage.decide builder as triage writes it
    (for what the engine decides only with a model's two judgments); returns its id."""
    version = bank.conn.execute("SELECT version FROM entries WHERE id = ?", (entry_id,)).fetchone()[0]
    rec = records.triage_decide(SYSTEM_ACTOR, entry_id=entry_id, entry_version=version, mode=mode, decision=decision,
                                acted=acted, reasons=list(reasons), held=list(held), fold_into=fold_into,
                                refusal=refusal, inputs={"rules": []}, audited=audited)
    out = bank.node.submit_one(rec)
    assert (out.status, out.reason) == ("applied", None), out
    return rec.op_id


def make_review_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **knowledge: Any) -> dict[str, Any]:
    """Triage on, over a page with: a person's entry in use citing the code; an agent's entry citing the code and an
    issue, and an agent's citing nothing, each triaged by the engine (no model: NO_LLM; nothing cited: UNGROUNDED);
    an agent's repeat triage folded into the person's entry alone, drawn for audit. The bank's calendar an hour on.
    `knowledge`: more of company.toml's [knowledge] settings (the environment's are cleared: they would win)."""
    for var in (*KNOWLEDGE_VARS, "CREWLET_NOW"):
        monkeypatch.delenv(var, raising=False)
    g = GitRepo(tmp_path / "server")
    g.write("src/cache.py", "TTL_SECONDS = 600\n" + numbered(9))
    sha = g.commit("first")
    home = new_home(tmp_path, config=config_with(repositories={"server": {"path": str(g.path)}},
                                                 knowledge={"auto_triage": ON, **knowledge}))
    with Node.open(home) as node, EntryBank(node) as bank:
        page = KnowledgeBase(node).create_page("ENG", "Caching", "# Caching\n\nHow the cache works.\n", actor="alex")
        cite = {"repository": "server", "path": "src/cache.py", "lines": [1, 1], "commit": sha,
                "quote": "TTL_SECONDS = 600"}
        standing = bank.add(page.id, "Cache entries expire after ten minutes.", citations=[cite], actor="alex")
        proposed = bank.add(page.id, "The cache is per process, not shared.", kind="GOTCHA",
                            citations=[cite, {"link": "acme/api#12", "kind": "issue"}], actor="eng-bot")
        bare = bank.add(page.id, "Deploys are frozen on Fridays.", kind="DECISION", actor="eng-bot", distinct=True)
        with Triage(bank, judge=None) as triage:
            triage.triage(proposed.id)
            triage.triage(bare.id)
        folded = bank.add(page.id, "The cache keeps entries for ten minutes.", actor="eng-bot", distinct=True)
        audit = decide(bank, folded.id, CORROBORATE, mode=ON, acted=True, fold_into=standing.id, audited=True)
        last = bank.show(folded.id).created_at
    monkeypatch.setenv("CREWLET_NOW", _iso(last + HOUR_MS))
    return {"home": home, "page": page, "standing": standing, "proposed": proposed, "bare": bare, "folded": folded,
            "audit": audit}


@pytest.fixture
def review_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    return make_review_home(tmp_path, monkeypatch)


def _queue(home: Any, **kw: Any) -> Any:
    with Node.open(home) as node, EntryBank(node) as bank:
        return Review(bank).queue(**kw)


def _status(home: Any) -> Any:
    with Node.open(home) as node, EntryBank(node) as bank:
        return Review(bank).status()


def _rows(app: Any) -> list[tuple[str | None, str]]:
    rows = app.screen.query_one("#review-rows", OptionList)
    return [(o.id, o.prompt.plain) for o in (rows.get_option_at_index(i) for i in range(rows.option_count))]


def _said(app: Any, selector: str) -> str:
    return str(app.screen.query_one(selector).render())


def _panel_lines(panel: TriagePanel) -> list[str]:
    """The panel's lines as it draws them, at its width (its content is a rich table)."""
    console = Console(width=panel.content_region.width, record=True, color_system=None)
    console.print(panel.content)
    return [line.rstrip() for line in console.export_text().splitlines()]


def _keys(app: Any) -> set[str]:
    return {k.description for k in app.screen.query("FooterKey") if k.display}


async def _on_review(pilot: Any, app: Any) -> None:
    """From the Spaces screen, v: as a person gets there."""
    await wait_screen(pilot, "SpacesScreen")
    await pilot.press("v")
    await wait_screen(pilot, "ReviewScreen")
    await wait_until(pilot, lambda: app.screen.view is not None, what="the queue read")


async def _highlight(pilot: Any, app: Any, row_id: str) -> None:
    """The arrows to `row_id`'s row."""
    rows = app.screen.query_one("#review-rows", OptionList)
    target = rows.get_option_index(row_id)
    for _ in range(rows.option_count):
        if rows.highlighted == target:
            break
        await pilot.press("down" if rows.highlighted is None or rows.highlighted < target else "up")
    assert rows.highlighted == target


async def test_the_queue_lists_proposals_then_the_agents_entries_with_their_reasons_then_the_audits(review_home):
    home, proposed, bare, folded = (review_home[k] for k in ("home", "proposed", "bare", "folded"))
    queue = _queue(home)
    # what the engine decided, read by core: the screen shows this, not a list of its own
    assert {q.entry.id: q.reasons for q in queue.entries} == {proposed.id: [NO_LLM], bare.id: [UNGROUNDED]}
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await _on_review(pilot, app)
        rows = _rows(app)
        assert [r[0] for r in rows] == [None, None, f"entry:{proposed.id}", f"entry:{bare.id}", None,
                                        f"audit:{review_home['audit']}"]
        assert rows[0][1] == "Page proposals: none (f on a page folds its entries into its body)"
        assert rows[1][1] == "Entries waiting for a person (2)"
        assert rows[2][1] == "GOTCHA      escalate  NO_LLM  The cache is per process, not shared."
        assert rows[3][1] == "DECISION    escalate  UNGROUNDED  Deploys are frozen on Fridays."
        assert rows[4][1] == "Open audits (1)"
        assert rows[5][1] == "AUDIT       folded in alone  The cache keeps entries for ten minutes."
        assert _said(app, "#review-title") == "Review  2 entries waiting · 1 open audit"
        # the first entry highlighted: its reasons in the spec's words and triage's decision under the list
        detail = _said(app, "#review-detail").splitlines()
        assert detail[0] == f"{proposed.id} · ENG/Caching · eng-bot (agent), 1 h ago"
        assert detail[2] == "NO_LLM: a model was needed, and none is configured"
        assert detail[3] == "triage: escalate, on, 1 h ago; a person decides"
        assert {"Accept", "Verify", "Dispute", "Archive", "Open", "Filter"} <= _keys(app)
        assert not {"Agree", "Disagree"} & _keys(app)
        # the audit asks its question; its keys are the two answers
        await _highlight(pilot, app, f"audit:{review_home['audit']}")
        detail = _said(app, "#review-detail").splitlines()
        assert detail[0] == f"{folded.id} · ENG/Caching · ARCHIVED · eng-bot (agent), 1 h ago"
        assert detail[2:] == [f"Triage folded this entry into {review_home['standing'].id} as a repeat.",
                              "Agree keeps it folded; disagree puts it into use."]
        await wait_until(pilot, lambda: {"Agree", "Disagree", "Open"} <= _keys(app)
                         and not {"Accept", "Verify"} & _keys(app), what="the audit's keys")
        await wait_rendered(pilot, "folded in alone", "Can triage decide alone?", "y Agree")
        # enter opens the entry's own screen
        await pilot.press("enter")
        await wait_screen(pilot, "EntryScreen")
        await wait_until(pilot, lambda: app.screen.entry is not None and app.screen.entry.id == folded.id)


async def test_accepting_from_the_screen_puts_the_entry_into_use_in_the_store(review_home):
    home, proposed, bare = review_home["home"], review_home["proposed"], review_home["bare"]
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await _on_review(pilot, app)
        await _highlight(pilot, app, f"entry:{proposed.id}")
        await pilot.press("a")
        await wait_until(pilot, lambda: app.screen.id == "review-reason", what="the reason asked")
        await pilot.press(*"read the code")
        await pilot.press("enter")
        await wait_until(pilot, lambda: _said(app, "#review-notice") == f"entry {proposed.id}: STANDING, GROUNDED",
                         what="the outcome said")
        # it left the queue; the next one takes its row
        await wait_until(pilot, lambda: f"entry:{proposed.id}" not in [r[0] for r in _rows(app)], what="re-read")
        rows = app.screen.query_one("#review-rows", OptionList)
        assert rows.highlighted_option.id == f"entry:{bare.id}"
        assert _said(app, "#review-title").startswith("Review  1 entry waiting")
    with Node.open(home) as node, EntryBank(node) as bank:
        stored = bank.show(proposed.id)
        assert (stored.status, stored.status_by, stored.status_reason) == ("STANDING", "alex", "read the code")
        # the person's acceptance is a verdict on triage's escalation (the store derives it from the action)
        verdicts = node.conn.execute("SELECT decision, label FROM triage_verdicts").fetchall()
        assert [tuple(v) for v in verdicts] == [(ESCALATE, ACCEPT)]


async def test_an_audit_answered_from_the_screen_undoes_what_triage_did(review_home):
    home, folded, audit = review_home["home"], review_home["folded"], review_home["audit"]
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await _on_review(pilot, app)
        await _highlight(pilot, app, f"audit:{audit}")
        await pilot.press("n")
        await wait_until(pilot, lambda: app.screen.id == "review-disagree", what="asked first")
        assert _said(app, ".dialog-body") == (
            f"Triage folded “The cache keeps entries for ten minutes.” into {review_home['standing'].id} on its own. "
            "Disagreeing undoes it: it is put into use (STANDING).")
        await pilot.press("y")
        await wait_until(pilot, lambda: _said(app, "#review-notice") == (
            f"audit of entry {folded.id}: disagreed, the entry is put into use"), what="the answer said")
        await wait_until(pilot, lambda: _rows(app)[-2:] == [
            (None, "Open audits (0)"), (None, "none: triage's acts drawn for audit wait here (triage on)")],
            what="the audit closed")
    with Node.open(home) as node, EntryBank(node) as bank:
        assert bank.show(folded.id).status == "STANDING"
        answered = node.conn.execute("SELECT answer, answered_by FROM triage_audits WHERE decision_id = ?",
                                     (audit,)).fetchone()
        assert tuple(answered) == ("disagree", "alex")
    assert _queue(home).audits == []


async def test_agreeing_with_an_audit_keeps_it_and_asks_nothing(review_home):
    home, folded, audit = review_home["home"], review_home["folded"], review_home["audit"]
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await _on_review(pilot, app)
        await _highlight(pilot, app, f"audit:{audit}")
        await pilot.press("y")
        await wait_until(pilot, lambda: _said(app, "#review-notice") == (
            f"audit of entry {folded.id}: agreed, triage's corroborate stands"), what="the answer said")
        assert app.screen.id != "review-disagree"
    with Node.open(home) as node, EntryBank(node) as bank:
        assert bank.show(folded.id).status == "ARCHIVED"
    assert _queue(home).audits == []


async def test_an_agent_is_refused_each_action_in_one_line_and_nothing_is_written(review_home):
    home, proposed, audit = review_home["home"], review_home["proposed"], review_home["audit"]
    app = app_for(home, "eng-bot")
    async with app.run_test(size=SIZE) as pilot:
        await _on_review(pilot, app)
        before = app.session.node.applied_seq()
        await _highlight(pilot, app, f"entry:{proposed.id}")
        await pilot.press("a")          # no reason asked: the store refuses the agent at once
        await wait_until(pilot, lambda: _said(app, "#review-notice").startswith(
            "refused: to accept an entry is a person's: eng-bot is an agent (this app acts as eng-bot: open it --as "
            "a person to act as one)"), what="the refusal")
        assert app.screen.id != "review-reason"
        await _highlight(pilot, app, f"audit:{audit}")
        await pilot.press("n")          # nor asked to confirm
        await wait_until(pilot, lambda: _said(app, "#review-notice").startswith(
            "refused: to answer an audit is a person's: eng-bot is not a person"), what="the refusal")
        assert app.screen.id != "review-disagree"
        await wait_rendered(pilot, "to answer an audit is a person's")
        assert app.session.node.applied_seq() == before
    queue = _queue(home)
    assert proposed.id in [q.entry.id for q in queue.entries] and [a.decision.id for a in queue.audits] == [audit]


async def test_the_entries_filter_by_reason(review_home):
    home, proposed, bare = review_home["home"], review_home["proposed"], review_home["bare"]
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await _on_review(pilot, app)
        await pilot.press("f")
        await wait_until(pilot, lambda: app.screen.id == "review-filter", what="the reasons offered")
        choices = app.screen.query_one("#review-reasons", OptionList)
        offered = {choices.get_option_at_index(i).id: choices.get_option_at_index(i).prompt.plain.splitlines()[0]
                   for i in range(choices.option_count)}
        assert offered[""] == "every reason  (now)"
        assert offered[UNGROUNDED] == "UNGROUNDED  1" and offered[UNKNOWN_SOURCE] == "UNKNOWN_SOURCE  0"
        while choices.highlighted != choices.get_option_index(UNGROUNDED):
            await pilot.press("down")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.screen.reason == UNGROUNDED and app.screen.view is not None
                         and app.screen.view.reason == UNGROUNDED, what="filtered")
        ids = [r[0] for r in _rows(app)]
        assert f"entry:{bare.id}" in ids and f"entry:{proposed.id}" not in ids
        assert "Entries waiting for a person (1) with UNGROUNDED" in [r[1] for r in _rows(app)]
        assert _said(app, "#review-title").endswith("· reason UNGROUNDED (f: every reason)")
        # the same as core filters it; and back to every reason
        assert [q.entry.id for q in _queue(home, reason=UNGROUNDED).entries] == [bare.id]
        await pilot.press("f")
        await wait_until(pilot, lambda: app.screen.id == "review-filter")
        await pilot.press("home", "enter")
        await wait_until(pilot, lambda: app.screen.view is not None and app.screen.view.reason is None
                         and f"entry:{proposed.id}" in [r[0] for r in _rows(app)], what="unfiltered")


@pytest.fixture
def agreed_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Verdicts behind the panel: shadow decisions on agents' entries, each then decided by a person, with a low
    minimum so kappa counts (each type's row is figures, not dashes), and the back-off settled as Review's actions
    settle it."""
    review_home = make_review_home(tmp_path, monkeypatch, kappa_min_samples=3)
    home, page = review_home["home"], review_home["page"]
    with Node.open(home) as node, EntryBank(node) as bank:
        for n, (decision, action) in enumerate([(ACCEPT, "accept"), (ACCEPT, "archive"), (ESCALATE, "accept"),
                                                (ESCALATE, "archive"), (REFUSE, "archive"), (ACCEPT, "accept")]):
            entry = bank.add(page.id, f"Shard {n} of the cache lives on its own node.", actor="eng-bot",
                             distinct=True)
            decide(bank, entry.id, decision, mode=SHADOW, held=(UNKNOWN_SOURCE,) if decision != ESCALATE else (),
                   reasons=(NO_LLM,) if decision == ESCALATE else (UNKNOWN_SOURCE,),
                   refusal=SEVERAL_CLAIMS if decision == REFUSE else None)
            getattr(bank, action)(entry.id, actor="sam")
        settle(bank)
    return review_home


async def test_the_panel_says_what_review_status_says(agreed_home):
    home = agreed_home["home"]
    status = _status(home)
    assert status.min_samples == 3 and any(t.kappa is not None for t in status.types)
    app = app_for(home, "alex")
    async with app.run_test(size=(120, 36)) as pilot:
        await _on_review(pilot, app)
        panel = app.screen.query_one(TriagePanel)
        assert panel.status == status
        lines = _panel_lines(panel)
        assert lines[0] == "Can triage decide alone?  mode on · floor 0.60, ≥ 3 verdicts, 30 days"
        assert lines[1].split() == ["type", "kappa", "verdicts", "state", "since", "acts", "alone"]
        for line, row in zip(lines[2:], status.types, strict=True):
            kappa = "—" if row.kappa is None else f"{row.kappa:.2f}"
            assert line.split()[:4] == [row.decision_type, kappa, str(row.verdicts), row.state], line
        await wait_rendered(pilot, "Can triage decide alone?", "floor 0.60")
        # the hand-made verdicts backed accept off (kappa under the floor over at least 3): said with since when
        accept = next(t for t in status.types if t.decision_type == ACCEPT)
        since = age(accept.since, now_ms())
        assert accept.state == "escalating" and f"escalating  {since}  no (LOW_AGREEMENT)" in lines[2]


@pytest.mark.parametrize("size", [(80, 24), (120, 36)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_review_screen_is_usable_at_each_size(review_home, size):
    """The Spaces screen's footer offers v Review; the review screen's footer holds its keys, nothing past an edge,
    and the panel, the rows and the detail all show (as test_app_small_terminal measures every screen)."""
    app = app_for(review_home["home"], "alex")
    async with app.run_test(size=size) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        await wait_rendered(pilot, "v Review")
        assert not footer_problems(app, "spaces", size[0]) + status_problems(app)
        await _on_review(pilot, app)
        await wait_rendered(pilot, "Can triage decide alone?", "The cache is per process", "NO_LLM: a model was needed")
        problems = footer_problems(app, "review", size[0]) + status_problems(app)
        assert not problems and {"Accept", "Verify", "Dispute", "Archive", "Filter", "Back", "Help"} <= _keys(app)
        rows = app.screen.query_one("#review-rows", OptionList)
        assert rows.region.height >= 4 and rows.region.bottom <= app.screen.query_one("#review-detail").region.y
        # the audits below: reached by the arrows, the list scrolling
        await _highlight(pilot, app, f"audit:{review_home['audit']}")
        await wait_rendered(pilot, "folded in alone", "Agree", "Disagree")


async def test_an_empty_queue_says_so_on_a_new_home(tmp_path, monkeypatch):
    for var in (*KNOWLEDGE_VARS, "CREWLET_NOW"):
        monkeypatch.delenv(var, raising=False)
    app = app_for(new_home(tmp_path), "alex")
    async with app.run_test(size=SIZE) as pilot:
        await _on_review(pilot, app)
        assert [r[1] for r in _rows(app)] == [
            "Page proposals: none (f on a page folds its entries into its body)", "Entries waiting for a person (0)",
            "none: nothing waits for a person", "Open audits (0)",
            "none: triage's acts drawn for audit wait here (triage on)"]
        assert _said(app, "#review-title") == "Review  0 entries waiting · 0 open audits"
        panel = _panel_lines(app.screen.query_one(TriagePanel))
        assert panel[0] == "Can triage decide alone?  mode shadow · floor 0.60, ≥ 20 verdicts, 30 days"
        assert panel[2].split() == ["accept", "—", "0", "acting", "—", "no", "(shadow)"]
        assert not {"Accept", "Agree", "Open"} & _keys(app) and {"Filter", "Back"} <= _keys(app)
        await wait_rendered(pilot, "nothing waits for a person")


def _in_view(app: Any) -> bool:
    rows = app.screen.query_one("#review-rows", OptionList)
    top = rows._index_to_line[rows.highlighted] - rows.scroll_y
    return 0 <= top < rows.scrollable_content_region.height


async def test_the_highlighted_row_stays_in_view_at_80x24(review_home):
    """At 80x24 the list holds a few rows: after an action the next row takes the highlight and the notice saying the
    outcome shows above the list (making it shorter), and an audit's detail is as tall as an entry's — the
    highlighted row stays on the screen through each (a detail that grew with its row hid the audit under it)."""
    home, page = review_home["home"], review_home["page"]
    with Node.open(home) as node, EntryBank(node) as bank:
        for n in range(8):
            bank.add(page.id, f"Shard {n} of the cache lives on its own node.", actor="eng-bot", distinct=True)
    app = app_for(home, "alex")
    async with app.run_test(size=(80, 24)) as pilot:
        await _on_review(pilot, app)
        rows = app.screen.query_one("#review-rows", OptionList)
        # down to the lowest row the list shows
        while True:
            await pilot.press("down")
            await pilot.pause()
            assert _in_view(app)
            if rows._index_to_line[rows.highlighted] - rows.scroll_y == rows.scrollable_content_region.height - 1:
                break
        acted = rows.highlighted_option.id
        await pilot.press("x")
        await wait_until(pilot, lambda: app.screen.id == "review-reason", what="the reason asked")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.screen.query_one("#review-notice").display
                         and acted not in [r[0] for r in _rows(app)], what="archived, and the queue read again")
        await pilot.pause(0.1)
        assert _in_view(app), (rows.highlighted, rows.scroll_y, rows.scrollable_content_region)
        # G: the last row, an audit, whose detail is as tall as an entry's (the list does not shrink under it)
        await pilot.press("G")
        await wait_until(pilot, lambda: rows.highlighted_option.id == f"audit:{review_home['audit']}")
        await pilot.pause(0.1)
        assert _in_view(app), (rows.highlighted, rows.scroll_y, rows.scrollable_content_region)


async def test_many_reasons_are_named_and_a_decision_the_entry_outgrew_says_so(review_home):
    """A row names its first reason and how many more; the detail says the first in words and names the rest, within
    its five lines (two reasons are each said in words, as the other tests show). An entry its
    agent changed after triage decided shows that decision as stale (triage decides again)."""
    home, page, bare = review_home["home"], review_home["page"], review_home["bare"]
    with Node.open(home) as node, EntryBank(node) as bank:
        many = bank.add(page.id, "Every service reads the cache through one client.", kind="CONVENTION",
                        actor="eng-bot", distinct=True)
        decide(bank, many.id, ESCALATE, mode=ON, reasons=(CITATION_FAILED, PIN_REQUEST, BROAD_SCOPE, NO_LLM))
        bank.edit(bare.id, body="Deploys are frozen on Fridays after noon.", actor="eng-bot")
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await _on_review(pilot, app)
        rows = dict(_rows(app))
        assert rows[f"entry:{many.id}"] == ("CONVENTION  escalate  CITATION_FAILED +3  Every service reads the cache "
                                            "through one client.")
        assert rows[f"entry:{bare.id}"].startswith("DECISION    escalate (stale)  UNGROUNDED  Deploys are frozen on "
                                                   "Fridays after noon.")
        await _highlight(pilot, app, f"entry:{many.id}")
        detail = _said(app, "#review-detail").splitlines()     # five lines, as the detail is tall
        assert detail[2:4] == ["CITATION_FAILED: a citation does not hold, or was not read yet",
                               "and PIN_REQUEST, BROAD_SCOPE, NO_LLM"]
        assert detail[4].startswith("triage: escalate, on, ") and detail[4].endswith("; a person decides")
        assert len(detail) == app.screen.query_one("#review-detail").content_region.height
        await _highlight(pilot, app, f"entry:{bare.id}")
        assert _said(app, "#review-detail").splitlines()[-1].endswith(
            "; the entry changed since: triage decides again")


async def test_the_queue_follows_records_another_process_writes(review_home):
    """Records another process appended, once applied, refresh the review screen (the app's `_refresh_views`, which
    the apply duty's pass calls): a new entry triage decided about shows with its reason."""
    home, page = review_home["home"], review_home["page"]
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await _on_review(pilot, app)
        with Node.open(home) as other, EntryBank(other) as bank:
            added = bank.add(page.id, "Cache misses are logged at debug level.", actor="eng-bot", distinct=True)
            with Triage(bank, judge=None) as triage:
                triage.triage(added.id)
        app.session.node.catch_up()
        app._refresh_views()
        await wait_until(pilot, lambda: f"entry:{added.id}" in [r[0] for r in _rows(app)], what="the new entry")
        assert dict(_rows(app))[f"entry:{added.id}"].startswith("FACT        escalate  UNGROUNDED  Cache misses")
        assert _said(app, "#review-title").startswith("Review  3 entries waiting")


async def test_the_apps_own_triage_pass_refreshes_the_queue(review_home):
    """The triage duty running in this app decides about an entry the screen showed as not triaged: its pass,
    reported as the duty runner reports it, refreshes the screen on show (the apply duty refreshes only for records
    another process wrote)."""
    import threading

    from core.duties.runner import DutyReport, PassContext
    from core.duties.triage import TriageDuty
    from crewlet_tui.app import DutyPassed

    home, page = review_home["home"], review_home["page"]
    with Node.open(home) as node, EntryBank(node) as bank:
        waiting = bank.add(page.id, "Cache misses are logged at debug level.", actor="eng-bot", distinct=True)
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await _on_review(pilot, app)
        assert dict(_rows(app))[f"entry:{waiting.id}"].startswith("FACT        not triaged  Cache misses")
        await _highlight(pilot, app, f"entry:{waiting.id}")
        assert _said(app, "#review-detail").splitlines()[-1] == "triage: not decided yet (its duty decides it next)"
        duty = TriageDuty(app.session.node)
        try:
            done = duty.run_pass(PassContext(cursor=None, stop=threading.Event(), duty="triage"))
        finally:
            duty.close()
        assert done.worked
        app.post_message(DutyPassed(DutyReport("triage", True, done), done.status))
        await wait_until(pilot, lambda: dict(_rows(app))[f"entry:{waiting.id}"].startswith(
            "FACT        escalate  UNGROUNDED  Cache misses"), what="the queue read again")


async def test_a_section_longer_than_the_screen_lists_says_how_many_more(review_home, monkeypatch):
    """More waiting entries than a section lists (SHOWN, 500) are counted with the command that lists them all."""
    from crewlet_tui.screens import review

    monkeypatch.setattr(review, "SHOWN", 1)
    app = app_for(review_home["home"], "alex")
    async with app.run_test(size=SIZE) as pilot:
        await _on_review(pilot, app)
        assert [r[1] for r in _rows(app)][1:4] == [
            "Entries waiting for a person (2)", dict(_rows(app))[f"entry:{review_home['proposed'].id}"],
            "… 1 more: crewlet review"]
        assert f"entry:{review_home['bare'].id}" not in dict(_rows(app))


async def test_a_page_proposal_is_accepted_and_another_declined_from_the_screen(review_home):
    """The queue's first section: a consolidation proposal is a row of its own; a accepts it (the page saved, its
    entries CONSOLIDATED), x declines it, and an agent is refused either in the store's one line."""
    from core.bank.consolidation import Consolidation

    home, page, standing = review_home["home"], review_home["page"], review_home["standing"]
    with Node.open(home) as node, EntryBank(node) as bank:
        c = Consolidation(bank)
        first = c.propose(page.id, "# Caching\n\nCache entries expire after ten minutes.\n", [standing.id],
                          actor="eng-bot")
    app = app_for(home, "eng-bot")
    async with app.run_test(size=SIZE) as pilot:
        await _on_review(pilot, app)
        await _highlight(pilot, app, f"proposal:{first.id}")
        await pilot.press("a")
        await wait_until(pilot, lambda: "a person's" in _said(app, "#review-notice"), what="the agent refused")
    with Node.open(home) as node, EntryBank(node) as bank:
        assert Consolidation(bank).show(first.id).state == "OPEN"
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await _on_review(pilot, app)
        await _highlight(pilot, app, f"proposal:{first.id}")
        assert "x declines" in _said(app, "#review-detail")
        await pilot.press("a")
        await wait_until(pilot, lambda: _said(app, "#review-notice").endswith(": ACCEPTED"), what="accepted")
        await wait_until(pilot, lambda: f"proposal:{first.id}" not in [r[0] for r in _rows(app)], what="re-read")
    with Node.open(home) as node, EntryBank(node) as bank:
        c = Consolidation(bank)
        assert c.show(first.id).state == "ACCEPTED" and bank.show(standing.id).status == "CONSOLIDATED"
        rev = node.conn.execute("SELECT revision FROM pages WHERE id = ?", (page.id,)).fetchone()[0]
        other = bank.add(page.id, "The cache is warmed at start.", actor="alex", distinct=True)
        second = c.propose(page.id, f"# Caching\n\nRevision {rev}, the cache is warmed at start.\n", [other.id],
                           actor="alex")
    app = app_for(home, "alex")
    async with app.run_test(size=SIZE) as pilot:
        await _on_review(pilot, app)
        await _highlight(pilot, app, f"proposal:{second.id}")
        await pilot.press("x")
        await wait_until(pilot, lambda: _said(app, "#review-notice").endswith(": DECLINED"), what="declined")
    with Node.open(home) as node, EntryBank(node) as bank:
        assert Consolidation(bank).show(second.id).state == "DECLINED" and bank.show(other.id).status == "STANDING"
