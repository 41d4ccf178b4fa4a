"""Generated pages (issue 37, spec 003 "Generated pages") on real homes, with a real OpenAI-compatible chat server on
127.0.0.1 (tests/chat_server.py) proposing edits as JSON: a page made with a question and no body, built from the
entries in its scope by the page refresh duty (core/duties/page_refresh.py over core/bank/generated.py); refreshed by
a single-section edit when one entry changes (the other sections byte-identical); left alone (no model asked) when
nothing changed; rebuilt for a new question; a replace of an unchanged section dropped; without a model only the dead
sections removed; the minimum interval and the cron kept on the calendar CREWLET_NOW fixes; a failed build tried once
more, then left to the hourly look; a refresh reverted; taken over by a person and refused to an agent."""
from __future__ import annotations

import json
from datetime import datetime, UTC
from pathlib import Path

import pytest
from chat_server import ChatServer, Reply
from conftest import config_with, new_home

from core.bank.entries import EntryBank
from core.bank.generated import (BUILT, NO_EVIDENCE, NO_MODEL, UNCHANGED, make_generated, refresh, set_question,
                                 take_over, view)
from core.clock import from_ms
from core.duties.page_refresh import PageRefreshDuty
from core.duties.runner import DutyReport
from core.errors import Refused
from core.node import Node
from core.pages.generated_handlers import page_build
from core.pages.service import KnowledgeBase

HOUR_MS = 3_600_000
# 10:30 UTC: the default cron (23 * * * *) is due at 10:23, 11:23 …
T0 = int(datetime(2027, 3, 1, 10, 30, tzinfo=UTC).timestamp() * 1000)


def _iso(ms: int) -> str:
    return from_ms(ms).isoformat().replace("+00:00", "Z")


@pytest.fixture
def chat():
    with ChatServer() as server:
        yield server


@pytest.fixture
def node(tmp_path: Path, chat: ChatServer):
    config = config_with(providers={"llm": {"base_url": chat.url, "model": "page-model", "timeout_s": 20}})
    with Node.open(new_home(tmp_path / "home", config)) as n:
        yield n


def _edits(*edits: dict) -> Reply:
    return Reply(json.dumps({"edits": list(edits)}), stream=False)


def _insert(text: str, *entries: str, after: str | None = None) -> dict:
    return {"op": "insert", "after": after, "text": text, "entries": list(entries)}


class Setup:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.kb = KnowledgeBase(node)
        source = self.kb.create_page("ENG", "Deploy notes", "", actor="alex").id
        with EntryBank(node) as bank:
            self.e = [bank.add(source, body, actor="alex", distinct=True).id for body in (
                "Deploys run from the main branch only.", "A deploy takes about twelve minutes.",
                "Rollback uses the previous image tag.")]
            self.page = make_generated(self.kb, "ENG", "Deploys", question="How do we deploy?", actor="alex").id
            bank.link_page(self.page, page_ref=source, actor="alex")

    def row(self):
        return self.node.conn.execute("SELECT body, revision FROM pages WHERE id = ?", (self.page,)).fetchone()

    def sections(self) -> list[dict]:
        v = view(self.node.conn, self.page, self.row()["body"])
        assert v is not None
        return v["sections"]

    def stored(self) -> list[dict]:
        from core.bank.generated import current_sections
        return current_sections(self.node.conn, self.page, self.row()["body"])


def _pass(node: Node) -> DutyReport:
    from test_entry_duties import one_pass

    return one_pass(node, PageRefreshDuty(node))


def _built(node: Node, chat: ChatServer, s: Setup, monkeypatch) -> None:
    monkeypatch.setenv("CREWLET_NOW", _iso(T0))
    chat.script = [_edits(_insert("Deploy from main.", s.e[0]), _insert("It takes twelve minutes.", s.e[1]),
                          _insert("Roll back to the previous tag.", s.e[2]))]
    report = _pass(node)
    assert report.result.counts["built"] == 1, report.line()


