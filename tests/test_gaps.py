"""Knowledge gaps (issue 37; spec 003 "Upkeep"): the questions `crewlet ask` and `recall_knowledge` could not answer
(nothing above the floor: no hit), counted by their fold; one asked KNOWLEDGE_GAP_ISSUE_MIN_COUNT times gets an
issue "Knowledge gap: <question>" — in a fake Plane served on 127.0.0.1 when [integrations.plane] is configured (the
project of the space owning the module the question names), else a page under that space's GAPS folder — on
KNOWLEDGE_GAP_ISSUES_CRON (the calendar CREWLET_NOW sets); answered once an accepted entry cites the issue."""
from __future__ import annotations

import json
import threading
from datetime import datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from conftest import config_with, new_home
from test_runs import CLEAN_ENV
from test_runs import repo  # noqa: F401 - a fixture, by name
from test_repos_support import GitRepo
from typer.testing import CliRunner

from core.ask.recall import recall
from core.bank.entries import EntryBank
from core.clock import to_ms
from core.duties.runner import PassContext
from core.duties.upkeep import UpkeepDuty, gaps_due
from core.node import Node
from core.paths import Home
from core.sections.bank import Cron
from crewlet_tui.cli import app
from tests.remote_servers import PlaneServer

QUESTION = "Where does the server keep the zebra ledger?"
OTHER = "Who rotates the quokka tokens?"           # names no linked module


def _ms(iso: str) -> int:
    return to_ms(datetime.fromisoformat(iso + "+00:00"))


class PlaneWithIssues(PlaneServer):
    """The fake Plane, with the work-items endpoint upkeep files to (POST …/projects/{id}/issues/)."""

    def __init__(self) -> None:
        super().__init__()
        self.issues: list[dict[str, Any]] = []

    def route(self, h: BaseHTTPRequestHandler, method: str, path: str, query: dict[str, list[str]],
              body: Any) -> tuple[int, Any]:
        rest = path[len(f"/api/v1/workspaces/{self.workspace}/"):].rstrip("/")
        if method == "POST" and rest.startswith("projects/") and rest.endswith("/issues"):
            user = self.keys.get(h.headers.get("X-API-Key") or "")
            project_id = rest.split("/")[1]
            if user is None:
                return 401, {"detail": "Given API token is not valid"}
            if not self._member(user, project_id):
                return 403, {"error": "You are not a member of this project"}
            with self.lock:
                issue = {"id": self._uuid(), "sequence_id": len(self.issues) + 1, "project": project_id,
                         "name": body["name"], "description_html": body.get("description_html", "")}
                self.issues.append(issue)
            return 201, issue
        return super().route(h, method, path, query, body)


class Home_:
    def __init__(self, tmp_path: Path, repo: GitRepo, plane: PlaneServer | None = None, **knowledge: Any) -> None:  # noqa: F811
        changes: dict[str, Any] = {"knowledge": {"backend": "native", **knowledge},
                                   "repositories": {"server": {"path": str(repo.path)}}}
        if plane is not None:
            changes["integrations"] = {"plane": {"url": plane.url, "workspace": "acme", "token_env": "PLANE_KEY",
                                                "enabled": False}}     # the knowledge home stays native
        self.home: Home = new_home(tmp_path / "home", config_with(**changes))
        self.runner = CliRunner()
        with Node.open(self.home) as node, EntryBank(node) as bank:
            page = bank.kb.create_page("ENG", "Caching", "How the cache works.", actor="alex").id
            bank.link_page(page, module="apps/server", actor="alex")
            bank.add(page, "The session cache holds for a minute.", scope="apps/server", actor="alex")

    def cli(self, *args: str, env: dict | None = None):
        return self.runner.invoke(app, ["--home", str(self.home.root), *args],
                                  env={**CLEAN_ENV, "PLANE_KEY": "company-key", **(env or {})})

    def json(self, *args: str) -> Any:
        res = self.cli(*args, "--json")
        assert res.exit_code == 0, (res.exit_code, res.stdout, res.stderr)
        return json.loads(res.stdout)

    def ask(self, question: str) -> None:
        assert self.json("ask", question)["status"] == "no_match"

    def recall(self, question: str) -> None:
        with Node.open(self.home) as node:
            assert recall(node, question, actor="eng-bot").found == []

    def gaps(self) -> dict[str, Any]:
        return {g["question"]: g for g in self.json("gaps")["gaps"]}


