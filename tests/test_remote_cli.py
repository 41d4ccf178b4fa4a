"""The CLI on a company whose knowledge lives in Confluence (review finding 3), against a Confluence-shaped
server on 127.0.0.1: `page show` reads the site through the remote searcher (inside the read floor), an
agent's reads are recorded and `page reads` shows them, and every command that would write or list this
node's own copy refuses in one line saying where the knowledge lives, with the command that helps."""
from __future__ import annotations

import json

import pytest
from conftest import new_home
from typer.testing import CliRunner

from core import config as config_mod
from crewlet_tui.cli import app
from remote_servers import ConfluenceServer

ENV = {"CLI_CF_TOKEN": "company-token"}


@pytest.fixture
def cf():
    with ConfluenceServer() as server:
        server.user("company-token", "svc")
        for key in ("ENG", "HR", "SKILLS"):
            server.space(key)
        yield server


@pytest.fixture
def home(tmp_path, cf):
    data = config_mod.example_config()
    data["knowledge"] = {"backend": "confluence", "confluence_spaces": ["ENG"]}
    data["integrations"] = {"confluence": {"url": cf.url, "token_env": "CLI_CF_TOKEN"}}
    return new_home(tmp_path / "home", data)


def run(home, *args: str, actor: str | None = None, stdin: str | None = None):
    argv = ["--home", str(home.root), *(["--as", actor] if actor else []), *args]
    return CliRunner().invoke(app, argv, env=ENV, input=stdin)


def refused_line(r) -> str:
    assert r.exit_code == 1, (r.exit_code, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_page_show_reads_the_page_from_the_site(home, cf):
    ops = cf.page("ENG", "Operations", "<p>ops</p>")
    pid = cf.page("ENG", "Deploy Runbook", "<h2>Steps</h2><p>Roll back with the <strong>rollback</strong> job.</p>",
                  parent=ops)
    r = run(home, "page", "show", pid)
    assert r.exit_code == 0, r.output
    assert "Deploy Runbook" in r.stdout and "ENG › Operations › Deploy Runbook" in r.stdout
    assert "Roll back with the **rollback** job." in r.stdout and f"Confluence at {cf.url}" in r.stdout
    out = json.loads(run(home, "page", "show", "ENG/Deploy Runbook", "--json").stdout)
    assert out["id"] == pid and out["body"] == "## Steps\n\nRoll back with the **rollback** job.\n"
    assert out["backend"] == "confluence" and out["url"].startswith(cf.url) and out["ancestors"] == ["Operations"]
    line = refused_line(run(home, "page", "show", cf.page("HR", "Salaries", "<p>pay</p>")))
    assert "no page" in line and "HR is outside knowledge.confluence_spaces" in line and "pay" not in line
    line = refused_line(run(home, "page", "show", pid, "--revision", "1"))
    assert f"lives in Confluence at {cf.url}" in line and "history" in line


def test_an_agents_reads_are_recorded_and_page_reads_shows_them(home, cf):
    pid = cf.page("ENG", "Deploy Runbook", "<p>roll back a deploy</p>")
    assert run(home, "search", "roll", "back", "--mode", "keyword", actor="eng-bot").exit_code == 0
    assert run(home, "page", "show", pid, actor="eng-bot").exit_code == 0
    assert run(home, "page", "show", pid, actor="alex").exit_code == 0         # a person's read is not recorded
    out = json.loads(run(home, "page", "reads", pid, "--json").stdout)
    assert out["page"] == {"id": pid, "container": "ENG", "title": "Deploy Runbook"}
    assert [(r["actor"], r["via"], r["backend"]) for r in out["reads"]] == [("eng-bot", "get_page", "confluence"),
                                                                            ("eng-bot", "search", "confluence")]
    table = run(home, "page", "reads", "ENG/Deploy Runbook")
    assert table.exit_code == 0 and "eng-bot" in table.stdout and "roll back" in table.stdout


@pytest.mark.parametrize("args, hint", [
    (["page", "create", "ENG", "Incident 42"], "crewlet confluence import"),
    (["page", "save", "ENG/Deploy Runbook", "--body-file", "-", "--base-rev", "1"], "crewlet confluence import"),
    (["page", "rename", "ENG/Deploy Runbook", "Runbook"], "crewlet confluence import"),
    (["page", "trash", "ENG/Deploy Runbook"], "crewlet confluence import"),
    (["page", "comment", "ENG/Deploy Runbook", "stale?"], "crewlet confluence import"),
    (["import", "DOCS"], "crewlet confluence import"),
    (["pages", "ENG"], "crewlet search"),
    (["spaces"], "crewlet search"),
    (["trash"], "crewlet search"),
    (["page", "history", "ENG/Deploy Runbook"], "crewlet search"),
    (["page", "backlinks", "ENG/Deploy Runbook"], "crewlet search"),
    (["index", "status"], "crewlet search"),
    (["index", "build"], "crewlet search"),
])
def test_local_copy_commands_refuse_in_one_line_saying_where_the_knowledge_lives(tmp_path, home, cf, args, hint):
    cf.page("ENG", "Deploy Runbook", "<p>roll back</p>")
    docs = tmp_path / "docs" / "ENG"
    docs.mkdir(parents=True)
    (docs / "a.md").write_text("# A\n\nx\n")
    args = [str(tmp_path / "docs") if a == "DOCS" else a for a in args]
    r = run(home, *args, stdin="new body\n")
    line = refused_line(r)
    assert f"this company's knowledge lives in Confluence at {cf.url}" in line and hint in line, line
    as_json = run(home, *args, "--json", stdin="new body\n") if args[0] != "import" else None
    if as_json is not None:
        assert json.loads(as_json.stdout)["error"] == "knowledge_elsewhere"
    assert cf.writes() == []


def test_the_worker_applies_the_log_and_keeps_no_local_copy(home, cf):
    r = run(home, "worker", "--once", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert {d["duty"] for d in out["duties"]} == {"apply", "diary-fill"}      # a diary is this node's own
    assert out["knowledge"] == {"backend": "confluence", "url": cf.url}
    plain = run(home, "worker", "--once")
    assert plain.exit_code == 0 and f"knowledge lives in Confluence at {cf.url}" in plain.stdout