def test_a_generated_page_is_made_with_no_body_and_built_from_its_scope(node, chat, monkeypatch):
    s = Setup(node)
    assert s.row()["body"] == "" and s.row()["revision"] == 1
    assert view(node.conn, s.page, "")["pending_question"] is True
    _built(node, chat, s, monkeypatch)
    assert s.row()["body"] == "Deploy from main.\n\nIt takes twelve minutes.\n\nRoll back to the previous tag."
    assert s.row()["revision"] == 2
    sections = s.sections()
    assert [[c["id"] for c in x["entries"]] for x in sections] == [[s.e[0]], [s.e[1]], [s.e[2]]]
    assert all(c["in_use"] and c["in_scope"] and c["status"] == "STANDING" for x in sections for c in x["entries"])
    # the model was given the question and exactly the entries in scope
    sent = json.loads(chat.bodies[0]["messages"][1]["content"])
    assert sent["question"] == "How do we deploy?" and sorted(e["id"] for e in sent["entries"]) == sorted(s.e)
    # what each section was written from is stored with it
    assert s.stored()[1]["inputs"] == {"question": "How do we deploy?",
                                       "entries": {s.e[1]: "A deploy takes about twelve minutes."}}


def test_one_changed_entry_is_one_section_edit_and_an_unchanged_section_cannot_be_replaced(node, chat, monkeypatch):
    s = Setup(node)
    _built(node, chat, s, monkeypatch)
    before = s.stored()
    with EntryBank(node) as bank:
        bank.edit(s.e[1], body="A deploy takes about twenty minutes.", actor="alex")
    # within the minimum interval (6h) nothing is rebuilt, and no model is asked
    monkeypatch.setenv("CREWLET_NOW", _iso(T0 + 2 * HOUR_MS))
    asked = chat.requests
    assert _pass(node).result.counts["waiting"] == 1 and chat.requests == asked
    monkeypatch.setenv("CREWLET_NOW", _iso(T0 + 7 * HOUR_MS))
    chat.script = [_edits({"op": "replace", "section": before[1]["id"], "text": "It takes twenty minutes.",
                           "entries": [s.e[1]]},
                          {"op": "replace", "section": before[0]["id"], "text": "Rewritten.", "entries": [s.e[0]]},
                          {"op": "remove", "section": before[2]["id"]},
                          _insert("Unread evidence.", "no-such-entry"))]
    report = _pass(node)
    assert report.result.counts["built"] == 1
    after = s.stored()
    assert [json.dumps(x, sort_keys=True) for x in (after[0], after[2])] == [
        json.dumps(x, sort_keys=True) for x in (before[0], before[2])]
    assert after[1]["id"] == before[1]["id"] and after[1]["text"] == "It takes twenty minutes."
    assert after[1]["inputs"]["entries"] == {s.e[1]: "A deploy takes about twenty minutes."}
    assert s.row()["revision"] == 3
    # the section the model was told changed is the one whose entry changed
    sent = json.loads(chat.bodies[-1]["messages"][1]["content"])
    assert [x["changed"] for x in sent["sections"]] == [False, True, False]


def test_nothing_changed_nothing_asked_nothing_written(node, chat, monkeypatch):
    s = Setup(node)
    _built(node, chat, s, monkeypatch)
    asked, revision = chat.requests, s.row()["revision"]
    for hours in (7, 14):
        monkeypatch.setenv("CREWLET_NOW", _iso(T0 + hours * HOUR_MS))
        assert _pass(node).result.counts["built"] == 0
    assert chat.requests == asked and s.row()["revision"] == revision
    assert refresh(node, s.page, chat=None, now=T0 + 15 * HOUR_MS).status == NO_MODEL


def test_a_new_question_is_rebuilt_once_the_interval_passed_even_with_the_look_off(node, chat, monkeypatch):
    s = Setup(node)
    _built(node, chat, s, monkeypatch)
    monkeypatch.setenv("KNOWLEDGE_PAGE_REFRESH_CRON", "off")
    before = s.stored()
    set_question(s.kb, s.page, "How long does a deploy take?", actor="alex")
    monkeypatch.setenv("CREWLET_NOW", _iso(T0 + 1 * HOUR_MS))
    asked = chat.requests
    assert _pass(node).result.counts["waiting"] == 1 and chat.requests == asked
    monkeypatch.setenv("CREWLET_NOW", _iso(T0 + 6 * HOUR_MS + 1))
    # every section was written for the old question: each may be replaced or removed now
    chat.script = [_edits({"op": "replace", "section": before[1]["id"], "text": "About twelve minutes.",
                           "entries": [s.e[1]]},
                          {"op": "remove", "section": before[0]["id"]}, {"op": "remove", "section": before[2]["id"]})]
    assert _pass(node).result.counts["built"] == 1
    assert s.row()["body"] == "About twelve minutes."
    v = view(node.conn, s.page, s.row()["body"])
    assert v["question"] == "How long does a deploy take?" and v["pending_question"] is False
    # a second new question gets its own build too
    set_question(s.kb, s.page, "Who may deploy?", actor="alex")
    monkeypatch.setenv("CREWLET_NOW", _iso(T0 + 13 * HOUR_MS))
    chat.script = [_edits(_insert("Anyone, from main.", s.e[0]))]
    assert _pass(node).result.counts["built"] == 1
    assert view(node.conn, s.page, s.row()["body"])["built_question_no"] == 3