@pytest.fixture
def plane():
    with PlaneWithIssues() as server:
        server.key("company-key", "svc")
        server.eng = server.project("ENG", members={"svc"})
        yield server


def test_a_question_asked_n_times_is_filed_in_plane_and_answered_when_an_accepted_entry_cites_it(
        tmp_path, repo, plane):  # noqa: F811
    h = Home_(tmp_path, repo, plane, gap_issue_min_count=3)
    h.ask(QUESTION)
    h.recall("  where does the SERVER keep the zebra ledger ")         # the same question, folded
    h.ask(OTHER)
    h.ask(OTHER)
    h.ask(OTHER)
    gaps = h.gaps()
    assert (gaps[QUESTION]["count"], gaps[QUESTION]["issue"], gaps[QUESTION]["module"]) == (
        2, None, "server:apps/server")
    assert h.json("upkeep", "run")["gaps"]["filed"] == [] and plane.issues == []     # asked N-1 times
    h.ask(QUESTION + "  ")
    out = h.json("upkeep", "run")["gaps"]
    [filed] = out["filed"]
    assert out["unowned"] == [OTHER]                  # asked enough, but no team owns a module it names
    [issue] = plane.issues
    assert (issue["name"], issue["project"]) == (f"Knowledge gap: {QUESTION}", plane.eng)
    assert (filed["ref"], filed["url"]) == ("ENG-1", f"{plane.url}/acme/projects/{plane.eng}/issues/{issue['id']}/")
    gap = h.gaps()[QUESTION]
    assert (gap["count"], gap["issue"]["ref"], gap["answered"]) == (3, "ENG-1", False)
    assert h.json("upkeep", "run")["gaps"]["filed"] == [] and len(plane.issues) == 1     # filed once

    with Node.open(h.home) as node, EntryBank(node) as bank:
        proposed = bank.add("ENG/Caching", "The zebra ledger lives in the server's ledger table.",
                            citations=[{"link": filed["url"], "kind": "issue"}], actor="eng-bot").id
        assert h.gaps()[QUESTION]["answered"] is False             # proposed: not accepted yet
        bank.accept(proposed, actor="alex")
    gap = h.gaps()[QUESTION]
    assert (gap["answered"], gap["answered_by"]) == (True, [proposed])
    assert f"3× {QUESTION} — ENG-1 — answered by {proposed}" in h.cli("gaps").stdout


def test_without_plane_the_issue_is_a_page_under_the_spaces_gaps_folder_answered_by_citing_it(tmp_path, repo):  # noqa: F811
    h = Home_(tmp_path, repo, gap_issue_min_count=2)
    h.ask(QUESTION)
    h.recall(QUESTION)
    [filed] = h.json("upkeep", "run")["gaps"]["filed"]
    assert (filed["where"], filed["ref"]) == ("page", f"ENG/Knowledge gap: {QUESTION}")
    with Node.open(h.home) as node:
        [(title, parent, author)] = [tuple(r) for r in node.conn.execute(
            "SELECT p.title, g.title, p.created_by FROM pages p JOIN pages g ON g.id = p.parent_id WHERE p.id = ?",
            (filed["page"],))]
    assert (title, parent, author) == (f"Knowledge gap: {QUESTION}", "GAPS", "crewlet")
    with Node.open(h.home) as node, EntryBank(node) as bank:
        answer = bank.add("ENG/Caching", "The zebra ledger lives in the ledger table.",
                          citations=[{"link": filed["page"], "kind": "issue"}], actor="alex").id
    assert h.gaps()[QUESTION]["answered_by"] == [answer]