def test_a_failed_build_is_tried_once_more_then_left_to_the_hourly_look(node, chat, monkeypatch):
    s = Setup(node)
    monkeypatch.setenv("CREWLET_NOW", _iso(T0))
    chat.script = [Reply(status=500), Reply(status=500)]
    assert _pass(node).result.counts["failed"] == 1
    monkeypatch.setenv("CREWLET_NOW", _iso(T0 + 60_000))     # the look at 10:23 was taken at 10:30
    assert _pass(node).result.counts["failed"] == 1
    asked = chat.requests
    monkeypatch.setenv("CREWLET_NOW", _iso(T0 + 120_000))
    assert _pass(node).result.counts["unchanged"] == 1 and chat.requests == asked
    monkeypatch.setenv("CREWLET_NOW", _iso(T0 + HOUR_MS))     # 11:30: the 11:23 look
    chat.script = [_edits(_insert("Deploy from main.", s.e[0]))]
    assert _pass(node).result.counts["built"] == 1
    assert s.row()["body"] == "Deploy from main."


def test_without_a_model_only_dead_sections_are_removed(node, chat, monkeypatch):
    s = Setup(node)
    _built(node, chat, s, monkeypatch)
    before = s.stored()
    with EntryBank(node) as bank:
        bank.edit(s.e[0], body="Deploys run from main or a release branch.", actor="alex")
        bank.archive(s.e[2], actor="alex", reason="no rollback any more")
    v = view(node.conn, s.page, s.row()["body"])
    assert v["sections"][2]["no_longer_in_use"] == [s.e[2]]
    out = refresh(node, s.page, chat=None, now=T0 + 7 * HOUR_MS)
    assert out.status == NO_MODEL and out.revision == 3
    after = s.stored()
    # the changed but living section stays as it was; the one whose only entry is archived is gone
    assert [json.dumps(x, sort_keys=True) for x in after] == [json.dumps(x, sort_keys=True) for x in before[:2]]


def test_no_evidence_writes_nothing(node, chat, monkeypatch):
    kb = KnowledgeBase(node)
    page = make_generated(kb, "ENG", "Empty", question="What is there?", actor="alex").id
    out = refresh(node, page, chat=None, now=T0)
    assert out.status == NO_MODEL and out.revision is None
    from core.chat.openai_http import ChatProvider
    provider = ChatProvider(node.company.llm)
    try:
        assert refresh(node, page, chat=provider, now=T0).status == NO_EVIDENCE
    finally:
        provider.close()
    assert chat.requests == 0
    assert node.conn.execute("SELECT revision FROM pages WHERE id = ?", (page,)).fetchone()[0] == 1


def test_a_refresh_is_a_save_in_history_that_a_revert_undoes(node, chat, monkeypatch):
    s = Setup(node)
    _built(node, chat, s, monkeypatch)
    built = s.stored()
    with EntryBank(node) as bank:
        bank.edit(s.e[1], body="A deploy takes about twenty minutes.", actor="alex")
    monkeypatch.setenv("CREWLET_NOW", _iso(T0 + 7 * HOUR_MS))
    chat.script = [_edits({"op": "replace", "section": built[1]["id"], "text": "Twenty minutes.",
                           "entries": [s.e[1]]})]
    _pass(node)
    old = node.conn.execute("SELECT body FROM revisions WHERE page_id = ? AND revision = 2", (s.page,)).fetchone()[0]
    s.kb.save_page(s.page, old, base_revision=3, actor="alex", message="revert the refresh")
    assert s.row()["revision"] == 4 and s.stored() == built