def test_the_duty_files_only_when_the_cron_is_due_on_the_calendar(tmp_path, repo, plane, monkeypatch):  # noqa: F811
    h = Home_(tmp_path, repo, plane, gap_issue_min_count=1)       # KNOWLEDGE_GAP_ISSUES_CRON: Mondays 04:00 UTC
    h.ask(QUESTION)
    monkeypatch.setenv("PLANE_KEY", "company-key")
    last = str(_ms("2027-05-31T04:00:00"))                       # a Monday's pass
    with Node.open(h.home) as node:
        duty = UpkeepDuty(node)
        monkeypatch.setenv("CREWLET_NOW", "2027-06-07T03:59:00Z")   # the next Monday, a minute early
        early = duty.run_pass(PassContext(cursor=last, stop=threading.Event()))
        assert plane.issues == [] and early.cursor == last and early.counts["gaps_filed"] == 0
        assert "gap issues not due" in early.summary
        monkeypatch.setenv("CREWLET_NOW", "2027-06-07T04:00:00Z")
        due = duty.run_pass(PassContext(cursor=last, stop=threading.Event()))
        assert [i["name"] for i in plane.issues] == [f"Knowledge gap: {QUESTION}"]
        assert due.counts["gaps_filed"] == 1 and due.cursor == str(_ms("2027-06-07T04:00:00"))
        monkeypatch.setenv("KNOWLEDGE_GAP_ISSUES_CRON", "off")
        # off never files (KNOWLEDGE_GAP_ISSUES_CRON = off): the duty asks gaps_due, which says no whatever the cursor
    assert gaps_due(Cron(None), None) is False and gaps_due(Cron("0 4 * * 1"), None) is True


def test_a_plane_that_cannot_take_the_issue_files_nothing_and_the_next_run_files_it(tmp_path, repo):  # noqa: F811
    with PlaneWithIssues() as plane:
        plane.key("company-key", "svc")
        h = Home_(tmp_path, repo, plane, gap_issue_min_count=1)
        h.ask(QUESTION)
        out = h.json("upkeep", "run")["gaps"]
        assert out["filed"] == [] and plane.issues == []
        [line] = out["failed"]
        assert line.startswith(QUESTION) and "no Plane project ENG" in line
        assert h.gaps()[QUESTION]["issue"] is None
        with Node.open(h.home) as node:
            assert node.conn.execute("SELECT count(*) FROM upkeep_issues").fetchone()[0] == 0
        plane.project("ENG", members={"svc"})               # the team makes its project: the next run files
        assert [f["ref"] for f in h.json("upkeep", "run")["gaps"]["filed"]] == ["ENG-1"]
        assert h.gaps()[QUESTION]["issue"]["ref"] == "ENG-1"


def test_the_four_upkeep_settings_are_in_effect(tmp_path, repo):  # noqa: F811
    h = Home_(tmp_path, repo)
    rows = {r["key"]: r for r in h.json("settings", "knowledge")["settings"]}
    for key in ("convention_min_runs", "convention_harm_margin", "gap_issue_min_count", "gap_issues_cron"):
        assert rows[key]["in_effect"] is True, key


async def test_the_apps_ask_screen_records_a_question_nothing_matches(tmp_path):
    from test_app_ask import asked_home
    from test_app_support import SIZE, app_for, wait_screen, wait_until

    home, _ = asked_home(tmp_path, None)
    app = app_for(home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        app.open_ask(OTHER)
        await wait_screen(pilot, "AskScreen")
        await wait_until(pilot, lambda: app.screen.answer is not None)
        assert app.screen.answer.status == "no_match"
    with Node.open(home) as node:
        assert [tuple(r) for r in node.conn.execute("SELECT question, via FROM gap_asks")] == [(OTHER, "ask")]