def test_a_person_takes_a_page_over_and_an_agent_is_refused(node, chat, monkeypatch):
    s = Setup(node)
    _built(node, chat, s, monkeypatch)
    with pytest.raises(Refused) as refused:
        take_over(s.kb, s.page, actor="eng-bot")
    assert refused.value.code == "person_only"
    # the store refuses the agent's record too, whoever wrote it
    from core.pages.generated_handlers import page_generated
    out = node.submit_one(page_generated("eng-bot", page_id=s.page, action="takeover", by_kind="agent"))
    assert out.status == "refused" and out.code == "person_only"
    take_over(s.kb, s.page, actor="alex")
    assert view(node.conn, s.page, s.row()["body"])["state"] == "authored"
    with EntryBank(node) as bank:
        bank.edit(s.e[1], body="A deploy takes about twenty minutes.", actor="alex")
    monkeypatch.setenv("CREWLET_NOW", _iso(T0 + 7 * HOUR_MS))
    asked = chat.requests
    report = _pass(node)
    assert report.result.counts["built"] == 0 and chat.requests == asked
    assert refresh(node, s.page, chat=None).status == "not_generated"
    out = node.submit_one(page_build("crewlet", page_id=s.page, base_revision=2, body="x", sections=[],
                                     question_no=1, digest="", built_at=T0))
    assert out.status == "refused" and out.code == "taken_over"
    # authored now: a person saves it as any page
    s.kb.save_page(s.page, "Written by hand.", base_revision=2, actor="alex")
    assert UNCHANGED and BUILT  # the outcomes' names stay importable for callers


def test_get_page_gives_the_sections_with_their_entries_tier_and_use(node, chat, monkeypatch):
    from core.mcp.session import Session
    from core.mcp.tools.get_page import read

    s = Setup(node)
    _built(node, chat, s, monkeypatch)
    with EntryBank(node) as bank:
        bank.archive(s.e[2], actor="alex", reason="no rollback any more")
    session = Session(node, "eng-bot")
    try:
        reply = read(session, s.page)
    finally:
        session.close()
    generated = reply.data["generated"]
    assert generated["question"] == "How do we deploy?" and generated["state"] == "generated"
    assert [x["no_longer_in_use"] for x in generated["sections"]] == [[], [], [s.e[2]]]
    assert [c["tier"] for x in generated["sections"] for c in x["entries"]] == ["UNGROUNDED"] * 3
    assert f"{s.e[2]} (UNGROUNDED, no longer in use)" in reply.text and f"{s.e[0]} (UNGROUNDED)" in reply.text
    assert "Question: How do we deploy?" in reply.text


def test_the_cli_makes_refreshes_shows_and_takes_over_a_generated_page(tmp_path, chat):
    from typer.testing import CliRunner

    from crewlet_tui.cli_root import app

    config = config_with(providers={"llm": {"base_url": chat.url, "model": "page-model", "timeout_s": 20}})
    home = new_home(tmp_path / "home", config)
    env = {"CREWLET_HOME": None, "CREWLET_AS": None, "COLUMNS": "120"}
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(app, ["--home", str(home.root), *args], env=env)

    with Node.open(home) as n:
        source = KnowledgeBase(n).create_page("ENG", "Deploy notes", "", actor="alex").id
        with EntryBank(n) as bank:
            entry = bank.add(source, "Deploys run from the main branch only.", actor="alex", distinct=True).id
    made = run("page", "create", "ENG", "Deploys", "--generated", "--question", "How do we deploy?", "--json")
    assert made.exit_code == 0, made.output
    page = json.loads(made.stdout)["id"]
    assert run("page", "link", page, "--page", source).exit_code == 0
    chat.script = [_edits(_insert("Deploy from main.", entry))]
    built = run("page", "refresh", page, "--json")
    assert built.exit_code == 0, built.output
    assert json.loads(built.stdout)["status"] == BUILT
    shown = json.loads(run("page", "show", page, "--json").stdout)
    assert shown["body"] == "Deploy from main."
    assert shown["generated"]["sections"][0]["entries"][0]["id"] == entry
    assert "Question: How do we deploy?" in run("page", "show", page).stdout
    usage = run("page", "create", "ENG", "Other", "--generated")
    assert usage.exit_code == 2
    agent = run("--as", "eng-bot", "page", "takeover", page)
    assert agent.exit_code == 1 and len(agent.stderr.strip().splitlines()) == 1 and "person" in agent.stderr
    assert json.loads(run("page", "takeover", page, "--json").stdout)["state"] == "authored"


async def test_the_page_screen_shows_each_section_with_its_entries_tier_and_which_are_out_of_use(tmp_path, chat,
                                                                                                monkeypatch):
    from test_app_support import app_for, wait_screen, wait_until

    config = config_with(providers={"llm": {"base_url": chat.url, "model": "page-model", "timeout_s": 20}})
    home = new_home(tmp_path / "home", config)
    with Node.open(home) as n:
        s = Setup(n)
        _built(n, chat, s, monkeypatch)
        with EntryBank(n) as bank:
            bank.archive(s.e[2], actor="alex", reason="no rollback any more")
    app = app_for(home, "alex")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_page(s.page)
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: app.screen.view is not None, what="the page read")
        shown = str(app.screen.query_one("#page-generated").render())
        assert "Question: How do we deploy?" in shown and "read-only here" in shown
        assert f"{s.e[0]} (UNGROUNDED)" in shown
        assert f"{s.e[2]} (UNGROUNDED, no longer in use)" in shown
        assert app.screen.check_action("edit", ()) is False     # read-only until a person takes it over
        assert app.screen.check_action("take_over", ()) is True
        screen = app.screen
        await pilot.press("h")
        await wait_screen(pilot, "ConfirmModal")
        await pilot.press("y")
        await wait_screen(pilot, "PageScreen")
        await wait_until(pilot, lambda: screen.view is not None and (screen.view.generated or {}).get("state")
                         == "authored", what="taken over, read again")
        assert screen.check_action("edit", ()) is True and screen.check_action("take_over", ()) is False
        assert "taken over: authored" in str(screen.query_one("#page-generated").render())
    with Node.open(home) as n:
        assert view(n.conn, s.page, "")["state"] == "authored"


def test_over_mcp_a_person_makes_a_generated_page_and_an_agent_is_refused(node):
    from core.mcp.session import Session
    from core.mcp.tools import TOOLS
    from core.mcp.tools.make_generated_page import MakeGeneratedArgs, run

    tool = next(t for t in TOOLS if t.name == "make_generated_page")
    assert tool.audience == "person"
    args = MakeGeneratedArgs(container="ENG", title="Deploys", question="How do we deploy?")
    person = Session(node, "alex")
    try:
        reply = run(person, args)
    finally:
        person.close()
    made = reply.data["id"]
    assert view(node.conn, made, "")["question"] == "How do we deploy?"
    agent = Session(node, "eng-bot")
    try:
        with pytest.raises(Refused) as refused:
            run(agent, MakeGeneratedArgs(container="ENG", title="Other", question="Why?"))
    finally:
        agent.close()
    assert refused.value.code == "person_only"
    assert node.conn.execute("SELECT COUNT(*) FROM generated_pages").fetchone()[0] == 1


def test_a_page_with_no_evidence_is_asked_twice_then_left_to_the_hourly_look(node, chat, monkeypatch):
    kb = KnowledgeBase(node)
    page = make_generated(kb, "ENG", "Empty", question="What is there?", actor="alex").id
    monkeypatch.setenv("CREWLET_NOW", _iso(T0))
    assert _pass(node).result.counts["no_evidence"] == 1
    monkeypatch.setenv("CREWLET_NOW", _iso(T0 + 60_000))
    assert _pass(node).result.counts["no_evidence"] == 1
    monkeypatch.setenv("CREWLET_NOW", _iso(T0 + 120_000))
    assert _pass(node).result.counts["unchanged"] == 1          # waits for the 11:23 look
    with EntryBank(node) as bank:
        entry = bank.add(page, "The page has one fact now.", actor="alex", distinct=True).id
    chat.script = [_edits(_insert("One fact.", entry))]
    monkeypatch.setenv("CREWLET_NOW", _iso(T0 + HOUR_MS))
    assert _pass(node).result.counts["built"] == 1
    assert chat.requests == 1
